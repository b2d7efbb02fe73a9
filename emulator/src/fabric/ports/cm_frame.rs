//! CM MADs on the wire: a MAD in a RoCE v2 UD datagram from QP1 to QP1 ([`frame`],
//! [`parse_frame`]), and the RDMA CM's header at the start of a REQ's private data, the
//! kernel `cma.c`'s `struct cma_hdr` ([`CmaHdr`]).

use std::net::{Ipv4Addr, SocketAddrV4};

use backend_sim::frame::eth::Mac;
use netwire::frame::FrameView;
use netwire::roce::{build_roce_frame, icrc_ok, parse_roce, Bth, Deth, RoceHeaders, RoceRoute};

use super::cm_mad::{GSI_QKEY, PKEY};

/// The UD SEND_ONLY opcode (IBA table 38).
const UD_SEND_ONLY: u8 = 0x64;

/// The length of `struct cma_hdr` (drivers/infiniband/core/cma.c).
pub const CMA_HDR_LEN: usize = 36;
/// `CMA_VERSION`.
const CMA_VERSION: u8 = 0x00;

/// The RDMA CM's header at the start of a REQ's private data (`struct cma_hdr`:
/// `cma_version`, `ip_version` in the high nibble, the source port, then the source and
/// destination addresses as `union cma_ip_addr`: an IPv4 address in the last four of 16
/// bytes, the rest zero, as `cma_format_hdr` leaves them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmaHdr {
    /// The requester's address and port.
    pub src: SocketAddrV4,
    /// The address it connects to.
    pub dst: Ipv4Addr,
}

impl CmaHdr {
    /// The 36 bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; CMA_HDR_LEN] {
        let mut h = [0u8; CMA_HDR_LEN];
        h[0] = CMA_VERSION;
        h[1] = 4 << 4;
        h[2..4].copy_from_slice(&self.src.port().to_be_bytes());
        h[16..20].copy_from_slice(&self.src.ip().octets());
        h[32..36].copy_from_slice(&self.dst.octets());
        h
    }

    /// Reads an IPv4 header.
    ///
    /// # Errors
    /// Another version, IPv6, or too short.
    pub fn decode(b: &[u8]) -> Result<CmaHdr, String> {
        if b.len() < CMA_HDR_LEN {
            return Err("a REQ's private data too short for the RDMA CM's header".into());
        }
        if b[0] != CMA_VERSION || b[1] >> 4 != 4 {
            return Err(format!(
                "an RDMA CM header of version {} for IP version {} (IPv4 only)",
                b[0],
                b[1] >> 4
            ));
        }
        let ip = |o: usize| Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3]);
        Ok(CmaHdr {
            src: SocketAddrV4::new(ip(16), u16::from_be_bytes([b[2], b[3]])),
            dst: ip(32),
        })
    }
}

/// `mad` as a RoCE v2 frame from `src` to `dst` (MAC and address each): UD SEND_ONLY to
/// QP1 from QP1, P_Key 0xffff, Q_Key 0x80010000 (as rxe sends its GSI QP's datagrams),
/// with the ICRC.
#[must_use]
pub fn frame(src: (Mac, Ipv4Addr), dst: (Mac, Ipv4Addr), psn: u32, mad: &[u8]) -> Vec<u8> {
    let route = RoceRoute::new(
        (netwire::eth::Mac(src.0 .0), src.1),
        (netwire::eth::Mac(dst.0 .0), dst.1),
    );
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

/// A RoCE v2 datagram to QP1 over IPv4 with a good ICRC: its source MAC and address,
/// its destination address and its payload (the MAD). Anything else: `None`.
#[must_use]
pub fn parse_frame(frame: &[u8]) -> Option<(Mac, Ipv4Addr, Ipv4Addr, &[u8])> {
    let view = FrameView::parse(frame).ok()?;
    if !view.is_roce_v2() {
        return None;
    }
    let (ip, _) = view.ipv4?;
    let udp = view.udp_payload()?;
    let packet = parse_roce(&frame[udp]).ok()?;
    let bth = packet.headers.bth;
    if bth.opcode != UD_SEND_ONLY || bth.dest_qp != 1 {
        return None;
    }
    if !icrc_ok(&frame[view.ip_range()?]) {
        return None;
    }
    Some((Mac(view.eth.src.0), ip.src, ip.dst, packet.payload))
}

/// Captured frames for the tests of this module and of [`super::cm_bridge`].
#[cfg(test)]
pub mod captured {
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

    pub fn vm_req() -> Vec<u8> {
        let hex: String = VM_REQ.concat();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::captured::vm_req;
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
        assert_eq!((src, dst), (ip("10.100.0.20"), ip("10.100.0.1")));
        let mad = Mad::decode(mad).unwrap();
        assert_eq!(mad.tid, 0x0000_0002_307c_c9ba);
        let Msg::Req(r) = mad.msg else {
            panic!("a REQ: {mad:?}")
        };
        let mut pd = vec![0u8; private::REQ];
        pd[..CMA_HDR_LEN].copy_from_slice(
            &CmaHdr {
                src: SocketAddrV4::new(ip("10.100.0.20"), 0xc710),
                dst: ip("10.100.0.1"),
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
                src: SocketAddrV4::new(ip("10.100.0.20"), 0xc710),
                dst: ip("10.100.0.1"),
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
        let h1 = (Mac([2, 0, 10, 100, 0, 1]), ip("10.100.0.1"));
        let vm = (Mac([2, 0, 10, 100, 0, 20]), ip("10.100.0.20"));
        let f = frame(h1, vm, 9, &mad);
        assert_eq!(f.len(), 322);
        let (mac, src, dst, got) = parse_frame(&f).unwrap();
        assert_eq!((mac, src, dst), (h1.0, h1.1, vm.1));
        assert_eq!(got, &mad[..]);
        let mut bad = f.clone();
        bad[100] ^= 1;
        assert_eq!(parse_frame(&bad), None, "a bad ICRC");
    }

    #[test]
    fn an_ipv6_cma_header_is_refused() {
        let mut h = CmaHdr {
            src: SocketAddrV4::new(ip("1.2.3.4"), 5),
            dst: ip("5.6.7.8"),
        }
        .encode();
        h[1] = 6 << 4;
        assert!(CmaHdr::decode(&h).is_err());
    }
}
