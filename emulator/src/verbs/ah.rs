//! Address handles: `ibv_create_ah`, `ibv_destroy_ah`, and from received completions
//! (`ibv_init_ah_from_wc`, `ibv_create_ah_from_wc`): the reply address read from the
//! 40-byte GRH area that precedes a UD message, as rdma-core's `libibverbs/verbs.c`
//! (v44.0) reads it: for RoCE v2 over IPv4 the IPv4 header sits in the area's last 20
//! bytes.

use std::ffi::c_int;
use std::net::Ipv4Addr;
use std::ptr::null_mut;

use verbs_api::Context;
use verbs_api::Gid;

use crate::base::boundary::boundary;
use crate::base::boundary::MinusOne;
use crate::base::boundary::Null;
use crate::base::boundary::ReturnsErrno;
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::base::pointer::try_ref_from_ptr;
use crate::objects::convert::ah_from_c;
use crate::objects::convert::gid_to_c;
use crate::objects::handles::context;
use crate::objects::handles::hand_out;
use crate::objects::handles::EmuAh;
use crate::objects::handles::EmuContext;
use crate::objects::handles::EmuPd;
use crate::verbs::context::gid_type_of;
use crate::verbs::pd::free_pd_child;

const GRH_LEN: usize = 40;

/// Whether the GRH area holds an IPv4 header (4) or an IPv6 GRH (6).
fn grh_version(grh: &[u8; GRH_LEN]) -> Result<u8, c_int> {
    let ip4 = &grh[20..];
    if grh[0] >> 4 != 6 {
        return if ip4[0] >> 4 == 4 {
            Ok(4)
        } else {
            Err(libc::EPROTONOSUPPORT)
        };
    }
    if ip4[0] & 0x0f != 5 {
        return Ok(6);
    }
    // Both could be: believe IPv4 when its header checksum holds.
    let sum: u32 = ip4
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    Ok(if folded == 0xffff { 4 } else { 6 })
}

/// The index of `gid` of type `roce_v2` (else RoCE v1) on `port`.
fn find_gid_index(c: &EmuContext, port: u8, gid: Gid, roce_v2: bool) -> Result<u8, c_int> {
    let len = c.sim().query_port(port).map_or(0, |p| p.gid_tbl_len);
    (0..len)
        .find(|&i| {
            c.sim().query_gid(port, i) == Ok(gid)
                && (gid_type_of(c, i) == ffi::IBV_GID_TYPE_ROCE_V2) == roce_v2
        })
        .and_then(|i| u8::try_from(i).ok())
        .ok_or(libc::ENOENT)
}

fn init_ah(
    c: &EmuContext,
    port: u8,
    wc: &ffi::ibv_wc,
    grh: &[u8; GRH_LEN],
) -> Result<ffi::ibv_ah_attr, c_int> {
    let flow = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
    let mut a = ffi::ibv_ah_attr {
        dlid: wc.slid,
        sl: wc.sl,
        src_path_bits: wc.dlid_path_bits,
        port_num: port,
        ..ffi::ibv_ah_attr::default()
    };
    a.grh.flow_label = flow & 0xf_ffff;
    if wc.wc_flags & ffi::IBV_WC_GRH == 0 {
        return Ok(a);
    }
    a.is_global = 1;
    if grh_version(grh)? == 4 {
        let ip4 = &grh[20..];
        let src = Ipv4Addr::new(ip4[12], ip4[13], ip4[14], ip4[15]);
        let dst = Ipv4Addr::new(ip4[16], ip4[17], ip4[18], ip4[19]);
        if dst.is_multicast() {
            return Err(libc::EINVAL);
        }
        a.grh.sgid_index = find_gid_index(c, port, Gid::from_ipv4(dst), true)?;
        a.grh.dgid = gid_to_c(Gid::from_ipv4(src));
        a.grh.hop_limit = ip4[8];
        a.grh.traffic_class = ip4[1];
    } else {
        let mut sgid = [0u8; 16];
        let mut dgid = [0u8; 16];
        sgid.copy_from_slice(&grh[8..24]);
        dgid.copy_from_slice(&grh[24..40]);
        if dgid[0] == 0xff {
            return Err(libc::EINVAL);
        }
        let roce_v2 = match grh[6] {
            17 => true,    // UDP: RoCE v2
            0x1b => false, // the IB next header: RoCE v1
            _ => return Err(libc::EPROTONOSUPPORT),
        };
        a.grh.dgid = gid_to_c(Gid(sgid));
        a.grh.sgid_index = find_gid_index(c, port, Gid(dgid), roce_v2)?;
        a.grh.hop_limit = grh[7];
        a.grh.traffic_class = ((flow >> 20) & 0xff) as u8;
    }
    Ok(a)
}

/// `ibv_init_ah_from_wc`: the address that replies to the sender of `wc`.
///
/// # Safety
/// `ctx` is a live context of ours; `wc` and `grh` (the receive buffer's first 40
/// bytes) are valid; `ah_attr` is valid for a write.
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ffi::ibv_context,
    port: u8,
    wc: *mut ffi::ibv_wc,
    grh: *mut ffi::ibv_grh,
    ah_attr: *mut ffi::ibv_ah_attr,
) -> c_int {
    boundary(MinusOne, move || {
        let einval = || {
            set_errno(libc::EINVAL);
            -1
        };
        if grh.is_null() || ah_attr.is_null() {
            return einval();
        }
        // SAFETY: NULL or the caller's live context and completion; its 40-byte GRH area.
        let (c, w, g): (&EmuContext, &ffi::ibv_wc, _) = unsafe {
            (
                try_ref_from_ptr!(ctx, einval()),
                try_ref_from_ptr!(wc, einval()),
                grh.cast::<[u8; GRH_LEN]>().read_unaligned(),
            )
        };
        match init_ah(c, port, w, &g) {
            Ok(a) => {
                // SAFETY: the caller's writable attribute.
                unsafe { ah_attr.write(a) };
                0
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}

/// `ibv_create_ah_from_wc`.
///
/// # Safety
/// `pd` is a live PD of ours; `wc` and `grh` as for [`ibv_init_ah_from_wc`].
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ffi::ibv_pd,
    wc: *mut ffi::ibv_wc,
    grh: *mut ffi::ibv_grh,
    port: u8,
) -> *mut ffi::ibv_ah {
    boundary(Null, move || {
        // SAFETY: NULL or a live PD of ours.
        let p: &EmuPd = unsafe {
            try_ref_from_ptr!(pd, {
                set_errno(libc::EINVAL);
                null_mut()
            })
        };
        let mut attr = ffi::ibv_ah_attr::default();
        // SAFETY: the PD's live context and the caller's completion and GRH.
        if unsafe { ibv_init_ah_from_wc(p.raw.context, port, wc, grh, &mut attr) } != 0 {
            return null_mut();
        }
        // SAFETY: a live PD of ours and a valid attribute.
        unsafe { ibv_create_ah(pd, &mut attr) }
    })
}

/// `ibv_create_ah`.
///
/// # Safety
/// `pd` is a live PD of ours; `attr` is valid.
pub unsafe extern "C" fn ibv_create_ah(
    pd: *mut ffi::ibv_pd,
    attr: *mut ffi::ibv_ah_attr,
) -> *mut ffi::ibv_ah {
    boundary(Null, move || {
        let einval = || {
            set_errno(libc::EINVAL);
            null_mut()
        };
        // SAFETY: NULL or a live PD of ours; NULL or the caller's valid attributes.
        let (p, a): (&EmuPd, &ffi::ibv_ah_attr) = unsafe {
            (
                try_ref_from_ptr!(pd, einval()),
                try_ref_from_ptr!(attr, einval()),
            )
        };
        let a = ah_from_c(a);
        // SAFETY: the PD's context is live.
        let c = unsafe { context(p.raw.context) };
        match c.sim().create_ah(&p.pd, &a) {
            Ok(ah) => {
                let raw = ffi::ibv_ah {
                    context: p.raw.context,
                    pd,
                    handle: 0,
                };
                p.users.take();
                hand_out(Box::new(EmuAh { raw, ah }))
            }
            Err(e) => {
                note_gid_not_carried("ibv_create_ah", &a);
                set_errno(errno_of(&e));
                null_mut()
            }
        }
    })
}

/// Says once why an address vector with a GRH whose destination GID is not IPv4-mapped
/// was refused (EINVAL): the fabric carries RoCE only between IPv4 addresses and between
/// link-local GIDs (RoCE v1 on mlx5, RoCEv2 over IPv6 on rxe), from the matching GID.
pub(crate) fn note_gid_not_carried(verb: &'static str, a: &verbs_api::AhAttr) {
    if a.is_global && a.grh.dgid.to_ipv4().is_none() {
        log_unsupported_once(
            verb,
            "IPv6 GIDs other than link-local ones, and link-local ones from a source GID \
             other than 0: the fabric carries RoCE between IPv4 GIDs and between link-local \
             GIDs (index 0)",
        );
    }
}

/// `ibv_destroy_ah`.
///
/// # Safety
/// `ah` came from `ibv_create_ah` and is destroyed once.
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ffi::ibv_ah) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the caller's contract.
        unsafe { free_pd_child::<EmuAh, _>(ah, |a| a.raw.pd) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_header_in_the_grh_area_is_recognised() {
        let mut g = [0u8; GRH_LEN];
        // The header the simulator writes for 10.100.0.2 -> 10.100.0.1, checksum right.
        g[20..40].copy_from_slice(&[
            0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 100, 0, 2, 10, 100, 0, 1,
        ]);
        let sum: u32 = g[20..40]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let csum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        g[30..32].copy_from_slice(&csum.to_be_bytes());
        assert_eq!(grh_version(&g), Ok(4));
        g[0] = 0x60; // an IPv6 version nibble too: the checksum decides
        assert_eq!(grh_version(&g), Ok(4));
        g[31] ^= 1;
        assert_eq!(grh_version(&g), Ok(6));
        let z = [0u8; GRH_LEN];
        assert_eq!(grh_version(&z), Err(libc::EPROTONOSUPPORT));
    }
}
