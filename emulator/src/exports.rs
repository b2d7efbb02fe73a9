//! Which symbol version each exported function carries, in one table. Each entry
//! defines, in assembly, the versioned symbol `NAME@@VERSION` (the default version, as
//! rdma-core's `.symver`s make them) as a jump to the Rust function. The Rust functions
//! themselves are not exported: rustc's own version script would list them as global
//! without a version, and a `.symver` cannot reach a function in another codegen unit.
//! `libibverbs.map` defines the version nodes.

macro_rules! symbol_versions {
    ($($name:ident = $path:path => $ver:literal,)*) => {
        std::arch::global_asm!(
            ".pushsection .text,\"ax\",@progbits",
            $(
                concat!(".globl \"", stringify!($name), "@@", $ver, "\""),
                concat!(".type \"", stringify!($name), "@@", $ver, "\", @function"),
                concat!("\"", stringify!($name), "@@", $ver, "\":"),
                concat!("jmp {", stringify!($name), "}"),
            )*
            ".popsection",
            $($name = sym $path,)*
        );

        /// Every exported function and its version node, as programs link to them.
        pub const EXPORTS: &[(&str, &str)] = &[$((stringify!($name), $ver),)*];
    };
}

symbol_versions! {
    ibv_copy_path_rec_from_kern = crate::kern::ibv_copy_path_rec_from_kern => "IBVERBS_1.0",
    ibv_copy_path_rec_to_kern = crate::kern::ibv_copy_path_rec_to_kern => "IBVERBS_1.0",
    ibv_copy_qp_attr_from_kern = crate::kern::ibv_copy_qp_attr_from_kern => "IBVERBS_1.0",
    ibv_create_comp_channel = crate::resources::ibv_create_comp_channel => "IBVERBS_1.0",
    ibv_destroy_comp_channel = crate::resources::ibv_destroy_comp_channel => "IBVERBS_1.0",
    ibv_get_sysfs_path = crate::device::ibv_get_sysfs_path => "IBVERBS_1.0",
    ibv_rate_to_mult = crate::rates::ibv_rate_to_mult => "IBVERBS_1.0",
    ibv_read_sysfs_file = crate::device::ibv_read_sysfs_file => "IBVERBS_1.0",
    mult_to_ibv_rate = crate::rates::mult_to_ibv_rate => "IBVERBS_1.0",
    ibv_ack_async_event = crate::async_events::ibv_ack_async_event => "IBVERBS_1.1",
    ibv_ack_cq_events = crate::resources::ibv_ack_cq_events => "IBVERBS_1.1",
    ibv_alloc_pd = crate::resources::ibv_alloc_pd => "IBVERBS_1.1",
    ibv_attach_mcast = crate::resources::ibv_attach_mcast => "IBVERBS_1.1",
    ibv_close_device = crate::device::ibv_close_device => "IBVERBS_1.1",
    ibv_copy_ah_attr_from_kern = crate::kern::ibv_copy_ah_attr_from_kern => "IBVERBS_1.1",
    ibv_create_ah = crate::resources::ibv_create_ah => "IBVERBS_1.1",
    ibv_create_ah_from_wc = crate::ah::ibv_create_ah_from_wc => "IBVERBS_1.1",
    ibv_create_cq = crate::resources::ibv_create_cq => "IBVERBS_1.1",
    ibv_create_qp = crate::resources::ibv_create_qp => "IBVERBS_1.1",
    ibv_create_srq = crate::srq::ibv_create_srq => "IBVERBS_1.1",
    ibv_dealloc_pd = crate::resources::ibv_dealloc_pd => "IBVERBS_1.1",
    ibv_dereg_mr = crate::resources::ibv_dereg_mr => "IBVERBS_1.1",
    ibv_destroy_ah = crate::resources::ibv_destroy_ah => "IBVERBS_1.1",
    ibv_destroy_cq = crate::resources::ibv_destroy_cq => "IBVERBS_1.1",
    ibv_destroy_qp = crate::resources::ibv_destroy_qp => "IBVERBS_1.1",
    ibv_destroy_srq = crate::srq::ibv_destroy_srq => "IBVERBS_1.1",
    ibv_detach_mcast = crate::resources::ibv_detach_mcast => "IBVERBS_1.1",
    ibv_dofork_range = crate::device::ibv_dofork_range => "IBVERBS_1.1",
    ibv_dontfork_range = crate::device::ibv_dontfork_range => "IBVERBS_1.1",
    ibv_event_type_str = crate::strings::ibv_event_type_str => "IBVERBS_1.1",
    ibv_fork_init = crate::device::ibv_fork_init => "IBVERBS_1.1",
    ibv_free_device_list = crate::device::ibv_free_device_list => "IBVERBS_1.1",
    ibv_get_async_event = crate::async_events::ibv_get_async_event => "IBVERBS_1.1",
    ibv_get_cq_event = crate::resources::ibv_get_cq_event => "IBVERBS_1.1",
    ibv_get_device_guid = crate::device::ibv_get_device_guid => "IBVERBS_1.1",
    ibv_get_device_list = crate::device::ibv_get_device_list => "IBVERBS_1.1",
    ibv_get_device_name = crate::device::ibv_get_device_name => "IBVERBS_1.1",
    ibv_init_ah_from_wc = crate::ah::ibv_init_ah_from_wc => "IBVERBS_1.1",
    ibv_modify_qp = crate::resources::ibv_modify_qp => "IBVERBS_1.1",
    ibv_modify_srq = crate::srq::ibv_modify_srq => "IBVERBS_1.1",
    ibv_node_type_str = crate::strings::ibv_node_type_str => "IBVERBS_1.1",
    ibv_open_device = crate::device::ibv_open_device => "IBVERBS_1.1",
    ibv_port_state_str = crate::strings::ibv_port_state_str => "IBVERBS_1.1",
    ibv_query_device = crate::device::ibv_query_device => "IBVERBS_1.1",
    ibv_query_gid = crate::device::ibv_query_gid => "IBVERBS_1.1",
    ibv_query_pkey = crate::device::ibv_query_pkey => "IBVERBS_1.1",
    ibv_query_port = crate::device::ibv_query_port_compat => "IBVERBS_1.1",
    ibv_query_qp = crate::resources::ibv_query_qp => "IBVERBS_1.1",
    ibv_query_srq = crate::srq::ibv_query_srq => "IBVERBS_1.1",
    ibv_rate_to_mbps = crate::rates::ibv_rate_to_mbps => "IBVERBS_1.1",
    ibv_reg_mr = crate::resources::ibv_reg_mr => "IBVERBS_1.1",
    ibv_rereg_mr = crate::refused::ibv_rereg_mr => "IBVERBS_1.1",
    ibv_resize_cq = crate::resources::ibv_resize_cq => "IBVERBS_1.1",
    ibv_resolve_eth_l2_from_gid = crate::device::ibv_resolve_eth_l2_from_gid => "IBVERBS_1.1",
    ibv_wc_status_str = crate::strings::ibv_wc_status_str => "IBVERBS_1.1",
    mbps_to_ibv_rate = crate::rates::mbps_to_ibv_rate => "IBVERBS_1.1",
    ibv_get_pkey_index = crate::device::ibv_get_pkey_index => "IBVERBS_1.5",
    ibv_qp_to_qp_ex = crate::resources::ibv_qp_to_qp_ex => "IBVERBS_1.6",
    ibv_reg_mr_iova = crate::resources::ibv_reg_mr_iova => "IBVERBS_1.7",
    ibv_reg_mr_iova2 = crate::resources::ibv_reg_mr_iova2 => "IBVERBS_1.8",
    ibv_get_device_index = crate::device::ibv_get_device_index => "IBVERBS_1.9",
    ibv_import_device = crate::refused::ibv_import_device => "IBVERBS_1.10",
    ibv_import_mr = crate::refused::ibv_import_mr => "IBVERBS_1.10",
    ibv_import_pd = crate::refused::ibv_import_pd => "IBVERBS_1.10",
    ibv_query_ece = crate::refused::ibv_query_ece => "IBVERBS_1.10",
    ibv_set_ece = crate::refused::ibv_set_ece => "IBVERBS_1.10",
    ibv_unimport_mr = crate::refused::ibv_unimport_mr => "IBVERBS_1.10",
    ibv_unimport_pd = crate::refused::ibv_unimport_pd => "IBVERBS_1.10",
    _ibv_query_gid_ex = crate::device::_ibv_query_gid_ex => "IBVERBS_1.11",
    _ibv_query_gid_table = crate::device::_ibv_query_gid_table => "IBVERBS_1.11",
    ibv_reg_dmabuf_mr = crate::refused::ibv_reg_dmabuf_mr => "IBVERBS_1.12",
    ibv_import_dm = crate::refused::ibv_import_dm => "IBVERBS_1.13",
    ibv_is_fork_initialized = crate::device::ibv_is_fork_initialized => "IBVERBS_1.13",
    ibv_unimport_dm = crate::refused::ibv_unimport_dm => "IBVERBS_1.13",
    ibv_query_qp_data_in_order = crate::refused::ibv_query_qp_data_in_order => "IBVERBS_1.14",
    ibv_query_gid_type = crate::device::ibv_query_gid_type => "IBVERBS_PRIVATE_34",
}
