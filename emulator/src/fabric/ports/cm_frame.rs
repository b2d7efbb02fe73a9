//! CM MADs on the wire: a MAD in a RoCE v2 UD datagram from QP1 to QP1 ([`frame`],
//! [`parse_frame`]), and the RDMA CM's header at the start of a REQ's private data, the
//! kernel `cma.c`'s `struct cma_hdr` ([`CmaHdr`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use backend_sim::frame::eth::Mac;
use netwire::frame::FrameView;
use netwire::roce::{
    build_roce_frame, icrc_ok, parse_roce, Bth, Deth, RoceHeaders, RoceIps, RoceRoute,
};

use super::cm_mad::{GSI_QKEY, PKEY};

/// The UD SEND_ONLY opcode (IBA table 38).
const UD_SEND_ONLY: u8 = 0x64;
/// The UDP source port of rxe's QP1 datagrams: `RXE_ROCE_V2_SPORT` (0xc000) plus
/// `hash_32(1, 14)` (rxe_qp.c `rxe_qp_init_req`), 0xd872 in every capture of the VM.
const QP1_UDP_SOURCE_PORT: u16 = 0xd872;

/// The length of `struct cma_hdr` (drivers/infiniband/core/cma.c).
pub const CMA_HDR_LEN: usize = 36;
/// `CMA_VERSION`.
const CMA_VERSION: u8 = 0x00;

/// The RDMA CM's header at the start of a REQ's private data (`struct cma_hdr`:
/// `cma_version`, `ip_version` in the high nibble, the source port, then the source and
/// destination addresses as `union cma_ip_addr` of 16 bytes each: an IPv6 address whole,
/// an IPv4 address in the last four, the rest zero, as `cma_format_hdr` leaves them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmaHdr {
    /// The requester's address and port (a link-local IPv6 address without its scope:
    /// the header has none).
    pub src: SocketAddr,
    /// The address it connects to, of the same family.
    pub dst: IpAddr,
}

/// The 16 bytes of `union cma_ip_addr` for `ip`.
fn cma_ip_addr(ip: IpAddr) -> [u8; 16] {
    let mut a = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => a[12..].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => a = v6.octets(),
    }
    a
}

impl CmaHdr {
    /// The 36 bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; CMA_HDR_LEN] {
        let mut h = [0u8; CMA_HDR_LEN];
        h[0] = CMA_VERSION;
        h[1] = if self.src.is_ipv4() { 4 } else { 6 } << 4;
        h[2..4].copy_from_slice(&self.src.port().to_be_bytes());
        h[4..20].copy_from_slice(&cma_ip_addr(self.src.ip()));
        h[20..36].copy_from_slice(&cma_ip_addr(self.dst));
        h
    }

    /// Reads a header of IP version 4 or 6.
    ///
    /// # Errors
    /// Another CM or IP version, or too short.
    pub fn decode(b: &[u8]) -> Result<CmaHdr, String> {
        if b.len() < CMA_HDR_LEN {
            return Err("a REQ's private data too short for the RDMA CM's header".into());
        }
        let port = u16::from_be_bytes([b[2], b[3]]);
        let at = |o: usize| -> [u8; 16] { b[o..o + 16].try_into().unwrap_or([0; 16]) };
        let (src, dst): (IpAddr, IpAddr) = match (b[0], b[1] >> 4) {
            (CMA_VERSION, 4) => {
                let v4 = |o: usize| Ipv4Addr::new(b[o + 12], b[o + 13], b[o + 14], b[o + 15]);
                (v4(4).into(), v4(20).into())
            }
            (CMA_VERSION, 6) => (Ipv6Addr::from(at(4)).into(), Ipv6Addr::from(at(20)).into()),
            (v, ip) => {
                return Err(format!(
                    "an RDMA CM header of version {v} for IP version {ip}"
                ))
            }
        };
        Ok(CmaHdr {
            src: SocketAddr::new(src, port),
            dst,
        })
    }
}

/// `mad` as a RoCE v2 frame from `src` to `dst` (MAC and address each, both addresses
/// IPv4 or both IPv6): UD SEND_ONLY to QP1 from QP1, P_Key 0xffff, Q_Key 0x80010000,
/// UDP source port 0xd872 (as rxe sends its GSI QP's datagrams), over IPv4 the IPv4
/// identification the PSN's low 16 bits (as the emulated NIC's), with the ICRC.
///
/// # Panics
/// If the two addresses are of different families.
#[must_use]
pub fn frame(src: (Mac, IpAddr), dst: (Mac, IpAddr), psn: u32, mad: &[u8]) -> Vec<u8> {
    let ips = match (src.1, dst.1) {
        (IpAddr::V4(s), IpAddr::V4(d)) => RoceIps::V4(s, d),
        (IpAddr::V6(s), IpAddr::V6(d)) => RoceIps::V6(s, d),
        _ => panic!("a CM datagram from {} to {}", src.1, dst.1),
    };
    let route = RoceRoute {
        ips,
        src_port: QP1_UDP_SOURCE_PORT,
        // As the emulated NIC's datagrams (`backend-sim/src/verbs/ud.rs`): the PSN's low
        // 16 bits, where rxe counts (docs/divergences.md row 75).
        ip_id: psn as u16,
        ..RoceRoute::new(
            (netwire::eth::Mac(src.0 .0), Ipv4Addr::UNSPECIFIED),
            (netwire::eth::Mac(dst.0 .0), Ipv4Addr::UNSPECIFIED),
        )
    };
    let headers = RoceHeaders {
        bth: Bth {
            opcode: UD_SEND_ONLY,
            pkey: PKEY,
            dest_qp: 1,
            ack_req: true,
            psn: psn & 0x00ff_ffff,
            ..Bth::default()
        },
        deth: Some(Deth {
            qkey: GSI_QKEY,
            src_qp: 1,
        }),
        ..RoceHeaders::default()
    };
    build_roce_frame(&route, &headers, mad)
}

/// A RoCE v2 datagram to QP1 (over IPv4 or IPv6) with a good ICRC: its source MAC and
/// address, its destination address and its payload (the MAD). Anything else: `None`.
#[must_use]
pub fn parse_frame(frame: &[u8]) -> Option<(Mac, IpAddr, IpAddr, &[u8])> {
    let view = FrameView::parse(frame).ok()?;
    if !view.is_roce_v2() {
        return None;
    }
    let (src, dst): (IpAddr, IpAddr) = match (view.ipv4, view.ipv6) {
        (Some((ip, _)), _) => (ip.src.into(), ip.dst.into()),
        (None, Some((ip, _))) => (ip.src.into(), ip.dst.into()),
        (None, None) => return None,
    };
    let udp = view.udp_payload()?;
    let packet = parse_roce(&frame[udp]).ok()?;
    let bth = packet.headers.bth;
    if bth.opcode != UD_SEND_ONLY || bth.dest_qp != 1 {
        return None;
    }
    if !icrc_ok(&frame[view.ip_range()?]) {
        return None;
    }
    Some((Mac(view.eth.src.0), src, dst, packet.payload))
}

/// The IPv4 address a CM datagram's address stands for: an IPv4 address itself; a
/// link-local IPv6 address of a MAC the fabric gives hosts (`02:00:` and the host's IPv4
/// address, `spacing::mac_of`) that host's address. Anything else: `None`.
#[must_use]
pub fn host_of(addr: IpAddr) -> Option<Ipv4Addr> {
    match addr {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => {
            let mac = netwire::ipv6::link_local_mac(&v6)?;
            (mac[..2] == [0x02, 0x00]).then(|| Ipv4Addr::new(mac[2], mac[3], mac[4], mac[5]))
        }
    }
}

/// [`parse_frame`] with both addresses as the hosts' IPv4 addresses ([`host_of`]), and
/// whether the datagram came over IPv6.
#[must_use]
pub fn parse_hosts(frame: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, bool, &[u8])> {
    let (_, src, dst, payload) = parse_frame(frame)?;
    Some((host_of(src)?, host_of(dst)?, src.is_ipv6(), payload))
}

/// Captured frames for the tests of this module and of [`super::cm_bridge`], and a REP
/// from the VM's side for those of [`super::cm_bridge`] and [`super::cm_resend`].
#[cfg(test)]
pub mod captured {
    use crate::fabric::ports::cm_mad::{private, Rep};

    /// The first REQ of `rping -c -a 10.100.0.1 -p 18600` in the Soft-RoCE VM (Linux 6.1's
    /// rxe, QP 0x11), to h1, as the fabric captured it (frame 10 of the capture).
    const VM_REQ: &[&str] = &[
        "02000a64000102000a640014080045000134f19b4000401133410a6400140a64",
        "0001d87212b7012000006400ffff000000018000000080010000000000010107",
        "02030000000000000002307cc9ba0010000000000000bac97c30000000000000",
        "0000010648a800000afffe640014000000000000000000001101000000010000",
        "00a0862a88a7ffff37f0ffffffff00000000000000000000ffff0a6400140000",
        "0000000000000000ffff0a640001863980000040009800000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "00000040c7100000000000000000000000000a64001400000000000000000000",
        "00000a6400010000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000004630",
        "c9ec",
    ];

    /// The first REQ of `rping -c -a fe80::aff:fe64:1%$IF -p 18600` in the Soft-RoCE VM
    /// (the interop case `rping-ll-emulated-server`), to h1 between the link-local
    /// addresses, as the fabric captured it (frame 9 of the capture).
    const VM_REQ_LL: &[&str] = &[
        "02000a64000102000a64001486dd6000000001201140fe800000000000000000",
        "0afffe640014fe8000000000000000000afffe640001d87212b7012000006400",
        "ffff00000001800000008001000000000001010702030000000000000002d005",
        "3cec0010000000000000ec3c05d00000000000000000010648a800000afffe64",
        "001400000000000000000000110100000001000000a071c9dfa7ffff37f0ffff",
        "fffffe8000000000000000000afffe640014fe8000000000000000000afffe64",
        "000131de20000040009800000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000609b86fe8000000000",
        "000000000afffe640014fe8000000000000000000afffe640001000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000009953bc3a",
    ];

    fn bytes(lines: &[&str]) -> Vec<u8> {
        let hex: String = lines.concat();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    pub fn vm_req() -> Vec<u8> {
        bytes(VM_REQ)
    }

    pub fn vm_req_ll() -> Vec<u8> {
        bytes(VM_REQ_LL)
    }

    /// A REP of the VM's rping (QP 0x11, PSN 0x42, the VM's CA GUID) from communication
    /// id `local` to `remote`.
    pub fn vm_rep(local: u32, remote: u32) -> Rep {
        Rep {
            local_comm_id: local,
            remote_comm_id: remote,
            local_qkey: 0,
            local_qpn: 0x11,
            starting_psn: 0x42,
            responder_resources: 1,
            initiator_depth: 1,
            target_ack_delay: 15,
            failover_accepted: 0,
            flow_control: false,
            rnr_retry_count: 7,
            srq: false,
            local_ca_guid: 0x0000_0aff_fe64_0014,
            private_data: vec![0; private::REP],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::captured::{vm_req, vm_req_ll};
    use super::*;
    use crate::fabric::ports::cm_mad::{private, Mad, Msg, Req};

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn the_vms_req_decodes_exactly() {
        let f = vm_req();
        assert_eq!(f.len(), 322);
        let (mac, src, dst, mad) = parse_frame(&f).expect("a MAD to QP1 with a good ICRC");
        assert_eq!(mac, Mac([2, 0, 0x0a, 0x64, 0, 0x14]));
        assert_eq!(
            (src, dst),
            (ip("10.100.0.20").into(), ip("10.100.0.1").into())
        );
        let mad = Mad::decode(mad).unwrap();
        assert_eq!(mad.tid, 0x0000_0002_307c_c9ba);
        let Msg::Req(r) = mad.msg else {
            panic!("a REQ: {mad:?}")
        };
        let mut pd = vec![0u8; private::REQ];
        pd[..CMA_HDR_LEN].copy_from_slice(
            &CmaHdr {
                src: SocketAddr::new(ip("10.100.0.20").into(), 0xc710),
                dst: ip("10.100.0.1").into(),
            }
            .encode(),
        );
        let want = Req {
            local_comm_id: 0xbac9_7c30,
            service_id: 0x0106_48a8,
            local_ca_guid: 0x0000_0aff_fe64_0014,
            local_qkey: 0,
            local_qpn: 0x11,
            responder_resources: 1,
            initiator_depth: 1,
            remote_cm_response_timeout: 20,
            transport_service_type: 0,
            flow_control: false,
            starting_psn: 0x86_2a88,
            local_cm_response_timeout: 20,
            retry_count: 7,
            pkey: 0xffff,
            path_mtu: 3,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: ip("10.100.0.20").to_ipv6_mapped().octets(),
            remote_gid: ip("10.100.0.1").to_ipv6_mapped().octets(),
            flow_label: 0x86398,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 19,
            private_data: pd.clone(),
        };
        assert_eq!(r, want);
        assert_eq!(
            CmaHdr::decode(&r.private_data).unwrap(),
            CmaHdr {
                src: SocketAddr::new(ip("10.100.0.20").into(), 0xc710),
                dst: ip("10.100.0.1").into(),
            }
        );
        // Encoded again, the same 256 bytes.
        let again = Mad {
            tid: mad.tid,
            msg: Msg::Req(want),
        }
        .encode();
        assert_eq!(&again[..], &f[14 + 20 + 8 + 12 + 8..f.len() - 4]);
    }

    #[test]
    fn a_frame_carries_its_mad_and_verifies() {
        let mad = Mad {
            tid: 5,
            msg: Msg::Drep(1, 2),
        }
        .encode();
        let h1 = (Mac([2, 0, 10, 100, 0, 1]), ip("10.100.0.1").into());
        let vm = (Mac([2, 0, 10, 100, 0, 20]), ip("10.100.0.20").into());
        let f = frame(h1, vm, 9, &mad);
        assert_eq!(f.len(), 322);
        assert_eq!(&f[18..20], &[0, 9], "IPv4 identification");
        let (mac, src, dst, got) = parse_frame(&f).unwrap();
        assert_eq!((mac, src, dst), (h1.0, h1.1, vm.1));
        assert_eq!(got, &mad[..]);
        let mut bad = f.clone();
        bad[100] ^= 1;
        assert_eq!(parse_frame(&bad), None, "a bad ICRC");
        // Between the link-local addresses: an IPv6 header (40 bytes) for the IPv4 one.
        let ll = |s: &str| -> IpAddr { s.parse().unwrap() };
        let h1 = (h1.0, ll("fe80::aff:fe64:1"));
        let vm = (vm.0, ll("fe80::aff:fe64:14"));
        let f = frame(h1, vm, 9, &mad);
        assert_eq!(f.len(), 342);
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        let (mac, src, dst, got) = parse_frame(&f).unwrap();
        assert_eq!((mac, src, dst), (h1.0, h1.1, vm.1));
        assert_eq!(got, &mad[..]);
    }

    /// The VM's REQ between the link-local addresses: over IPv6 (traffic class 0, flow
    /// label 0, hop limit 64, UDP source port 0xd872 as every datagram of its QP1), the
    /// primary path's GIDs the two link-local addresses, the flow label the ports' hash
    /// (`cma_get_roce_udp_flow_label`: 39814 * 31 + 18600, its low 20 bits 0x31de2), and
    /// a `struct cma_hdr` of IP version 6; encoded again, the same bytes.
    #[test]
    fn the_vms_link_local_req_decodes_exactly() {
        let f = vm_req_ll();
        assert_eq!(f.len(), 342);
        let (mac, src, dst, mad_bytes) = parse_frame(&f).expect("a MAD to QP1, good ICRC");
        let (vm_ll, h1_ll): (Ipv6Addr, Ipv6Addr) = (
            "fe80::aff:fe64:14".parse().unwrap(),
            "fe80::aff:fe64:1".parse().unwrap(),
        );
        assert_eq!(mac, Mac([2, 0, 0x0a, 0x64, 0, 0x14]));
        assert_eq!((src, dst), (vm_ll.into(), h1_ll.into()));
        assert_eq!(
            &f[14..18],
            &[0x60, 0, 0, 0],
            "traffic class 0, flow label 0"
        );
        assert_eq!((f[20], f[21]), (17, 64), "UDP, hop limit 64");
        assert_eq!(&f[54..56], &[0xd8, 0x72], "UDP source port");
        let mad = Mad::decode(mad_bytes).unwrap();
        let Msg::Req(r) = mad.msg.clone() else {
            panic!("a REQ: {mad:?}")
        };
        assert_eq!(
            (r.local_gid, r.remote_gid),
            (vm_ll.octets(), h1_ll.octets())
        );
        assert_eq!(r.flow_label, 0x3_1de2);
        assert_eq!((39814 * 31 + 18600) & 0xf_ffff, 0x3_1de2);
        assert_eq!(
            (r.hop_limit, r.traffic_class, r.local_lid, r.path_mtu),
            (64, 0, 0xffff, 3)
        );
        assert_eq!(
            CmaHdr::decode(&r.private_data).unwrap(),
            CmaHdr {
                src: SocketAddr::new(vm_ll.into(), 39814),
                dst: h1_ll.into(),
            }
        );
        assert_eq!(&mad.encode()[..], mad_bytes);
        // The same frame built here (the VM's QP1 sent it with PSN 0).
        let built = frame(
            (mac, src),
            (Mac([2, 0, 0x0a, 0x64, 0, 1]), dst),
            0,
            mad_bytes,
        );
        assert_eq!(built, f);
    }

    /// `struct cma_hdr` of IP version 6 (cma.c `cma_format_hdr`: `ip_version` 6 in the
    /// high nibble of byte 1, the port, then the two 16-byte addresses whole), byte for
    /// byte both ways; another IP or CM version is refused.
    #[test]
    fn an_ipv6_cma_header_holds_both_addresses_whole() {
        let h = CmaHdr {
            src: "[fe80::aff:fe64:14]:50960".parse().unwrap(),
            dst: "fe80::aff:fe64:1".parse().unwrap(),
        };
        let b = h.encode();
        let mut want = vec![0x00, 0x60, 0xc7, 0x10];
        want.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[0x00, 0x00, 0x0a, 0xff, 0xfe, 0x64, 0x00, 0x14]);
        want.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[0x00, 0x00, 0x0a, 0xff, 0xfe, 0x64, 0x00, 0x01]);
        assert_eq!(&b[..], &want[..]);
        assert_eq!(CmaHdr::decode(&b), Ok(h));
        let mut other = b;
        other[1] = 5 << 4;
        assert!(CmaHdr::decode(&other).is_err());
        other[1] = 6 << 4;
        other[0] = 1;
        assert!(CmaHdr::decode(&other).is_err());
    }
}
