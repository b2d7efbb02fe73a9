//! The fabric process's socket and rings, spoken to directly: the order of
//! connection-manager messages and of the news that a process went behind the frames sent
//! before them, a message to a process that just went, and garbage on the socket (or in
//! the rings) that leaves the fabric serving the others.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use backend_sim::fabric::ExternalMsg;
use common::fabric::{
    flush_in_background, frame, ip_of, mac_of, next_frame, scratch, Fabric, DEADLINE,
};
use ibverbs::fabric::client;
use ibverbs::fabric::sys::{self, Recv};
use ibverbs::fabric::wire::{FromFabric, ToFabric, MAX_FRAME, MAX_MSG, MIN_FRAME};
use netwire::eth::Mac;

/// A raw connection to the fabric's socket.
fn raw(fabric: &Fabric) -> std::os::fd::OwnedFd {
    sys::connect(&fabric.socket).expect("connect to the fabric")
}

/// The next message the fabric sends on `fd` (an error or a frame), waiting for it.
fn answer(fd: &std::os::fd::OwnedFd) -> Vec<u8> {
    use std::os::fd::AsFd;
    let mut buf = vec![0u8; MAX_MSG + 1];
    match sys::recv_wait(fd.as_fd(), &mut buf, Duration::from_secs(30)).expect("an answer") {
        Recv::Msg(n) => buf[..n].to_vec(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// Rings the doorbell of a host whose ring was scribbled on. The fabric reads every
/// ring each round, doorbell or not, so it may have found the corruption and hung up
/// already: then the send fails (EPIPE), and the error message waits all the same (the
/// fabric reads what is left unread before it closes, so the peer gets its error, not
/// ECONNRESET).
fn doorbell(fd: &std::os::fd::OwnedFd) {
    use std::os::fd::AsFd;
    if let Err(e) = sys::send(fd.as_fd(), b"D", false) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "ring the doorbell: {e}"
        );
    }
}

fn error_of(msg: &[u8]) -> String {
    match FromFabric::decode(msg) {
        Ok(FromFabric::Error(why)) => why.to_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}
/// Sends `msg` on a fresh connection and returns the fabric's error.
fn refused(fabric: &Fabric, msg: &[u8]) -> String {
    use std::os::fd::AsFd;
    let fd = raw(fabric);
    sys::send(fd.as_fd(), msg, false).expect("send");
    error_of(&answer(&fd))
}

/// Set once the tests below hear, on h2, that a process went, or h1's CM message.
static GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static CM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn note_gone(m: client::CmIn<'_>) {
    if matches!(m, client::CmIn::Gone(_)) {
        GONE.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

fn note_cm(m: client::CmIn<'_>) {
    if matches!(m, client::CmIn::From { body: b"DREQ", .. }) {
        CM.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Frames in the tests below: 50.
const SENT: u8 = 50;

/// The set-up of the tests below: a fabric whose link to h2 delays every frame by 20 ms
/// (news that went straight out would beat them), h1 and h2 joined (h2 calling `handler`
/// with its CM messages), and h1's [`SENT`] frames to h2 in its ring. Returns the fabric,
/// h1's two ends and h2's.
fn h1_sent_to_slow_h2(
    name: &str,
    handler: client::CmHandler,
) -> (
    Fabric,
    (client::Sender, client::Receiver),
    (client::Sender, client::Receiver),
) {
    let dir = scratch(name);
    let topo = dir.join("slow.toml");
    std::fs::write(
        &topo,
        "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\n\n\
         [[host]]\nname = \"h2\"\nip = \"10.100.0.2\"\nfaults = { delay_ns = 20000000 }\n",
    )
    .expect("write the topology");
    let fabric = Fabric::start(&dir, &["--topology", topo.to_str().expect("a UTF-8 path")]);
    let (mut h1, h1_rx) = client::join(&fabric.socket, "h1", mac_of(1), ip_of(1)).expect("h1");
    let (h2_tx, mut h2) = client::join(&fabric.socket, "h2", mac_of(2), ip_of(2)).expect("h2");
    h2.set_cm_handler(handler);
    for k in 0..SENT {
        h1.send(&mut ExternalMsg::Frame {
            frame: frame(mac_of(2), mac_of(1), k),
            index: 0,
            sealed: false,
        });
    }
    (fabric, (h1, h1_rx), (h2_tx, h2))
}

/// Waits until `flag` is set, reading `h2`'s socket; then takes every frame in its ring
/// and checks they are the [`SENT`] frames h1 sent.
fn all_frames_there_when(flag: &std::sync::atomic::AtomicBool, h2: &mut client::Receiver) {
    let begin = Instant::now();
    while !flag.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(begin.elapsed() < DEADLINE, "h2 never heard");
        std::thread::sleep(Duration::from_micros(100));
        h2.read_control();
    }
    let mut buf = Vec::new();
    let mut got = 0u8;
    while h2.pop(&mut buf).is_some() {
        assert_eq!(buf, frame(mac_of(2), mac_of(1), got), "frame {got}");
        got += 1;
    }
    assert_eq!(got, SENT, "frames still on their way when h2 heard");
}

/// A connection-manager message goes after the frames its sender sent before it (a DREQ
/// follows the data on the wire): when h2 gets h1's message, h1's frames are in h2's
/// ring.
#[test]
fn a_cm_message_comes_after_the_frames_sent_before_it() {
    let (fabric, (h1, h1_rx), (h2_tx, mut h2)) = h1_sent_to_slow_h2("cm-after-frames", note_cm);
    let link = h1.cm_link().expect("a CM link");
    link.send(ip_of(2), b"DREQ").expect("send");
    all_frames_there_when(&CM, &mut h2);
    drop((link, h1, h1_rx, h2_tx, h2));
    let summary = fabric.stop();
    assert!(
        summary.contains("1 CM messages forwarded, 0 returned"),
        "{summary}"
    );
}

/// A process that goes: the fabric tells the others only once the frames it sent before
/// going are in their rings, as a kernel's DREQ follows its data on the wire. When h2
/// hears that h1 went, every frame h1 sent is in h2's ring already (an rping client once
/// saw the server's disconnection before its last message).
#[test]
fn news_of_a_gone_process_comes_after_its_last_frames() {
    let (fabric, h1, (h2_tx, mut h2)) = h1_sent_to_slow_h2("gone-after-frames", note_gone);
    drop(h1);
    all_frames_there_when(&GONE, &mut h2);
    drop((h2_tx, h2));
    let summary = fabric.stop();
    assert!(
        summary.contains(&format!("{SENT} frames from hosts, {SENT} delivered")),
        "{summary}"
    );
}

/// Joins `host` on a raw connection and reads its welcome: the connection and the
/// memfd of its rings.
fn raw_join(
    fabric: &Fabric,
    host: &'static str,
    last: u8,
) -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::AsFd;
    let fd = raw(fabric);
    let mut buf = Vec::new();
    ToFabric::Hello {
        mac: mac_of(last),
        ip: ip_of(last),
        host,
    }
    .encode(&mut buf);
    sys::send(fd.as_fd(), &buf, false).expect("hello");
    let mut msg = vec![0u8; MAX_MSG + 1];
    let (got, rings) = sys::recv_with_fd(fd.as_fd(), &mut msg, DEADLINE).expect("the welcome");
    assert!(matches!(got, Recv::Msg(_)), "{got:?}");
    (fd, rings.expect("the rings' memfd"))
}

#[test]
fn a_cm_message_to_a_process_that_just_went_comes_back() {
    // h2's process goes just before h1 sends it a CM message (an rping client gone
    // before the server's DREP). Whether the fabric reads h2's hang-up first or h1's
    // message, the message comes back to h1: none is lost.
    use std::os::fd::{AsFd, AsRawFd};
    let dir = scratch("cm-gone");
    let fabric = Fabric::start(&dir, &[]);
    let rounds = 20;
    let (h1, _) = raw_join(&fabric, "h1", 1);
    for _ in 0..rounds {
        let (h2, _) = raw_join(&fabric, "h2", 2);
        // Hung up with shutdown, not only close: another test's child process, between
        // its fork and its exec, may hold a copy of the descriptor for a moment.
        // SAFETY: shutdown takes a descriptor and a constant.
        let hung_up = unsafe { libc::shutdown(h2.as_raw_fd(), libc::SHUT_RDWR) };
        assert_eq!(hung_up, 0);
        drop(h2);
        let mut buf = Vec::new();
        ToFabric::Cm {
            to: ip_of(2),
            body: b"DREP",
        }
        .encode(&mut buf);
        sys::send(h1.as_fd(), &buf, false).expect("send");
        // The message back, and the notice that h2 went (in either order): only then is
        // h2 free for the next round's process.
        let (mut back, mut gone) = (false, false);
        while !(back && gone) {
            let m = answer(&h1);
            match FromFabric::decode(&m) {
                Ok(FromFabric::CmReturned { to, body }) if !back => {
                    assert_eq!((to, body), (ip_of(2), &b"DREP"[..]));
                    back = true;
                }
                Ok(FromFabric::Gone(ip)) if !gone => {
                    assert_eq!(ip, ip_of(2));
                    gone = true;
                }
                // The two hosts' direct pair, made and unmade (this raw client uses none).
                Ok(FromFabric::Peer { .. } | FromFabric::Unpeer(_)) => {}
                other => panic!("expected the message back and h2 gone, got {other:?}"),
            }
        }
    }
    drop(h1);
    let summary = fabric.stop();
    assert!(
        summary.contains(&format!("0 CM messages forwarded, {rounds} returned;")),
        "{summary}"
    );
}

#[test]
fn garbage_on_the_socket_leaves_the_fabric_serving() {
    use std::os::fd::AsFd;
    let dir = scratch("garbage");
    let fabric = Fabric::start(&dir, &[]);
    let mut buf = Vec::new();
    let hello = |host: &'static str, last: u8, buf: &mut Vec<u8>| {
        ToFabric::Hello {
            mac: mac_of(last),
            ip: ip_of(last),
            host,
        }
        .encode(buf);
        buf.clone()
    };
    assert_eq!(refused(&fabric, b"\x00garbage"), "unknown message tag 0x00");
    assert_eq!(
        refused(&fabric, b"Dx"),
        "doorbell message of 1 bytes (expected 0)"
    );
    assert_eq!(refused(&fabric, b"D"), "a message before the hello");
    assert_eq!(
        refused(&fabric, b"H\x02short"),
        "hello of 6 bytes (at least 11)"
    );
    assert_eq!(
        refused(&fabric, &hello("h9", 9, &mut buf)),
        "no host h9 in the fabric's topology (it has h1, h2, h3, h4)"
    );
    assert_eq!(
        refused(&fabric, &hello("h1", 2, &mut buf)),
        "host h1 is 10.100.0.1 (02:00:0a:64:00:01) in the fabric's topology, not 10.100.0.2 \
         (02:00:0a:64:00:02): give the program the fabric's topology"
    );
    assert_eq!(
        refused(&fabric, &vec![b'H'; 70_000]),
        format!("a message of 70000 bytes (at most {MAX_MSG})")
    );
    // A host that joined, then sent garbage: hung up on, and free again.
    let fd = raw(&fabric);
    sys::send(fd.as_fd(), &hello("h1", 1, &mut buf), false).expect("send");
    assert_eq!(
        FromFabric::decode(&answer(&fd)),
        Ok(FromFabric::Welcome { ring: 4 << 20 })
    );
    sys::send(fd.as_fd(), b"J\x01", false).expect("send");
    assert_eq!(
        error_of(&answer(&fd)),
        "group message of 1 bytes (expected 4)"
    );
    drop(fd);
    // A host that wrote garbage into its ring: hung up on too.
    let (fd, shared) = raw_join(&fabric, "h1", 1);
    scribble_head(&shared);
    doorbell(&fd);
    assert_eq!(
        error_of(&answer(&fd)),
        "its ring: the shared ring is corrupt: the producer's head is out of range"
    );
    drop(fd);
    // Records the fabric must refuse in a ring whose head is in range: a length no frame
    // has, a wrap mark before the ring's end, a record longer than what was published.
    for (len, head, why) in [
        (70_000u32, 24u64, "a frame of an impossible length"),
        (u32::MAX, 16, "a wrap mark past the head"),
        (100, 24, "a record past the head or the ring's end"),
    ] {
        let (fd, shared) = raw_join(&fabric, "h1", 1);
        scribble_record(&shared, len, head);
        doorbell(&fd);
        assert_eq!(
            error_of(&answer(&fd)),
            format!("its ring: the shared ring is corrupt: {why}")
        );
    }

    // Still serving: two hosts join and a frame goes from one to the other; a third host
    // gets a multicast frame only once it joined the group; a host is one process only.
    let (mut h1, h1_rx) = client::join(&fabric.socket, "h1", mac_of(1), ip_of(1)).expect("h1");
    let (_h2, mut h2) = client::join(&fabric.socket, "h2", mac_of(2), ip_of(2)).expect("h2");
    let (mut h3, mut h3_rx) = client::join(&fabric.socket, "h3", mac_of(3), ip_of(3)).expect("h3");
    let again = client::join(&fabric.socket, "h2", mac_of(2), ip_of(2)).unwrap_err();
    assert!(
        again.ends_with("refused host h2: host h2 is already joined by another process"),
        "{again}"
    );
    let to_h2 = frame(mac_of(2), mac_of(1), 0x5a);
    h1.send(&mut ExternalMsg::Frame {
        frame: to_h2.clone(),
        index: 0,
        sealed: false,
    });
    assert_eq!(next_frame(&mut h2), to_h2);
    let group = Ipv4Addr::new(239, 1, 1, 1);
    h3.send(&mut ExternalMsg::JoinGroup(group));
    let mut mc = frame(Mac([0x01, 0x00, 0x5e, 1, 1, 1]), mac_of(1), 0);
    mc[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    mc[30..34].copy_from_slice(&group.octets());
    // The join travels on the socket, frames in the ring: the fabric reads the socket
    // first in a round, so once a frame h3 sent after its join has arrived, the fabric
    // has the membership.
    let from_h3 = frame(mac_of(2), mac_of(3), 0x33);
    h3.send(&mut ExternalMsg::Frame {
        frame: from_h3.clone(),
        index: 0,
        sealed: false,
    });
    assert_eq!(next_frame(&mut h2), from_h3);
    h1.send(&mut ExternalMsg::Frame {
        frame: mc.clone(),
        index: 0,
        sealed: false,
    });
    assert_eq!(next_frame(&mut h3_rx), mc);
    // Garbage frames of every length a ring carries: runts, broadcast and multicast
    // garbage, IPv4 and RoCEv2 frames with garbage headers, pseudo-random bytes. The
    // fabric switches or drops them; a clean frame sent after them still arrives.
    let mut garbage = vec![vec![0u8; MIN_FRAME], vec![0xff; MAX_FRAME]];
    let mut ipv4 = frame(mac_of(2), mac_of(1), 0xee);
    ipv4[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    garbage.push(ipv4.clone());
    ipv4[14] = 0x45;
    ipv4[23] = 17; // UDP, to the RoCEv2 port, with a garbage BTH
    ipv4[36..38].copy_from_slice(&4791u16.to_be_bytes());
    garbage.push(ipv4);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..300 {
        let len = MIN_FRAME + (next() as usize) % (MAX_FRAME - MIN_FRAME + 1);
        let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        match i % 3 {
            0 => f[..6].copy_from_slice(&mac_of(2).0),
            1 => f[..6].copy_from_slice(&[0x01, 0x00, 0x5e, 1, 1, 1]),
            _ => {}
        }
        garbage.push(f);
    }
    for f in &garbage {
        h1.send(&mut ExternalMsg::Frame {
            frame: f.clone(),
            index: 0,
            sealed: false,
        });
    }
    let after = frame(mac_of(2), mac_of(1), 0xa5);
    h1.send(&mut ExternalMsg::Frame {
        frame: after.clone(),
        index: 0,
        sealed: false,
    });
    // What did not fit h1's queue waits in its sender (the fabric pauses h1 while h2 has
    // not taken its frames): flushed meanwhile, as a NIC's progress thread does.
    let flusher = flush_in_background(h1);
    let mut skipped = 0;
    while next_frame(&mut h2) != after {
        skipped += 1;
        assert!(skipped <= garbage.len(), "the clean frame never came");
    }
    let h1 = flusher.join().expect("the flusher");
    assert!(!h1_rx.is_gone() && !h2.is_gone() && !h3_rx.is_gone());
    drop((h1, h1_rx, _h2, h2, h3, h3_rx));
    let summary = fabric.stop();
    assert!(
        summary.ends_with("8 processes joined, 8 refused, 5 hung up on for bad messages"),
        "{summary}"
    );
}

/// Maps the first page of the fabric's shared file (the memfd of the rings a joined
/// process sends on; its size is far larger), hands it to `write`, and unmaps it.
fn write_ring_page(shared: &std::os::fd::OwnedFd, write: impl FnOnce(*mut u8)) {
    use std::os::fd::AsRawFd;
    // SAFETY: maps one page of a file of ours shared with the fabric; nothing else in this
    // process uses the mapping, which is unmapped before returning.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            shared.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "map the rings");
        write(p.cast::<u8>());
        libc::munmap(p, 4096);
    }
}

/// Writes an impossible head into the ring a joined process sends on (the first word
/// of the shared file).
fn scribble_head(shared: &std::os::fd::OwnedFd) {
    // SAFETY: one aligned word at the start of the mapped page.
    write_ring_page(shared, |p| unsafe {
        p.cast::<u64>().write_volatile(u64::MAX)
    });
}

/// Writes one record header (frame length `len`) at the start of the ring a joined process
/// sends on, and publishes `head` (the first word of the shared file; the data area
/// starts at byte 128).
fn scribble_record(shared: &std::os::fd::OwnedFd, len: u32, head: u64) {
    write_ring_page(shared, |p| {
        // SAFETY: an aligned u32 at byte 128 and an aligned u64 at byte 0 of the mapped
        // page.
        unsafe {
            p.add(128).cast::<u32>().write_volatile(len);
            p.cast::<u64>().write_volatile(head);
        }
    });
}
