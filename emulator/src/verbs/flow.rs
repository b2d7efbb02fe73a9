//! Flow steering (`verbs_context.ibv_create_flow` / `ibv_destroy_flow`, reached through
//! the inline `ibv_create_flow`): a `struct ibv_flow_attr` followed by its specs, read into
//! verbs-api's [`FlowAttr`].

use std::ffi::c_int;
use std::net::Ipv4Addr;
use std::ptr::null_mut;

use backend_sim::verbs::SimFlow;
use verbs_api::{
    Context, EthFilter, FlowAttr, FlowFlags, FlowRuleType, FlowSpec, Ipv4Filter, PortFilter,
};

use crate::base::boundary::{boundary, Null, ReturnsErrno};
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::base::pointer::try_ref_from_ptr;
use crate::objects::handles::{context, hand_out, take_back, EmuQp, Handed};
use crate::runtime::leaks::Kind;

/// A flow rule: `struct ibv_flow` and the simulator's rule.
#[repr(C)]
#[derive(Debug)]
pub struct EmuFlow {
    /// `struct ibv_flow`.
    pub raw: ffi::ibv_flow,
    /// The simulator's rule (dropping it removes the rule).
    pub flow: SimFlow,
}

fn eth_filter(f: &ffi::ibv_flow_eth_filter) -> EthFilter {
    EthFilter {
        dst_mac: f.dst_mac,
        src_mac: f.src_mac,
        ether_type: u16::from_be(f.ether_type),
        vlan_tag: u16::from_be(f.vlan_tag),
    }
}

fn ipv4_filter(f: &ffi::ibv_flow_ipv4_filter) -> Ipv4Filter {
    Ipv4Filter {
        src_ip: Ipv4Addr::from(u32::from_be(f.src_ip)),
        dst_ip: Ipv4Addr::from(u32::from_be(f.dst_ip)),
    }
}

fn port_filter(f: &ffi::ibv_flow_tcp_udp_filter) -> PortFilter {
    PortFilter {
        dst_port: u16::from_be(f.dst_port),
        src_port: u16::from_be(f.src_port),
    }
}

/// Reads a spec of type `S` at `p`, whose header says it is `size` bytes.
///
/// # Safety
/// `p` points at `size` readable bytes.
unsafe fn read_spec<S: Copy>(p: *const u8, size: usize) -> Result<S, c_int> {
    if size != std::mem::size_of::<S>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `size` bytes are readable and are an S (the program built it as one).
    Ok(unsafe { p.cast::<S>().read_unaligned() })
}

/// Reads a flow attribute and the specs that follow it in memory.
///
/// # Errors
/// `EINVAL` for a bad type, flag or spec size; `EOPNOTSUPP` for spec types the emulator
/// does not match on (IPv6, tunnels, actions ...), logged once.
///
/// # Safety
/// `attr` points at a `struct ibv_flow_attr` followed by `num_of_specs` specs, each
/// as long as its `size` says.
pub unsafe fn flow_attr_from_c(attr: *const ffi::ibv_flow_attr) -> Result<FlowAttr, c_int> {
    // SAFETY: the caller's valid attribute.
    let a = unsafe { attr.read_unaligned() };
    if a.comp_mask != 0 {
        return Err(libc::EINVAL);
    }
    let rule_type = FlowRuleType::from_raw(a.type_).ok_or(libc::EINVAL)?;
    let flags = FlowFlags::from_bits(a.flags).ok_or(libc::EINVAL)?;
    let mut specs = Vec::with_capacity(usize::from(a.num_of_specs));
    // SAFETY: the specs follow the attribute (the verbs ABI).
    let mut p = unsafe {
        attr.cast::<u8>()
            .add(std::mem::size_of::<ffi::ibv_flow_attr>())
    };
    for _ in 0..a.num_of_specs {
        // SAFETY: every spec starts with a 32-bit type and a 16-bit size.
        let (ty, size) = unsafe {
            let h = p.cast::<ffi::ibv_flow_spec_eth>();
            (
                std::ptr::addr_of!((*h).type_).read_unaligned(),
                usize::from(std::ptr::addr_of!((*h).size).read_unaligned()),
            )
        };
        let spec = match ty {
            ffi::IBV_FLOW_SPEC_ETH => {
                // SAFETY: the spec's header says it is `size` bytes at `p`.
                let s: ffi::ibv_flow_spec_eth = unsafe { read_spec(p, size) }?;
                FlowSpec::Eth {
                    val: eth_filter(&s.val),
                    mask: eth_filter(&s.mask),
                }
            }
            ffi::IBV_FLOW_SPEC_IPV4 => {
                // SAFETY: the spec's header says it is `size` bytes at `p`.
                let s: ffi::ibv_flow_spec_ipv4 = unsafe { read_spec(p, size) }?;
                FlowSpec::Ipv4 {
                    val: ipv4_filter(&s.val),
                    mask: ipv4_filter(&s.mask),
                }
            }
            ffi::IBV_FLOW_SPEC_TCP | ffi::IBV_FLOW_SPEC_UDP => {
                // SAFETY: the spec's header says it is `size` bytes at `p`.
                let s: ffi::ibv_flow_spec_tcp_udp = unsafe { read_spec(p, size) }?;
                let (val, mask) = (port_filter(&s.val), port_filter(&s.mask));
                if ty == ffi::IBV_FLOW_SPEC_TCP {
                    FlowSpec::Tcp { val, mask }
                } else {
                    FlowSpec::Udp { val, mask }
                }
            }
            other => {
                log_unsupported_once(
                    "ibv_create_flow",
                    &format!("flow spec type {other:#x}; ETH, IPV4, TCP and UDP are"),
                );
                return Err(libc::EOPNOTSUPP);
            }
        };
        specs.push(spec);
        if size == 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: the next spec starts right after this one.
        p = unsafe { p.add(size) };
    }
    Ok(FlowAttr {
        rule_type,
        priority: a.priority,
        port: a.port,
        flags,
        specs,
    })
}

/// `verbs_context.ibv_create_flow`.
///
/// # Safety
/// `qp` is a live QP of ours; `attr` is a flow attribute with its specs.
pub unsafe extern "C" fn create_flow(
    qp: *mut ffi::ibv_qp,
    attr: *mut ffi::ibv_flow_attr,
) -> *mut ffi::ibv_flow {
    boundary(Null, move || {
        let einval = || {
            set_errno(libc::EINVAL);
            null_mut()
        };
        // SAFETY: NULL or a live QP of ours.
        let q: &EmuQp = unsafe { try_ref_from_ptr!(qp, einval()) };
        if attr.is_null() {
            return einval();
        }
        // SAFETY: the caller's attribute with its specs.
        let a = match unsafe { flow_attr_from_c(attr) } {
            Ok(a) => a,
            Err(e) => {
                set_errno(e);
                return null_mut();
            }
        };
        // SAFETY: the QP's live context.
        let c = unsafe { context(q.raw.qp_base.context) };
        match c.sim().create_flow(&q.qp, &a) {
            Ok(flow) => {
                let raw = ffi::ibv_flow {
                    comp_mask: 0,
                    context: q.raw.qp_base.context,
                    handle: 0,
                };
                hand_out(Box::new(EmuFlow { raw, flow }))
            }
            Err(e) => {
                set_errno(errno_of(&e));
                null_mut()
            }
        }
    })
}

/// `verbs_context.ibv_destroy_flow`.
///
/// # Safety
/// `flow` came from [`create_flow`] and is destroyed once.
pub unsafe extern "C" fn destroy_flow(flow: *mut ffi::ibv_flow) -> c_int {
    boundary(ReturnsErrno, move || {
        if flow.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a flow we leaked in create_flow; this is its end.
        drop(unsafe { take_back::<EmuFlow, _>(flow) });
        0
    })
}

impl Handed for EmuFlow {
    const KIND: Kind = Kind::Flow;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Default)]
    struct Rule {
        attr: ffi::ibv_flow_attr,
        eth: ffi::ibv_flow_spec_eth,
        ipv4: ffi::ibv_flow_spec_ipv4,
        udp: ffi::ibv_flow_spec_tcp_udp,
    }

    fn spead2_rule() -> Rule {
        let mut r = Rule::default();
        r.attr.type_ = ffi::IBV_FLOW_ATTR_NORMAL;
        r.attr.size = std::mem::size_of::<Rule>() as u16;
        r.attr.num_of_specs = 3;
        r.attr.port = 1;
        r.eth.type_ = ffi::IBV_FLOW_SPEC_ETH;
        r.eth.size = std::mem::size_of::<ffi::ibv_flow_spec_eth>() as u16;
        r.eth.val.dst_mac = [1, 0, 0x5e, 1, 2, 3];
        r.eth.mask.dst_mac = [0xff; 6];
        r.ipv4.type_ = ffi::IBV_FLOW_SPEC_IPV4;
        r.ipv4.size = std::mem::size_of::<ffi::ibv_flow_spec_ipv4>() as u16;
        r.ipv4.val.dst_ip = u32::from(Ipv4Addr::new(239, 1, 2, 3)).to_be();
        r.ipv4.mask.dst_ip = u32::MAX;
        r.udp.type_ = ffi::IBV_FLOW_SPEC_UDP;
        r.udp.size = std::mem::size_of::<ffi::ibv_flow_spec_tcp_udp>() as u16;
        r.udp.val.dst_port = 8888u16.to_be();
        r.udp.mask.dst_port = 0xffff;
        r
    }

    #[test]
    fn reads_spead2s_rule() {
        let r = spead2_rule();
        // SAFETY: a rule laid out as the verbs ABI has it.
        let a = unsafe { flow_attr_from_c(&r.attr) }.unwrap();
        assert_eq!(
            a,
            FlowAttr::udp_endpoint(1, [1, 0, 0x5e, 1, 2, 3], Ipv4Addr::new(239, 1, 2, 3), 8888)
        );
    }

    #[test]
    fn refuses_bad_specs() {
        let mut r = spead2_rule();
        r.ipv4.size -= 4;
        // SAFETY: as above.
        assert_eq!(unsafe { flow_attr_from_c(&r.attr) }, Err(libc::EINVAL));
        let mut r = spead2_rule();
        r.udp.type_ = ffi::IBV_FLOW_SPEC_IPV6;
        // SAFETY: as above (the IPv6 spec is refused before it is read).
        assert_eq!(unsafe { flow_attr_from_c(&r.attr) }, Err(libc::EOPNOTSUPP));
        let mut r = spead2_rule();
        r.attr.type_ = 9;
        // SAFETY: as above.
        assert_eq!(unsafe { flow_attr_from_c(&r.attr) }, Err(libc::EINVAL));
        let mut r = spead2_rule();
        r.attr.flags = 1;
        // SAFETY: as above.
        assert_eq!(unsafe { flow_attr_from_c(&r.attr) }, Err(libc::EINVAL));
    }
}
