//! verbs-api's structs and the C structs laid out with libibverbs' field names
//! (`struct ibv_qp_cap`, `struct ibv_qp_attr`, ...), whichever crate defines the C struct:
//! backend-hw's shim declares flat mirrors of them and the emulator has rdma-core's own
//! through bindgen.
//!
//! - [`c_mirrored!`] declares a verbs-api struct from its list of fields, and with it an
//!   exported macro that declares the struct's flat `#[repr(C)]` twin from the same list
//!   (backend-hw's `shim_port_attr`, `shim_device_attr`, `shim_qp_cap`, `shim_qp_attr`).
//! - The `*_fields!` macros convert field by field, for both crates.
//!
//! One copy of each field list, so that a field added to [`QpAttr`] reaches both.
//!
//! [`QpAttr`]: crate::QpAttr

/// Declares a verbs-api struct mirroring a libibverbs struct, and an exported macro
/// `$mirror!` declaring its flat `#[repr(C)]` twin for a C shim: the same fields in the
/// same order, each with the fixed-width C type named after `=>` (enums and flags as
/// their raw value, `bool` as `u8`). A C type may be a parameter of the twin, written
/// `($ name)` and given by the caller as `struct twin<name = Type> { ... }`, for a field
/// whose type is another twin. Fields after `rust_only:` have no C counterpart. The
/// caller of `$mirror!` names the twin, gives its derives, and may append fields of its
/// own (`ex_supported`, padding).
///
/// The first token is `$`, for the variables of the macro declared inside.
macro_rules! c_mirrored {
    (
        $d:tt
        $(#[$meta:meta])*
        pub struct $name:ident mirrored by $mirror:ident $(<$($param:ident),+>)? {
            $( $(#[$fmeta:meta])* pub $field:ident : $rty:ty => $cty:tt, )+
            $( rust_only: $( $(#[$rmeta:meta])* pub $rfield:ident : $rrty:ty, )+ )?
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $rty, )+
            $($( $(#[$rmeta])* pub $rfield: $rrty, )+)?
        }

        #[doc = concat!(
            "Declares the flat `#[repr(C)]` twin of [`", stringify!($name), "`](crate::",
            stringify!($name), "): its fields in its order, as fixed-width C values, then ",
            "the caller's own fields: `", stringify!($mirror), "! { #[derive(...)] pub ",
            "struct name", $("<", stringify!($($param = Type),+), ">",)?
            " { extra fields } }`."
        )]
        #[macro_export]
        macro_rules! $mirror {
            (
                $d(#[$d m:meta])*
                $d vis:vis struct $d n:ident $(<$($param = $d $param:ty),+>)?
                { $d($d extra:tt)* }
            ) => {
                $d(#[$d m])*
                #[repr(C)]
                #[allow(unused_parens)] // a parameter type stands as `($ name)`
                $d vis struct $d n {
                    $( pub $field: $cty, )+
                    $d($d extra)*
                }
            };
        }
    };
}

pub(crate) use c_mirrored;

/// Converts between [`crate::QpCap`] and a C `struct ibv_qp_cap`-shaped struct:
/// `qp_cap_fields!(to path::ibv_qp_cap, &cap)` or `qp_cap_fields!(from &c)`.
#[macro_export]
macro_rules! qp_cap_fields {
    (to $ty:path, $c:expr) => {{
        let c: &$crate::QpCap = $c;
        $ty {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }};
    (from $c:expr) => {{
        let c = $c;
        $crate::QpCap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }};
}

/// A [`crate::AhAttr`] from a C `struct ibv_ah_attr`-shaped struct, its GRH made by the
/// caller (`grh: GlobalRoute { ... }`: the C layouts nest it differently):
/// `ah_attr_fields!(from &c, grh: route)`.
#[macro_export]
macro_rules! ah_attr_fields {
    (from $a:expr, grh: $grh:expr $(,)?) => {{
        let a = $a;
        $crate::AhAttr {
            grh: $grh,
            dlid: a.dlid,
            sl: a.sl,
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            is_global: a.is_global != 0,
            port_num: a.port_num,
        }
    }};
}

/// Converts between [`crate::QpAttr`] and a C `struct ibv_qp_attr`-shaped struct. The
/// address vectors and queue sizes go through the caller's `ah` and `cap` functions
/// (their C layouts differ between crates), and the four enum fields through the caller's
/// expressions (`from`: how a raw value out of range is treated is the caller's choice).
/// Fields the C struct has beyond libibverbs' (padding) follow as `name: value`.
///
/// ```ignore
/// qp_attr_fields!(to ffi::ibv_qp_attr, &attr, cap: cap_to_c, ah: ah_to_c)
/// qp_attr_fields!(from &c, cap: cap_from_c, ah: ah_from_c,
///     qp_state: s, cur_qp_state: cs, path_mtu: m, path_mig_state: pm)
/// ```
#[macro_export]
macro_rules! qp_attr_fields {
    (to $ty:path, $a:expr, cap: $cap:expr, ah: $ah:expr $(, $extra:ident : $ev:expr)* $(,)?) => {{
        let a: &$crate::QpAttr = $a;
        $ty {
            qp_state: a.qp_state.as_raw(),
            cur_qp_state: a.cur_qp_state.as_raw(),
            path_mtu: a.path_mtu.as_raw(),
            path_mig_state: a.path_mig_state.as_raw(),
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            qp_access_flags: a.qp_access_flags.bits(),
            cap: $cap(&a.cap),
            ah_attr: $ah(&a.ah_attr),
            alt_ah_attr: $ah(&a.alt_ah_attr),
            pkey_index: a.pkey_index,
            alt_pkey_index: a.alt_pkey_index,
            en_sqd_async_notify: u8::from(a.en_sqd_async_notify),
            sq_draining: u8::from(a.sq_draining),
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            alt_port_num: a.alt_port_num,
            alt_timeout: a.alt_timeout,
            rate_limit: a.rate_limit,
            $($extra: $ev,)*
        }
    }};
    (
        from $a:expr, cap: $cap:expr, ah: $ah:expr,
        qp_state: $s:expr, cur_qp_state: $cs:expr, path_mtu: $m:expr,
        path_mig_state: $pm:expr $(,)?
    ) => {{
        let a = $a;
        $crate::QpAttr {
            qp_state: $s,
            cur_qp_state: $cs,
            path_mtu: $m,
            path_mig_state: $pm,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            qp_access_flags: $crate::AccessFlags::from_bits_retain(a.qp_access_flags),
            cap: $cap(&a.cap),
            ah_attr: $ah(&a.ah_attr),
            alt_ah_attr: $ah(&a.alt_ah_attr),
            pkey_index: a.pkey_index,
            alt_pkey_index: a.alt_pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify != 0,
            sq_draining: a.sq_draining != 0,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            alt_port_num: a.alt_port_num,
            alt_timeout: a.alt_timeout,
            rate_limit: a.rate_limit,
        }
    }};
}
