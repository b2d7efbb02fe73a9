//! The rings' tests: order, wrap, wake-ups, corruption, sealing, two threads.

use super::*;

const CAP: usize = 32 << 10;

fn frame(len: usize, fill: u8) -> Vec<u8> {
    vec![fill; len]
}

fn pair() -> (Producer, Consumer, Arc<Region>) {
    let (_fd, r) = Region::create(CAP).unwrap();
    let r = Arc::new(r);
    (
        Producer::new(r.clone(), Way::ToFabric),
        Consumer::new(r.clone(), Way::ToFabric),
        r,
    )
}

#[test]
fn frames_come_out_in_order_with_their_indices() {
    let (mut p, mut c, _) = pair();
    let mut out = Vec::new();
    assert_eq!(c.pop(&mut out), Ok(None));
    assert_eq!(p.push(&frame(60, 1), 7), Ok(false));
    assert_eq!(p.push(&frame(9014, 2), 8), Ok(false));
    assert_eq!(c.pop(&mut out), Ok(Some(7)));
    assert_eq!(out, frame(60, 1));
    assert_eq!(c.pop(&mut out), Ok(Some(8)));
    assert_eq!(out, frame(9014, 2));
    assert_eq!(c.pop(&mut out), Ok(None));
}

#[test]
fn take_hands_the_frame_in_place_then_frees_its_room() {
    let (mut p, mut c, r) = pair();
    assert_eq!(c.take(|_, _, _| ()), Ok(None));
    p.push_record(&frame(3000, 5), 11, true).unwrap();
    p.push(&frame(60, 6), 12).unwrap();
    let before = p.queued();
    let got = c.take(|f, index, sealed| {
        // Still the consumer's: the producer sees its room taken until `take` returns.
        assert_eq!(p.queued(), before);
        (f.to_vec(), index, sealed)
    });
    assert_eq!(got, Ok(Some((frame(3000, 5), 11, true))));
    assert_eq!(p.queued(), before - padded(3000) as u64);
    let mut out = Vec::new();
    assert_eq!(c.pop_record(&mut out), Ok(Some((12, false))));
    assert_eq!(out, frame(60, 6));
    assert_eq!(r.counts(Way::ToFabric), (2, 2));
}

#[test]
fn a_full_ring_refuses_and_wraps_once_drained() {
    let (mut p, mut c, _) = pair();
    let mut out = Vec::new();
    // 1000-byte frames take 1016 bytes each: 32 fit in 32 KiB.
    for i in 0..32 {
        assert_eq!(p.push(&frame(1000, i), u64::from(i)), Ok(false), "{i}");
    }
    assert_eq!(p.push(&frame(1000, 99), 99), Err(RingError::Full));
    // Round and round: every record comes out whole, in order, across the wraps.
    let (mut pushed, mut popped) = (32u64, 0u64);
    while pushed < 2000 {
        let len = 1000 + (pushed as usize % 7) * 8;
        match p.push(&frame(len, pushed as u8), pushed) {
            Ok(_) => pushed += 1,
            Err(RingError::Full) => {
                assert_eq!(c.pop(&mut out), Ok(Some(popped)));
                assert_eq!(
                    out.len(),
                    if popped < 32 {
                        1000
                    } else {
                        1000 + (popped as usize % 7) * 8
                    }
                );
                assert!(out.iter().all(|&b| b == popped as u8));
                popped += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    while let Some(ix) = c.pop(&mut out).unwrap() {
        assert_eq!(ix, popped);
        popped += 1;
    }
    assert_eq!(popped, 2000);
}

#[test]
fn a_sleeping_consumer_is_rung_for_once() {
    let (mut p, mut c, _) = pair();
    assert!(!c.sleep_or_not());
    assert_eq!(p.push(&frame(64, 0), 0), Ok(true));
    assert_eq!(p.push(&frame(64, 0), 1), Ok(false));
    assert!(c.sleep_or_not());
    let mut out = Vec::new();
    assert_eq!(c.pop(&mut out), Ok(Some(0)));
}

#[test]
fn garbage_in_the_shared_memory_is_an_error_not_a_crash() {
    let (mut p, mut c, r) = pair();
    let mut out = Vec::new();
    p.push(&frame(64, 0), 0).unwrap();
    // A length no frame has.
    r.write(HEADER, &5u32.to_le_bytes());
    assert_eq!(
        c.pop(&mut out),
        Err(RingError::Corrupt("a frame of an impossible length"))
    );
    // A head that ran away.
    let (_, mut c, r) = pair();
    r.u64_at(HEAD_AT).store(u64::MAX, Ordering::SeqCst);
    assert_eq!(
        c.pop(&mut out),
        Err(RingError::Corrupt("the producer's head is out of range"))
    );
    // A record longer than what was published.
    let (mut p, mut c, r) = pair();
    p.push(&frame(64, 0), 0).unwrap();
    r.write(HEADER, &1000u32.to_le_bytes());
    assert_eq!(
        c.pop(&mut out),
        Err(RingError::Corrupt(
            "a record past the head or the ring's end"
        ))
    );
    // A tail ahead of the head.
    let (mut p, _, r) = pair();
    r.u64_at(TAIL_AT).store(5, Ordering::SeqCst);
    assert_eq!(
        p.push(&frame(64, 0), 0),
        Err(RingError::Corrupt("the consumer's tail is out of range"))
    );
    assert_eq!(
        p.push(&frame(3, 0), 0),
        Err(RingError::Corrupt("a frame of an impossible length"))
    );
}

#[test]
fn the_memfd_is_sealed_and_maps_again() {
    let (fd, r) = Region::create(CAP).unwrap();
    // SAFETY: ftruncate takes no pointers.
    assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 0) }, 0);
    let again = Arc::new(Region::map(fd.as_fd(), CAP).unwrap());
    let mut p = Producer::new(Arc::new(r), Way::FromFabric);
    let mut c = Consumer::new(again, Way::FromFabric);
    p.push(&frame(100, 3), 42).unwrap();
    let mut out = Vec::new();
    assert_eq!(c.pop(&mut out), Ok(Some(42)));
    assert_eq!(out, frame(100, 3));
    assert_eq!(
        Region::map(fd.as_fd(), CAP * 2).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    assert_eq!(
        Region::create(1000).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn two_threads_move_every_frame_once() {
    let (mut p, mut c, _) = pair();
    const N: u64 = 20_000;
    let t = std::thread::spawn(move || {
        let mut i = 0;
        while i < N {
            let len = 14 + (i as usize * 37) % 3000;
            match p.push(&frame(len, i as u8), i) {
                Ok(_) => i += 1,
                Err(RingError::Full) => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    });
    let mut out = Vec::new();
    let mut want = 0;
    while want < N {
        match c.pop(&mut out).unwrap() {
            Some(ix) => {
                assert_eq!(ix, want);
                assert_eq!(out.len(), 14 + (want as usize * 37) % 3000);
                assert!(out.iter().all(|&b| b == want as u8));
                want += 1;
            }
            None => std::thread::yield_now(),
        }
    }
    t.join().unwrap();
}
