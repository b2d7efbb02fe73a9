//! Field-by-field conversions between verbs-api's values and C structs laid out with
//! libibverbs' field names (`struct ibv_qp_cap`, `struct ibv_qp_attr`), whichever crate
//! defines the struct: backend-hw's shim mirrors them and the emulator has rdma-core's
//! own through bindgen. One copy of the field list, so that a field added to [`QpAttr`]
//! reaches both.
//!
//! [`QpAttr`]: crate::QpAttr

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

#[cfg(test)]
mod tests {
    use crate::{AhAttr, Gid, Mtu, PathMigState, QpAttr, QpCap, QpState};

    /// A C-shaped mirror with libibverbs' field names, as the other crates have.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct CCap {
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
        max_inline_data: u32,
    }

    struct CAttr {
        qp_state: u32,
        cur_qp_state: u32,
        path_mtu: u32,
        path_mig_state: u32,
        qkey: u32,
        rq_psn: u32,
        sq_psn: u32,
        dest_qp_num: u32,
        qp_access_flags: u32,
        cap: CCap,
        ah_attr: AhAttr,
        alt_ah_attr: AhAttr,
        pkey_index: u16,
        alt_pkey_index: u16,
        en_sqd_async_notify: u8,
        sq_draining: u8,
        max_rd_atomic: u8,
        max_dest_rd_atomic: u8,
        min_rnr_timer: u8,
        port_num: u8,
        timeout: u8,
        retry_cnt: u8,
        rnr_retry: u8,
        alt_port_num: u8,
        alt_timeout: u8,
        rate_limit: u32,
        pad: u8,
    }

    fn cap_to(c: &QpCap) -> CCap {
        qp_cap_fields!(to CCap, c)
    }

    fn cap_from(c: &CCap) -> QpCap {
        qp_cap_fields!(from c)
    }

    #[test]
    fn qp_attr_round_trips_through_a_c_shaped_struct() {
        let a = QpAttr {
            qp_state: QpState::Rts,
            path_mtu: Mtu::Mtu2048,
            path_mig_state: PathMigState::Rearm,
            dest_qp_num: 0x12,
            sq_psn: 0xabcdef,
            cap: QpCap {
                max_send_wr: 7,
                max_recv_wr: 9,
                max_send_sge: 2,
                max_recv_sge: 3,
                max_inline_data: 64,
            },
            ah_attr: AhAttr::roce(Gid([5; 16]), 1, 1),
            sq_draining: true,
            timeout: 14,
            rate_limit: 100,
            ..QpAttr::default()
        };
        let c = qp_attr_fields!(to CAttr, &a, cap: cap_to, ah: |x: &AhAttr| *x, pad: 0);
        assert_eq!((c.qp_state, c.sq_draining, c.pad), (3, 1, 0));
        let back = qp_attr_fields!(
            from &c, cap: cap_from, ah: |x: &AhAttr| *x,
            qp_state: QpState::from_raw(c.qp_state).unwrap(),
            cur_qp_state: QpState::from_raw(c.cur_qp_state).unwrap(),
            path_mtu: Mtu::from_raw(c.path_mtu).unwrap(),
            path_mig_state: PathMigState::from_raw(c.path_mig_state).unwrap(),
        );
        assert_eq!(back, a);
    }
}
