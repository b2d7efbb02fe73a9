//! Random frames and mutated files never panic.

use super::*;

proptest! {
    #[test]
    fn random_frames_never_panic(link in prop::sample::select(vec![0u32, 1, 101, 108, 113, 228, 276, 9]),
                                 bytes in prop::collection::vec(any::<u8>(), 0..80),
                                 verify in any::<bool>()) {
        if let Ok(u) = parse_frame(link, &bytes, verify) {
            prop_assert!(u.payload.len() < bytes.len());
        }
    }

    #[test]
    fn mutated_files_never_panic(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
                                 cut in any::<prop::sample::Index>(),
                                 ng in any::<bool>()) {
        let frame = eth(&[0x8100], 0x0800, &ip_udp(b"fuzz me"));
        let mut file = if ng {
            let mut f = Vec::new();
            ng_shb(&mut f, false);
            ng_idb(&mut f, false, 1, Some(9));
            ng_epb(&mut f, false, 0, 1, &rec(0, frame.clone()));
            ng_epb(&mut f, false, 0, 2, &rec(0, frame));
            f
        } else {
            pcap(false, false, 1, &[rec(0, frame.clone()), rec(1, frame)])
        };
        for (i, b) in flips {
            let at = i.index(file.len());
            file[at] ^= b;
        }
        let len = cut.index(file.len() + 1);
        if let Ok(mut src) = PcapSource::new(&file[..len], Filter::ANY) {
            while let Ok(Some(_)) = src.next_datagram() {}
            prop_assert!(src.next_datagram().unwrap().is_none());
        }
    }
}
