//! Unit tests of the CM bridge: captured and built MADs turned into emulated CM messages and back.

use super::*;
use crate::fabric::ports::cm_frame::captured::{vm_rep, vm_req, vm_req_ll};
use crate::fabric::ports::cm_mad::private;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn h1() -> Host {
    Host {
        ip: ip("10.100.0.1"),
        mac: Mac([2, 0, 10, 100, 0, 1]),
    }
}

fn vm() -> Ipv4Addr {
    ip("10.100.0.20")
}

fn body(to: Address, from: Endpoint, msg: &Message) -> Vec<u8> {
    let mut b = Vec::new();
    m::encode(None, to, from, msg, &mut b);
    b
}

fn mad_of(frame: &[u8]) -> Mad {
    let (_, _, _, mad) = cm_frame::parse_frame(frame).expect("a CM frame");
    Mad::decode(mad).unwrap()
}

fn conn(qpn: u32, psn: u32, private: usize) -> ConnData {
    ConnData {
        qpn,
        psn,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: false,
        private_data: vec![0; private],
    }
}

/// The VM kernel's REP (communication id 0x7777, QP 0x11, PSN 0x42) to h1's id 1, a
/// frame from `src` to `dst` (the VM's and h1's addresses, IPv4 or link-local).
fn kernel_rep(src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let mad = Mad {
        tid: 9,
        msg: Msg::Rep(vm_rep(0x7777, 1)),
    };
    cm_frame::frame((mac_of(vm()), src), (h1().mac, dst), 0, &mad.encode())
}

/// The service of `rping -s -p 18600` on host `ip`.
fn rping_service(ip: Ipv4Addr) -> Service {
    Service {
        ip,
        port: 18600,
        ps: 0x0106,
    }
}

/// h1's REP from its id 3 (QP 0x12, PSN 0xabc) to the VM's id `kernel`.
fn h1s_rep(kernel: Endpoint) -> Vec<u8> {
    body(
        Address::Endpoint(kernel),
        Endpoint {
            host: h1().ip,
            id: 3,
        },
        &Message::Rep(conn(0x12, 0xabc, private::REP)),
    )
}

/// The VM's REQ reaches h1's process as the emulated REQ to its service; h1's REP goes
/// back with the REQ's transaction id (repeats are `cm_resend`'s).
#[test]
fn the_vms_req_becomes_the_emulated_req_and_h1s_rep_answers_its_tid() {
    let mut b = Bridge::new(vec![vm()]);
    let req = vm_req();
    let Some(FromWire::Forward { from, body: got }) = b.from_wire(h1(), &req) else {
        panic!("forwarded")
    };
    assert_eq!(from, vm());
    let service = rping_service(h1().ip);
    let kernel = Endpoint {
        host: vm(),
        id: 0xbac9_7c30,
    };
    let want = Message::Req {
        service,
        src: "10.100.0.20:50960".parse().unwrap(),
        dst: "10.100.0.1:18600".parse().unwrap(),
        qp_type: QPT_RC,
        data: conn(0x11, 0x86_2a88, private::REQ - CMA_HDR_LEN),
    };
    assert_eq!(
        m::decode(&got).unwrap(),
        (None, (Address::Service(service), kernel, want))
    );
    let rep = h1s_rep(kernel);
    let frame = b.to_wire(h1(), vm(), &rep).unwrap();
    let mad = mad_of(&frame);
    assert_eq!(mad.tid, 0x0000_0002_307c_c9ba);
    let Msg::Rep(r) = mad.msg else {
        panic!("a REP: {mad:?}")
    };
    assert_eq!(
        (
            r.local_comm_id,
            r.remote_comm_id,
            r.local_qpn,
            r.starting_psn
        ),
        (3, 0xbac9_7c30, 0x12, 0xabc)
    );
    assert_eq!(r.local_ca_guid, 0x0000_0aff_fe64_0001);
    assert_eq!(r.target_ack_delay, 15);
    // The VM's MRA is taken and dropped.
    let mra = Mad {
        tid: 1,
        msg: Msg::Mra(0xbac9_7c30, 3, 1, 20),
    };
    let mra = cm_frame::frame(
        (mac_of(vm()), vm().into()),
        (h1().mac, h1().ip.into()),
        0,
        &mra.encode(),
    );
    assert_eq!(b.from_wire(h1(), &mra), Some(FromWire::Dropped));
    assert_eq!(
        b.stats,
        BridgeStats {
            out: 1,
            in_: 1,
            dropped: 1
        }
    );
}

/// h1's REQ to the VM leaves as the kernel's would; the VM's REP reaches h1's id, and
/// h1's DREQ names the VM's QP.
#[test]
fn h1s_req_leaves_as_a_mad_and_its_dreq_names_the_peers_qp() {
    let mut b = Bridge::new(vec![vm()]);
    let service = rping_service(vm());
    let me = Endpoint {
        host: h1().ip,
        id: 1,
    };
    let req = Message::Req {
        service,
        src: "10.100.0.1:40000".parse().unwrap(),
        dst: "10.100.0.20:18600".parse().unwrap(),
        qp_type: QPT_RC,
        data: ConnData {
            private_data: vec![0x5a; private::REQ - CMA_HDR_LEN],
            ..conn(0x13, 0x12_3456, 0)
        },
    };
    let frame = b
        .to_wire(h1(), vm(), &body(Address::Service(service), me, &req))
        .unwrap();
    let (mac, src, dst, _) = cm_frame::parse_frame(&frame).unwrap();
    assert_eq!((mac, src, dst), (h1().mac, h1().ip.into(), vm().into()));
    assert_eq!(&frame[..6], &[2, 0, 10, 100, 0, 20]);
    let Msg::Req(r) = mad_of(&frame).msg else {
        panic!("a REQ")
    };
    assert_eq!(r.service_id, 0x0106_48a8);
    assert_eq!(
        (r.local_comm_id, r.local_qpn, r.starting_psn),
        (1, 0x13, 0x12_3456)
    );
    assert_eq!(
        (
            r.remote_cm_response_timeout,
            r.max_cm_retries,
            r.path_mtu,
            r.hop_limit
        ),
        (20, 15, 3, 64)
    );
    assert_eq!(r.remote_gid, vm().to_ipv6_mapped().octets());
    assert_eq!(
        r.flow_label, 0x3_3468,
        "40000 * 31 + 18600, its low 20 bits"
    );
    assert_eq!(
        CmaHdr::decode(&r.private_data).unwrap(),
        CmaHdr {
            src: "10.100.0.1:40000".parse().unwrap(),
            dst: vm().into(),
        }
    );
    assert_eq!(&r.private_data[CMA_HDR_LEN..], &[0x5a; 56][..]);
    // The kernel's REP.
    let f = kernel_rep(vm().into(), h1().ip.into());
    let Some(FromWire::Forward { body: got, .. }) = b.from_wire(h1(), &f) else {
        panic!("forwarded")
    };
    let peer = Endpoint {
        host: vm(),
        id: 0x7777,
    };
    let (gap, (to, from, msg)) = m::decode(&got).unwrap();
    assert_eq!(gap, None);
    assert_eq!((to, from), (Address::Endpoint(me), peer));
    assert_eq!(
        msg,
        Message::Rep(ConnData {
            retry_count: 0,
            private_data: vec![0; private::REP],
            ..conn(0x11, 0x42, 0)
        })
    );
    let dreq = b
        .to_wire(
            h1(),
            vm(),
            &body(Address::Endpoint(peer), me, &Message::Dreq),
        )
        .unwrap();
    assert_eq!(mad_of(&dreq).msg, Msg::Dreq(1, 0x7777, 0x11));
    // A SIDR REP to a SIDR REQ the bridge did not see has no MAD: the caller returns it.
    let sidr = Message::SidrRep {
        status: 0,
        qpn: 0x12,
        qkey: 0x0123_4567,
        private_data: vec![],
    };
    assert!(b
        .to_wire(h1(), vm(), &body(Address::Endpoint(peer), me, &sidr))
        .is_err());
    assert!(b.is_remote(vm()) && !b.is_remote(h1().ip));
}

fn ll(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Over the link-local GIDs: the VM's REQ comes over IPv6 from fe80::aff:fe64:14 with
/// those GIDs in its primary path and a `struct cma_hdr` of IP version 6, and reaches
/// h1's process as the REQ between the two link-local addresses; h1's REP goes back
/// over IPv6. h1's own REQ to the VM's link-local address leaves over IPv6 with the
/// kernel's layout, and the VM's REP to it gets h1's RTU over IPv6 too.
#[test]
fn link_local_connections_travel_over_ipv6_both_ways() {
    let mut b = Bridge::new(vec![vm()]);
    let (h1_ll, vm_ll) = (ll("fe80::aff:fe64:1"), ll("fe80::aff:fe64:14"));
    assert_eq!(link_local(h1().mac), h1_ll);
    // The VM's own REQ (`rping -c` to fe80::aff:fe64:1%IF, captured).
    let frame = vm_req_ll();
    let Msg::Req(req) = mad_of(&frame).msg else {
        panic!("a REQ")
    };
    let vm_mac = mac_of(vm());
    let mad = Mad {
        tid: 7,
        msg: Msg::Req(req.clone()),
    }
    .encode();
    // Nothing from a host that is not remote.
    let other = cm_frame::frame(
        (Mac([2, 0, 10, 100, 0, 9]), ll("fe80::aff:fe64:9").into()),
        (h1().mac, h1_ll.into()),
        0,
        &mad,
    );
    assert_eq!(b.from_wire(h1(), &other), None);
    let Some(FromWire::Forward { from, body: got }) = b.from_wire(h1(), &frame) else {
        panic!("forwarded")
    };
    assert_eq!(from, vm());
    let service = rping_service(h1().ip);
    let kernel = Endpoint {
        host: vm(),
        id: req.local_comm_id,
    };
    let want = Message::Req {
        service,
        src: SocketAddr::new(vm_ll.into(), 39814),
        dst: SocketAddr::new(h1_ll.into(), 18600),
        qp_type: QPT_RC,
        data: conn(req.local_qpn, req.starting_psn, private::REQ - CMA_HDR_LEN),
    };
    assert_eq!(
        m::decode(&got).unwrap(),
        (None, (Address::Service(service), kernel, want))
    );
    let rep = h1s_rep(kernel);
    let out = b.to_wire(h1(), vm(), &rep).unwrap();
    let (mac, src, dst, _) = cm_frame::parse_frame(&out).unwrap();
    assert_eq!(
        (mac, src, dst),
        (h1().mac, h1_ll.into(), IpAddr::from(vm_ll))
    );
    assert_eq!(&out[..6], &vm_mac.0);
    assert_eq!(mad_of(&out).tid, mad_of(&frame).tid);

    // h1 requests: its REQ between the link-local addresses.
    let me = Endpoint {
        host: h1().ip,
        id: 1,
    };
    let to_vm = rping_service(vm());
    let req = Message::Req {
        service: to_vm,
        src: SocketAddr::new(h1_ll.into(), 40000),
        dst: SocketAddr::new(vm_ll.into(), 18600),
        qp_type: QPT_RC,
        data: conn(0x13, 0x12_3456, private::REQ - CMA_HDR_LEN),
    };
    let out = b
        .to_wire(h1(), vm(), &body(Address::Service(to_vm), me, &req))
        .unwrap();
    let (_, src, dst, _) = cm_frame::parse_frame(&out).unwrap();
    assert_eq!((src, dst), (h1_ll.into(), IpAddr::from(vm_ll)));
    let Msg::Req(r) = mad_of(&out).msg else {
        panic!("a REQ")
    };
    assert_eq!(
        (r.local_gid, r.remote_gid),
        (h1_ll.octets(), vm_ll.octets())
    );
    // As the kernel's for its ports (the VM's REQ: 39814 to 18600, 0x31de2).
    assert_eq!(r.flow_label, flow_label(40000, 18600));
    assert_eq!(flow_label(39814, 18600), 0x3_1de2);
    assert_eq!(
        CmaHdr::decode(&r.private_data).unwrap(),
        CmaHdr {
            src: SocketAddr::new(h1_ll.into(), 40000),
            dst: vm_ll.into(),
        }
    );
    let f = kernel_rep(vm_ll.into(), h1_ll.into());
    assert!(matches!(
        b.from_wire(h1(), &f),
        Some(FromWire::Forward { .. })
    ));
    let peer = Endpoint {
        host: vm(),
        id: 0x7777,
    };
    let rtu = b
        .to_wire(
            h1(),
            vm(),
            &body(Address::Endpoint(peer), me, &Message::Rtu),
        )
        .unwrap();
    let (_, src, dst, _) = cm_frame::parse_frame(&rtu).unwrap();
    assert_eq!((src, dst), (h1_ll.into(), IpAddr::from(vm_ll)));
    assert_eq!(mad_of(&rtu).msg, Msg::Rtu(1, 0x7777));
    // An IPv4-mapped address has no MAD here.
    let mapped = Message::Req {
        service: to_vm,
        src: "[::ffff:10.100.0.1]:1".parse().unwrap(),
        dst: "[::ffff:10.100.0.20]:2".parse().unwrap(),
        qp_type: QPT_RC,
        data: conn(0x13, 1, private::REQ - CMA_HDR_LEN),
    };
    assert!(b
        .to_wire(h1(), vm(), &body(Address::Service(to_vm), me, &mapped))
        .is_err());
}

/// The service of `udaddy` (port 7174, RDMA_PS_UDP) on host `ip`.
fn udaddy_service(ip: Ipv4Addr) -> Service {
    Service {
        ip,
        port: 7174,
        ps: 0x0111,
    }
}

/// h1 as the SIDR client: its SIDR REQ leaves as `cm_format_sidr_req`'s MAD (its id the
/// request id and transaction id, P_Key 0xffff, the service id, a `struct cma_hdr`
/// first), and the kernel's SIDR REP reaches h1's id with the QP number and Q_Key.
#[test]
fn h1s_sidr_req_leaves_as_a_mad_and_the_sidr_rep_comes_back() {
    let mut b = Bridge::new(vec![vm()]);
    let service = udaddy_service(vm());
    let me = Endpoint {
        host: h1().ip,
        id: 4,
    };
    let req = Message::SidrReq {
        service,
        src: "10.100.0.1:41000".parse().unwrap(),
        dst: "10.100.0.20:7174".parse().unwrap(),
        private_data: vec![0x33; private::SIDR_REQ - CMA_HDR_LEN],
    };
    let frame = b
        .to_wire(h1(), vm(), &body(Address::Service(service), me, &req))
        .unwrap();
    let (mac, src, dst, _) = cm_frame::parse_frame(&frame).unwrap();
    assert_eq!((mac, src, dst), (h1().mac, h1().ip.into(), vm().into()));
    let mad = mad_of(&frame);
    assert_eq!(mad.tid, 4);
    let Msg::SidrReq(r) = mad.msg else {
        panic!("a SIDR REQ: {mad:?}")
    };
    assert_eq!(
        (r.request_id, r.pkey, r.service_id),
        (4, 0xffff, 0x0111_1c06)
    );
    assert_eq!(
        CmaHdr::decode(&r.private_data).unwrap(),
        CmaHdr {
            src: "10.100.0.1:41000".parse().unwrap(),
            dst: vm().into(),
        }
    );
    assert_eq!(&r.private_data[CMA_HDR_LEN..], &[0x33; 180][..]);
    // The kernel's SIDR REP (cma_send_sidr_rep: RDMA_UDP_QKEY).
    let rep = Mad {
        tid: 4,
        msg: Msg::SidrRep(cm_mad::SidrRep {
            request_id: 4,
            status: 0,
            qpn: 0x11,
            service_id: 0x0111_1c06,
            qkey: 0x0123_4567,
            info: vec![],
            private_data: vec![0; private::SIDR_REP],
        }),
    };
    let f = cm_frame::frame(
        (mac_of(vm()), vm().into()),
        (h1().mac, h1().ip.into()),
        0,
        &rep.encode(),
    );
    let Some(FromWire::Forward { from, body: got }) = b.from_wire(h1(), &f) else {
        panic!("forwarded")
    };
    assert_eq!(from, vm());
    assert_eq!(
        m::decode(&got).unwrap(),
        (
            None,
            (
                Address::Endpoint(me),
                Endpoint { host: vm(), id: 0 },
                Message::SidrRep {
                    status: 0,
                    qpn: 0x11,
                    qkey: 0x0123_4567,
                    private_data: vec![0; private::SIDR_REP],
                }
            )
        )
    );
}

/// h1 as the SIDR server: the kernel's SIDR REQ reaches h1's listener as the emulated
/// SIDR REQ, and h1's answer leaves as the SIDR REP with the REQ's transaction id,
/// request id and service id; a second answer to the same request has no MAD.
#[test]
fn the_kernels_sidr_req_reaches_h1_and_h1s_sidr_rep_answers_it() {
    let mut b = Bridge::new(vec![vm()]);
    let hdr = CmaHdr {
        src: "10.100.0.20:52000".parse().unwrap(),
        dst: h1().ip.into(),
    };
    let service = udaddy_service(h1().ip);
    let req = Mad {
        tid: 0x0000_0003_1234_5678,
        msg: Msg::SidrReq(cm_sidr::req(0x5678_9abc, service, &hdr, &[7; 10])),
    };
    let f = cm_frame::frame(
        (mac_of(vm()), vm().into()),
        (h1().mac, h1().ip.into()),
        0,
        &req.encode(),
    );
    let Some(FromWire::Forward { body: got, .. }) = b.from_wire(h1(), &f) else {
        panic!("forwarded")
    };
    let kernel = Endpoint {
        host: vm(),
        id: 0x5678_9abc,
    };
    let mut data = vec![7; 10];
    data.resize(private::SIDR_REQ - CMA_HDR_LEN, 0);
    assert_eq!(
        m::decode(&got).unwrap(),
        (
            None,
            (
                Address::Service(service),
                kernel,
                Message::SidrReq {
                    service,
                    src: "10.100.0.20:52000".parse().unwrap(),
                    dst: "10.100.0.1:7174".parse().unwrap(),
                    private_data: data,
                }
            )
        )
    );
    let answer = Message::SidrRep {
        status: 0,
        qpn: 0x12,
        qkey: 0x0123_4567,
        private_data: vec![9; 4],
    };
    let me = Endpoint {
        host: h1().ip,
        id: 2,
    };
    let frame = b
        .to_wire(h1(), vm(), &body(Address::Endpoint(kernel), me, &answer))
        .unwrap();
    let mad = mad_of(&frame);
    assert_eq!(mad.tid, 0x0000_0003_1234_5678);
    let Msg::SidrRep(r) = mad.msg else {
        panic!("a SIDR REP: {mad:?}")
    };
    assert_eq!(
        (r.request_id, r.status, r.qpn, r.service_id, r.qkey),
        (0x5678_9abc, 0, 0x12, 0x0111_1c06, 0x0123_4567)
    );
    assert_eq!(&r.private_data[..5], &[9, 9, 9, 9, 0]);
    assert!(b
        .to_wire(h1(), vm(), &body(Address::Endpoint(kernel), me, &answer))
        .is_err());
}

/// Between link-local addresses the SIDR REQ and its SIDR REP travel over IPv6, the
/// `struct cma_hdr` of IP version 6.
#[test]
fn a_link_local_sidr_goes_over_ipv6_both_ways() {
    let mut b = Bridge::new(vec![vm()]);
    let (h1_ll, vm_ll) = (link_local(h1().mac), link_local(mac_of(vm())));
    let service = udaddy_service(vm());
    let me = Endpoint {
        host: h1().ip,
        id: 6,
    };
    let req = Message::SidrReq {
        service,
        src: SocketAddr::new(h1_ll.into(), 41000),
        dst: SocketAddr::new(vm_ll.into(), 7174),
        private_data: vec![],
    };
    let frame = b
        .to_wire(h1(), vm(), &body(Address::Service(service), me, &req))
        .unwrap();
    let (_, src, dst, _) = cm_frame::parse_frame(&frame).unwrap();
    assert_eq!((src, dst), (h1_ll.into(), vm_ll.into()));
    let Msg::SidrReq(r) = mad_of(&frame).msg else {
        panic!("a SIDR REQ")
    };
    assert_eq!(r.private_data[1] >> 4, 6, "cma_hdr IP version 6");
    // The VM's SIDR REQ to h1's link-local address reaches h1's service of its IPv4
    // address, and h1's SIDR REP goes back over IPv6.
    let hdr = CmaHdr {
        src: SocketAddr::new(vm_ll.into(), 52000),
        dst: h1_ll.into(),
    };
    let service = udaddy_service(h1().ip);
    let req = Mad {
        tid: 11,
        msg: Msg::SidrReq(cm_sidr::req(0x99, service, &hdr, &[])),
    };
    let f = cm_frame::frame(
        (mac_of(vm()), vm_ll.into()),
        (h1().mac, h1_ll.into()),
        0,
        &req.encode(),
    );
    let Some(FromWire::Forward { from, body: got }) = b.from_wire(h1(), &f) else {
        panic!("forwarded")
    };
    assert_eq!(from, vm());
    let (_, (to, kernel, _)) = m::decode(&got).unwrap();
    assert_eq!(to, Address::Service(service));
    let answer = Message::SidrRep {
        status: 0,
        qpn: 0x12,
        qkey: 0x0123_4567,
        private_data: vec![],
    };
    let frame = b
        .to_wire(h1(), vm(), &body(Address::Endpoint(kernel), me, &answer))
        .unwrap();
    let (_, src, dst, _) = cm_frame::parse_frame(&frame).unwrap();
    assert_eq!((src, dst), (h1_ll.into(), vm_ll.into()));
    assert_eq!(mad_of(&frame).tid, 11);
}
