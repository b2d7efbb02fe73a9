//! Corruption faults, each caught where hardware catches it: a bit flipped on the wire by
//! the receiving port's FCS, a bit flipped inside the switch (good FCS) by the receiving
//! NIC's RoCEv2 checks (IPv4 header, UDP checksum, ICRC) or, on a RAW_PACKET receive, by
//! the IP_CSUM_OK flag left unset; and a buggy sender's payload flip by nothing (the
//! frame is valid). Expected counts come from a capture on the receiving port, classified
//! with the frame parsers, and must equal the counters exactly.

mod common;
use backend_sim::frame::eth::Mac;
use backend_sim::frame::{check_integrity, Integrity, UdpFrameSpec};
use backend_sim::pcap::PcapFile;
use backend_sim::{CaptureFilter, Direction, LinkFaults, Personality, PortId, Sim};
use common::*;
use verbs_api::{
    Completion, Context, FlowAttr, QueuePair, SendFlags, SendWr, WcFlags, WcStatus, GRH_LEN,
};

const N: usize = 300;

fn port(sim: &Sim, n: &Node) -> PortId {
    sim.port_of(n.host).unwrap()
}

fn set(sim: &Sim, p: PortId, d: Direction, faults: LinkFaults) {
    sim.with_fabric(|f| f.set_link_faults(p, d, faults))
        .unwrap();
}

fn udp_frame(i: usize) -> Vec<u8> {
    let mut payload = vec![0u8; 64];
    payload[..8].copy_from_slice(&(i as u64).to_be_bytes());
    UdpFrameSpec::new(
        Mac([2, 0, 10, 0, 0, 1]),
        Mac([2, 0, 10, 0, 0, 2]),
        (ip(1), 4000),
        (ip(2), 7148),
    )
    .build(&payload)
}

/// Sends `N` UDP frames from `a`'s RAW QP (checksums offloaded) and returns `b`'s
/// completions.
fn raw_run(sim: &Sim, a: &Node, b: &Node) -> Vec<Completion> {
    let (qa, qb) = (raw_qp(a), raw_qp(b));
    let _flow = b
        .ctx
        .create_flow(
            &qb,
            &FlowAttr::udp_endpoint(1, [2, 0, 10, 0, 0, 2], ip(2), 7148),
        )
        .unwrap();
    post_recvs(b, &qb, 0..256);
    let mut got = Vec::new();
    for i in 0..N {
        let f = udp_frame(i);
        write_slot(a, i % 64, &f);
        let sge = [slot_sge(a, i % 64, f.len())];
        // SAFETY: the SGE lies in a.mr.
        unsafe {
            qa.post_send(&[SendWr::send(i as u64, &sge).flags(SendFlags::IP_CSUM)])
                .unwrap();
        }
        sim.run_until_idle();
        let wcs = wait(sim, &b.cq, usize::MAX);
        for wc in &wcs {
            post_recvs(b, &qb, wc.wr_id as usize..wc.wr_id as usize + 1);
        }
        got.extend(
            wcs.into_iter()
                .filter(|w| w.opcode == verbs_api::WcOpcode::Recv),
        );
    }
    got
}

/// Every frame to `p` gets a bit flipped in the switch's egress buffer, and a capture on
/// `p` records what reaches it.
fn flip_in_switch_and_capture(sim: &Sim, p: PortId) {
    let faults = LinkFaults {
        corrupt_switch: 1.0,
        ..LinkFaults::default()
    };
    set(sim, p, Direction::FromSwitch, faults);
    sim.with_fabric(|f| f.capture_to_memory(CaptureFilter::Port(p)))
        .unwrap();
}

fn captured(sim: &Sim) -> Vec<Vec<u8>> {
    let bytes = sim.with_fabric(|f| f.finish_capture()).unwrap().unwrap();
    PcapFile::parse(&bytes)
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.data)
        .collect()
}

#[test]
fn a_wire_flip_is_dropped_by_the_fcs_of_the_port_it_arrives_at() {
    let sim = Sim::new(3);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let (pa, pb) = (port(&sim, &a), port(&sim, &b));
    set(&sim, pa, Direction::ToSwitch, LinkFaults::corrupt(1.0));
    assert!(raw_run(&sim, &a, &b).is_empty());
    let s = sim.with_fabric(|f| f.stats());
    assert_eq!((s.corrupted_wire, s.dropped_fcs), (N as u64, N as u64));
    let (sa, sb) = sim.with_fabric(|f| (f.port_stats(pa).unwrap(), f.port_stats(pb).unwrap()));
    assert_eq!((sa.switch_fcs_errors, sb.rx_fcs_errors), (N as u64, 0));
    // Now on the way down: the receiving NIC's FCS check.
    set(&sim, pa, Direction::ToSwitch, LinkFaults::default());
    set(&sim, pb, Direction::FromSwitch, LinkFaults::corrupt(1.0));
    assert!(raw_run(&sim, &a, &b).is_empty());
    let s = sim.with_fabric(|f| f.stats());
    assert_eq!(s.dropped_fcs, 2 * N as u64);
    assert_eq!(s.dropped_checksum(), 2 * N as u64);
    assert_eq!(s.delivered, 0);
    assert_eq!(
        sim.with_fabric(|f| f.port_stats(pb).unwrap()).rx_fcs_errors,
        N as u64
    );
}

#[test]
fn a_switch_flip_reaches_a_raw_receive_without_the_checksum_flag() {
    let sim = Sim::new(5);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let pb = port(&sim, &b);
    let clean = raw_run(&sim, &a, &b);
    assert_eq!(clean.len(), N);
    assert!(clean
        .iter()
        .all(|w| w.wc_flags.contains(WcFlags::IP_CSUM_OK)));
    flip_in_switch_and_capture(&sim, pb);
    let unclaimed = sim.nic_stats(b.host).rx_unclaimed;
    let got = raw_run(&sim, &a, &b);
    let frames = captured(&sim);
    // Every frame reached b (a good FCS) with one bit flipped after its Ethernet header:
    // the IPv4 or the UDP checksum catches each, so none carries the flag. Those whose
    // flip hit the address or port no longer match the rule.
    assert_eq!(frames.len(), N);
    assert!(frames.iter().all(|f| check_integrity(f) != Integrity::Ok));
    assert!(got.iter().all(|w| w.status == WcStatus::Success));
    assert!(got
        .iter()
        .all(|w| !w.wc_flags.contains(WcFlags::IP_CSUM_OK)));
    let missed = sim.nic_stats(b.host).rx_unclaimed - unclaimed;
    assert_eq!(got.len() as u64 + missed, N as u64);
    assert!(got.len() > N * 3 / 4, "{} of {N} steered", got.len());
    let s = sim.with_fabric(|f| f.stats());
    assert_eq!(s.corrupted_switch, N as u64);
    assert_eq!(
        s.dropped_checksum(),
        0,
        "RAW frames are not dropped by checksum"
    );
}

#[test]
fn a_switch_flip_in_a_roce_frame_is_dropped_by_the_first_nic_check_that_fails() {
    let sim = Sim::new(11);
    let a = node(&sim, 1, Personality::Rxe);
    let b = node(&sim, 2, Personality::Rxe);
    let pb = port(&sim, &b);
    let (qa, qb) = (ud_qp(&a), ud_qp(&b));
    let to_b = ah(&a, ip(2));
    flip_in_switch_and_capture(&sim, pb);
    post_recvs(&b, &qb, 0..256);
    let mut got = Vec::new();
    for i in 0..N {
        let msg = [i as u8; 48];
        write_slot(&a, 0, &msg);
        let sge = [slot_sge(&a, 0, msg.len())];
        // SAFETY: the SGE lies in a.mr.
        unsafe {
            qa.post_send(&[SendWr::ud_send(i as u64, &sge, &to_b, qb.qp_num(), QKEY)])
                .unwrap();
        }
        sim.run_until_idle();
        for wc in wait(&sim, &b.cq, usize::MAX) {
            if wc.opcode == verbs_api::WcOpcode::Recv {
                let slot = wc.wr_id as usize;
                got.push((wc, read_slot(&b, slot, GRH_LEN + 48)[GRH_LEN..].to_vec(), i));
                post_recvs(&b, &qb, slot..slot + 1);
            }
        }
    }
    let frames = captured(&sim);
    assert_eq!(frames.len(), N);
    let (mut ip_header, mut udp, mut icrc, mut passed, mut not_roce) = (0, 0, 0, 0, 0);
    for f in &frames {
        let roce = u16::from_be_bytes([f[36], f[37]]) == 4791 && f[23] == 17 && f[14] == 0x45;
        match (roce, check_integrity(f)) {
            (false, _) => not_roce += 1,
            (true, Integrity::Ok) => passed += 1,
            (true, Integrity::Malformed | Integrity::BadIpChecksum) => ip_header += 1,
            (true, Integrity::BadUdpChecksum) => udp += 1,
            (true, Integrity::BadIcrc) => icrc += 1,
        }
    }
    let s = sim.with_fabric(|f| f.stats());
    let ps = sim.with_fabric(|f| f.port_stats(pb).unwrap());
    assert_eq!(s.corrupted_switch, N as u64);
    assert_eq!(
        (s.dropped_ip_header, ps.rx_ip_header_errors),
        (ip_header, ip_header)
    );
    assert_eq!(
        (s.dropped_udp_checksum, ps.rx_udp_checksum_errors),
        (udp, udp)
    );
    assert_eq!((s.dropped_icrc, ps.rx_icrc_errors), (icrc, icrc));
    assert_eq!(s.delivered, passed + not_roce);
    // Each check caught some: the header's, the UDP checksum's (a flip that makes the
    // absent checksum present and wrong) and the ICRC's.
    assert!(
        ip_header > 0 && udp > 0 && icrc > 0,
        "{ip_header} {udp} {icrc}"
    );
    // What passed every check (a flip in a field the ICRC masks, such as the BTH's
    // reserved byte) is delivered with the bytes that were sent: never wrong bytes.
    assert!(got.len() as u64 <= passed);
    for (wc, bytes, i) in &got {
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(bytes, &vec![*i as u8; 48]);
    }
}

#[test]
fn a_buggy_sender_corrupts_the_payload_into_valid_frames() {
    let sim = Sim::new(13);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let pa = port(&sim, &a);
    set(
        &sim,
        pa,
        Direction::ToSwitch,
        LinkFaults {
            corrupt_payload: 1.0,
            ..LinkFaults::default()
        },
    );
    sim.with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    let got = raw_run(&sim, &a, &b);
    // Valid on the wire: every frame is delivered with the flag, each one bit off what
    // was sent, and the capture shows the frames as they left.
    assert_eq!(got.len(), N);
    assert!(got.iter().all(|w| w.wc_flags.contains(WcFlags::IP_CSUM_OK)));
    let frames = captured(&sim);
    assert_eq!(frames.len(), N);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(check_integrity(f), Integrity::Ok);
        let sent = udp_frame(i);
        let bits: u32 = f[42..]
            .iter()
            .zip(&sent[42..])
            .map(|(x, y)| (x ^ y).count_ones())
            .sum();
        assert_eq!(bits, 1, "frame {i}");
    }
    let s = sim.with_fabric(|f| f.stats());
    assert_eq!((s.corrupted_payload, s.dropped()), (N as u64, 0));
}
