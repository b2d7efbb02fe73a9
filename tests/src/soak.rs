//! Soak and overload: a receiver fed faster than it consumes, and a receiver flooded with
//! malformed packets among good ones.
//!
//! - [`udp`]: spead's UDP receiver on loopback, a sender thread with `sendmmsg`. Overload:
//!   a small socket buffer and a consumer that pauses after each batch, so the kernel
//!   drops datagrams; the receiver counts them from SO_RXQ_OVFL
//!   ([`spead::transport::UdpReceiver::kernel_drops`]). Flood: the sender waits for the
//!   receiver after each burst, so nothing is dropped and every good heap must arrive.
//! - [`verbs`]: spead's verbs receiver (raw on the simulator's mlx5, UD on its rxe) and
//!   sender. Overload: each round sends four times the receiver's slots before it polls,
//!   so the NIC drops what finds no receive posted (`rx_no_wqe`). Flood: half the slots per
//!   round. Raw runs also put frames on the wire that the receiver must refuse (fragments,
//!   bad IPv4 header checksums, bad UDP checksums; the receivers verify
//!   checksums, `IbvConfig::verify_checksums`, which spead2 does not).
//!
//! Both mix in a malformed SPEAD datagram after every few good packets ([`malformed`]) and
//! check, as they go: every complete heap has exactly the bytes sent; every datagram sent
//! is received or counted as dropped (`sent = received + drops`); the receiver's live state
//! stays within its bounds (the stream's ready queue is emptied each round, the slots are
//! fixed). The report carries the process's memory high-water (VmHWM) before and after.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend_sim::{Personality, Sim};
use spead::recv::{Heap as RecvHeap, Stream, StreamConfig};
use spead::send::{Heap, Packetizer};
use spead::transport::{UdpReceiver, UdpRecvConfig, UdpSendConfig, UdpSender};
use spead::verbs::{IbvConfig, Receiver, Sender};
use spead::wire::Flavour;

use crate::spead_verbs::{payload, Mode};

/// How long or how much to run, and what to send.
#[derive(Debug, Clone)]
pub struct Options {
    /// Stop after this many heaps ...
    pub heaps: u64,
    /// ... or once this much wall time has passed (checked between rounds), if sooner.
    pub duration: Option<Duration>,
    /// Bytes of each heap's one item.
    pub heap_size: usize,
    /// SPEAD packet size.
    pub packet: usize,
    /// One malformed datagram after every this many good packets.
    pub malformed_every: u64,
    /// Feed faster than the receiver consumes (else wait for it: nothing may be dropped).
    pub overload: bool,
}

impl Options {
    /// `heaps` heaps of 16 KiB in 1472-byte packets, a malformed datagram after every 3
    /// good packets.
    pub fn new(heaps: u64, overload: bool) -> Options {
        Options {
            heaps,
            duration: None,
            heap_size: 16 * 1024,
            packet: 1472,
            malformed_every: 3,
            overload,
        }
    }
}

/// What a soak run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Datagrams (UDP) or frames (verbs) sent: good, malformed and marker.
    pub sent: u64,
    /// Good SPEAD packets among them.
    pub good: u64,
    /// Malformed SPEAD datagrams among them.
    pub malformed: u64,
    /// Frames the receiver must refuse below SPEAD (raw: fragments, bad IPv4 header and UDP
    /// checksums).
    pub bad_frames: u64,
    /// Heaps sent.
    pub heaps_sent: u64,
    /// Datagrams that end the run (UDP: one, after the sender finished; not SPEAD).
    pub markers: u64,
    /// Datagrams or frames the receiver got.
    pub received: u64,
    /// Drops, by who dropped them and why (`kernel`: the socket buffer was full;
    /// `nic rx_no_wqe`: no receive posted; `receiver CAUSE`: refused by the receiver).
    pub dropped: BTreeMap<String, u64>,
    /// Datagrams the stream counted as malformed.
    pub malformed_counted: u64,
    /// Heaps delivered complete (every one with exactly the bytes sent).
    pub complete: u64,
    /// Heaps evicted or flushed incomplete.
    pub incomplete: u64,
    /// The most heaps the stream held ready at once (emptied every round).
    pub max_ready: usize,
    /// The receiver's receive slots (verbs) or batch size (UDP): fixed for the run.
    pub slots: usize,
}

impl Report {
    /// Drops below the receiver (the kernel's or the NIC's): what never reached it.
    pub fn dropped_below(&self) -> u64 {
        self.dropped
            .iter()
            .filter(|(k, _)| !k.starts_with("receiver "))
            .map(|(_, v)| v)
            .sum()
    }

    /// Checks the accounting: every datagram sent was received or dropped below the
    /// receiver, and what the receiver got was delivered or dropped by it.
    ///
    /// # Errors
    /// A message naming the counters that do not add up.
    pub fn check(&self) -> Result<(), String> {
        if self.sent != self.received + self.dropped_below() {
            return Err(format!(
                "sent {} != received {} + dropped below the receiver {}",
                self.sent,
                self.received,
                self.dropped_below()
            ));
        }
        if self.good + self.malformed + self.bad_frames + self.markers != self.sent {
            return Err(format!(
                "sent {} != good {} + malformed {} + bad frames {} + markers {}",
                self.sent, self.good, self.malformed, self.bad_frames, self.markers
            ));
        }
        Ok(())
    }

    /// One line of counters.
    pub fn line(&self) -> String {
        let drops: Vec<String> = self
            .dropped
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        format!(
            "sent {} (good {}, malformed {}, bad frames {}, markers {}), received {}, dropped [{}]; \
             stream: {} malformed counted, {} heaps sent, {} complete (bytes exact), {} incomplete; \
             at most {} heaps ready, {} slots",
            self.sent,
            self.good,
            self.malformed,
            self.bad_frames,
            self.markers,
            self.received,
            drops.join(", "),
            self.malformed_counted,
            self.heaps_sent,
            self.complete,
            self.incomplete,
            self.max_ready,
            self.slots
        )
    }
}

/// The kinds of malformed datagram [`malformed`] makes, in turn.
pub const MALFORMED_KINDS: u64 = 5;

/// Malformed SPEAD datagram number `k` into `out`, made from `good` (a real packet):
/// eight zero bytes, a bad magic, a bad version, a header cut short of its items, and
/// pseudo-random bytes.
pub fn malformed(k: u64, good: &[u8], out: &mut Vec<u8>) {
    out.clear();
    match k % MALFORMED_KINDS {
        0 => out.extend_from_slice(&[0; 8]),
        1 => {
            out.extend_from_slice(good);
            out[0] = 0x00;
        }
        2 => {
            out.extend_from_slice(good);
            out[1] = 0x03;
        }
        3 => out.extend_from_slice(&good[..20.min(good.len())]),
        _ => {
            let mut x = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                out.push(x as u8);
            }
            out[0] = 0xa5;
        }
    }
}

/// The packets of heap `cnt` (one item 0x1000 of `heap_size` bytes of [`payload`]).
fn heap_packets(cnt: u64, heap_size: usize, packet: usize) -> Vec<Vec<u8>> {
    let mut heap = Heap::new(Flavour::SPEAD_64_48);
    heap.add_item(0x1000, payload(cnt, heap_size), false);
    let mut p = Packetizer::new(&heap, cnt, packet).expect("packetizer");
    let mut out = Vec::new();
    let mut buf = vec![0u8; packet];
    while let Some(n) = p.next_packet(&mut buf).expect("packet") {
        out.push(buf[..n].to_vec());
    }
    out
}

/// Checks heaps out of a stream: complete ones must have exactly the bytes sent.
fn take_heaps(stream: &mut Stream, heap_size: usize, r: &mut Report) {
    r.max_ready = r.max_ready.max(stream.ready_len());
    while let Some(h) = stream.pop_heap() {
        check_heap(&h, heap_size);
        if h.complete {
            r.complete += 1;
        }
    }
}

fn check_heap(h: &RecvHeap, heap_size: usize) {
    if !h.complete {
        return;
    }
    let items = h.items();
    let item = items
        .iter()
        .find(|i| i.id == 0x1000)
        .unwrap_or_else(|| panic!("heap {} complete without its item", h.cnt));
    assert!(
        item.bytes() == &payload(h.cnt, heap_size)[..],
        "heap {} delivered complete with wrong bytes",
        h.cnt
    );
}

fn finish_stream(stream: &mut Stream, heap_size: usize, r: &mut Report) {
    stream.flush();
    take_heaps(stream, heap_size, r);
    let s = stream.stats();
    r.malformed_counted = s.packets_malformed;
    r.incomplete = s.incomplete_heaps_evicted + s.incomplete_heaps_flushed;
}

fn expired(started: Instant, opts: &Options) -> bool {
    opts.duration.is_some_and(|d| started.elapsed() >= d)
}

/// The datagram that ends a UDP run (not SPEAD; the receiver stops at it).
const MARKER: &[u8] = b"end of the soak";

/// spead's UDP receiver on loopback; see the module docs.
///
/// # Panics
/// On a socket error, a complete heap with wrong bytes, or a run that does not end
/// within ten minutes of its sender finishing.
pub fn udp(opts: &Options) -> Report {
    let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().expect("address"));
    // Overload: a buffer of about a hundred datagrams; flood: room for every burst.
    cfg.buffer_size = if opts.overload { 128 << 10 } else { 8 << 20 };
    cfg.read_timeout = Some(Duration::from_millis(20));
    cfg.max_packet_size = opts.packet.max(MARKER.len());
    // One datagram per buffer: the soak counts and tells apart each datagram (the end
    // marker among them), so it asks for no coalescing.
    cfg.gro = false;
    let mut rx = UdpReceiver::bind(&cfg).expect("bind the receiver");
    let dest = rx.local_addr().expect("its address");
    let received = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let quiet = Arc::new(AtomicBool::new(false));
    let sender = {
        let (opts, received, done, quiet) =
            (opts.clone(), received.clone(), done.clone(), quiet.clone());
        std::thread::spawn(move || udp_sender(dest, &opts, &received, &done, &quiet))
    };
    let mut stream = Stream::new(StreamConfig::default());
    let mut r = Report {
        slots: cfg.batch,
        ..Report::default()
    };
    let mut got = 0u64;
    let mut ended = false;
    let mut idle_since: Option<Instant> = None;
    while !ended {
        let n = rx.recv_batch().expect("recvmmsg");
        if n == 0 {
            if done.load(Ordering::Acquire) {
                // Everything sent is queued or dropped by now: the buffer is empty, so
                // the marker gets through.
                quiet.store(true, Ordering::Release);
                let since = *idle_since.get_or_insert_with(Instant::now);
                assert!(
                    since.elapsed() < Duration::from_secs(600),
                    "no end marker ten minutes after the sender finished"
                );
            }
            continue;
        }
        idle_since = None;
        for i in 0..n {
            match rx.message(i).map(|(d, _)| d) {
                Some(d) if d == MARKER => ended = true,
                Some(d) => {
                    let _ = stream.add_datagram(d);
                }
                None => stream.stats_mut().packets_malformed += 1,
            }
        }
        stream.note_batch(n);
        got += n as u64;
        received.store(got, Ordering::Release);
        take_heaps(&mut stream, opts.heap_size, &mut r);
        if opts.overload {
            // The slow consumer.
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    let sent = sender.join().expect("the sender thread");
    r.sent = sent.sent;
    r.good = sent.good;
    r.malformed = sent.malformed;
    r.heaps_sent = sent.heaps;
    r.markers = 1;
    r.received = got;
    if rx.kernel_drops() > 0 || opts.overload {
        r.dropped.insert("kernel".into(), rx.kernel_drops());
    }
    finish_stream(&mut stream, opts.heap_size, &mut r);
    r
}

#[derive(Debug, Default)]
struct Sent {
    sent: u64,
    good: u64,
    malformed: u64,
    heaps: u64,
}

fn udp_sender(
    dest: SocketAddr,
    opts: &Options,
    received: &AtomicU64,
    done: &AtomicBool,
    quiet: &AtomicBool,
) -> Sent {
    let mut cfg = UdpSendConfig::new(vec![dest]);
    cfg.buffer_size = 4 << 20;
    let mut tx = UdpSender::new(&cfg).expect("the sender's socket");
    let started = Instant::now();
    let mut s = Sent::default();
    let mut bad = Vec::new();
    let mut datagrams: Vec<Vec<u8>> = Vec::new();
    for cnt in 1..=opts.heaps {
        if expired(started, opts) {
            break;
        }
        datagrams.clear();
        for p in heap_packets(cnt, opts.heap_size, opts.packet) {
            s.good += 1;
            let bad_one = s.good.is_multiple_of(opts.malformed_every).then(|| {
                malformed(s.malformed, &p, &mut bad);
                s.malformed += 1;
                bad.clone()
            });
            datagrams.push(p);
            datagrams.extend(bad_one);
        }
        let batch: Vec<(&[u8], usize)> = datagrams.iter().map(|d| (&d[..], 0)).collect();
        s.sent += batch.len() as u64;
        for chunk in batch.chunks(64) {
            tx.send_batch(chunk).expect("sendmmsg");
        }
        s.heaps += 1;
        if !opts.overload {
            // Wait for the receiver: nothing may be dropped.
            while received.load(Ordering::Acquire) < s.sent {
                std::thread::yield_now();
            }
        }
    }
    done.store(true, Ordering::Release);
    while !quiet.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    tx.send_batch(&[(MARKER, 0)]).expect("send the marker");
    s.sent += 1;
    s
}

/// The simulated address of host `n`.
fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

fn sim_mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// spead's verbs receiver and sender on the simulator; see the module docs.
///
/// # Panics
/// On a verbs error or a complete heap with wrong bytes.
pub fn verbs(mode: Mode, opts: &Options) -> Report {
    use spead::verbs::frame::{checksum, udp_frame};
    let sim = Sim::new(1);
    let personality = match mode {
        Mode::Raw => Personality::Mlx5,
        Mode::Ud => Personality::Rxe,
    };
    let tx_host = sim.add_host("tx", ip(1), personality).expect("tx host");
    let rx_host = sim.add_host("rx", ip(2), personality).expect("rx host");
    let (tx_verbs, rx_verbs) = (sim.verbs(tx_host), sim.verbs(rx_host));
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 77, 0, 1), 7148);
    // A UD message must fit the port's MTU (1024 on the simulated rxe).
    let opts = &Options {
        packet: match mode {
            Mode::Raw => opts.packet,
            Mode::Ud => opts.packet.min(1024),
        },
        ..opts.clone()
    };
    let slots_wanted = 64;
    let mut cfg = IbvConfig::new(vec![group], ip(2));
    cfg.max_size = opts.packet;
    cfg.buffer_size = slots_wanted * (opts.packet + 64);
    // The NIC's checksum verdict, which spead2 does not ask for: without it a frame with
    // a wrong UDP checksum is taken, and the exact-bytes check needs it refused.
    cfg.verify_checksums = true;
    let mut rx = match mode {
        Mode::Raw => Receiver::raw(&rx_verbs, &cfg),
        Mode::Ud => Receiver::ud(&rx_verbs, &cfg),
    }
    .expect("receiver");
    let mut tcfg = IbvConfig::new(vec![group], ip(1));
    tcfg.max_size = opts.packet;
    tcfg.buffer_size = 64 * opts.packet;
    let mut tx = match mode {
        Mode::Raw => Sender::raw(&tx_verbs, &tcfg, sim_mac(ip(1))),
        Mode::Ud => Sender::ud(&tx_verbs, &tcfg),
    }
    .expect("sender");
    let tx_port = sim.port_of(tx_host).expect("tx port");
    let slots = rx.slots();
    let mut stream = Stream::new(StreamConfig::default());
    let mut r = Report {
        slots,
        ..Report::default()
    };
    let per_heap = heap_packets(1, opts.heap_size, opts.packet).len();
    let burst = if opts.overload { 4 * slots } else { slots / 2 };
    let heaps_per_round =
        (burst / (per_heap + per_heap / opts.malformed_every as usize + 2)).max(1);
    let started = Instant::now();
    let mut cnt = 0u64;
    let mut bad = Vec::new();
    let o = group.ip().octets();
    let group_mac = [1, 0, 0x5e, o[1] & 0x7f, o[2], o[3]];
    while cnt < opts.heaps && !expired(started, opts) {
        for _ in 0..heaps_per_round {
            if cnt == opts.heaps {
                break;
            }
            cnt += 1;
            for p in heap_packets(cnt, opts.heap_size, opts.packet) {
                tx.send(&p).expect("send");
                r.good += 1;
                if r.good.is_multiple_of(opts.malformed_every) {
                    malformed(r.malformed, &p, &mut bad);
                    tx.send(&bad).expect("send a malformed datagram");
                    r.malformed += 1;
                }
            }
            r.heaps_sent += 1;
            if mode == Mode::Raw {
                // Frames the receiver must refuse, straight onto the wire: a first
                // fragment, a bad IPv4 header checksum, a bad UDP checksum.
                let p = &heap_packets(cnt, 64, opts.packet)[0];
                let frame = || {
                    udp_frame(
                        sim_mac(ip(1)),
                        SocketAddrV4::new(ip(1), 9000),
                        group_mac,
                        group,
                        4,
                        p,
                    )
                };
                let fix_ip = |f: &mut Vec<u8>| {
                    f[24..26].copy_from_slice(&[0, 0]);
                    let c = checksum(&f[14..14 + usize::from(f[14] & 0x0f) * 4]);
                    f[24..26].copy_from_slice(&c.to_be_bytes());
                };
                let mut fragment = frame();
                fragment[20] = 0x20;
                fix_ip(&mut fragment);
                let mut bad_ip = frame();
                let right = u16::from_be_bytes([bad_ip[24], bad_ip[25]]);
                let wrong = match right {
                    0 | 1 => 2,
                    r => r - 1,
                };
                bad_ip[24..26].copy_from_slice(&wrong.to_be_bytes());
                // The right UDP checksum less one: never 0 ("no checksum") and never
                // right (a fixed value such as 0xdead is right for one frame in 65536).
                let mut bad_sum = frame();
                netwire::frame::offload_checksums(&mut bad_sum);
                let right = u16::from_be_bytes([bad_sum[40], bad_sum[41]]);
                let wrong = match right {
                    0 | 1 => 2,
                    r => r - 1,
                };
                bad_sum[40..42].copy_from_slice(&wrong.to_be_bytes());
                for f in [fragment, bad_ip, bad_sum] {
                    sim.with_fabric(|fab| fab.transmit(tx_port, f))
                        .expect("transmit");
                    r.bad_frames += 1;
                }
            }
        }
        tx.flush().expect("flush");
        sim.run_until_idle();
        poll_all(&mut rx, &mut stream);
        take_heaps(&mut stream, opts.heap_size, &mut r);
    }
    // The simulator is synchronous: once the sender drained and the fabric is idle, every
    // frame was received or dropped, and no marker is needed.
    tx.drain().expect("drain");
    sim.run_until_idle();
    poll_all(&mut rx, &mut stream);
    let s = tx.stats();
    assert_eq!(s.completion_errors, 0, "send completion errors");
    r.sent = s.packets + r.bad_frames;
    let rs = rx.stats();
    r.received = rs.frames;
    assert_eq!(
        rs.frames,
        rs.delivered + rs.dropped_total(),
        "the receiver: frames = delivered + dropped"
    );
    for (cause, n) in &rs.dropped {
        r.dropped.insert(format!("receiver {cause:?}"), *n);
    }
    let nic = sim.nic_stats(rx_host);
    for (name, n) in [
        ("nic rx_no_wqe", nic.rx_no_wqe),
        ("nic rx_unclaimed", nic.rx_unclaimed),
        ("nic rx_malformed", nic.rx_malformed),
        ("nic rx_too_long", nic.rx_too_long),
        ("nic rx_qkey_violation", nic.rx_qkey_violation),
    ] {
        if n > 0 || (name == "nic rx_no_wqe" && opts.overload) {
            r.dropped.insert(name.into(), n);
        }
    }
    finish_stream(&mut stream, opts.heap_size, &mut r);
    r
}

fn poll_all<C: verbs_api::Context>(rx: &mut Receiver<C>, stream: &mut Stream) {
    while rx
        .poll_into(stream, Some(Duration::from_millis(1)))
        .expect("poll")
        > 0
    {}
}

/// The process's memory high-water (VmHWM) in KiB, or None off Linux.
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM:")
}

/// The process's resident memory now (VmRSS) in KiB, or None off Linux.
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS:")
}

fn status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
