//! The Internet checksum (RFC 1071): the one's-complement sum of 16-bit big-endian words
//! that IPv4 headers and UDP segments carry.
//!
//! The sum is split in two steps so a caller computes it once, over exactly the bytes it
//! needs: [`sum_words`] accumulates (it can be continued over several slices, such as a
//! pseudo-header and a segment), [`fold_checksum`] folds and complements. Nothing here
//! is called unless a builder is asked to fill a checksum or a checker to verify one.

use std::net::Ipv4Addr;

/// Sums 16-bit big-endian words of `data` into a 32-bit accumulator; an odd last byte
/// counts as the high byte of a word padded with zero. One's-complement carries are
/// folded later by [`fold_checksum`]. To continue over several slices, every slice but
/// the last must have an even length.
#[must_use]
pub fn sum_words(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
        // Fold early so the accumulator never overflows on jumbo frames.
        if acc & 0x8000_0000 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

/// Folds a 32-bit accumulator to the 16-bit one's-complement checksum.
#[must_use]
pub fn fold_checksum(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum of `data`. Over bytes that already carry their checksum, it is
/// 0 when that checksum verifies.
#[must_use]
pub fn internet_checksum(data: &[u8]) -> u16 {
    fold_checksum(sum_words(0, data))
}

/// The sum of the IPv4 pseudo-header (RFC 768) for a `protocol` segment of `len` bytes
/// from `src` to `dst`, to continue with [`sum_words`] over the segment.
#[must_use]
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: usize) -> u32 {
    let mut acc = sum_words(0, &src.octets());
    acc = sum_words(acc, &dst.octets());
    acc += u32::from(protocol);
    acc += (len as u32) & 0xffff;
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc_1071_example() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum_words(0, &data), 0x2_ddf0);
        assert_eq!(fold_checksum(sum_words(0, &data)), !0xddf2);
        assert_eq!(internet_checksum(&data), 0x220d);
    }

    #[test]
    fn a_real_ipv4_header() {
        // The IPv4 header of the ConnectX-4 CNP in backend-sim's frame tests.
        let mut h = [
            0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00,
            0x11, 0x01, 0x0a, 0x00, 0x12, 0x01,
        ];
        assert_eq!(internet_checksum(&h), 0, "it verifies");
        h[10] = 0;
        h[11] = 0;
        assert_eq!(internet_checksum(&h), 0x9161);
    }

    #[test]
    fn odd_lengths_pad_the_last_byte_with_zero() {
        assert_eq!(internet_checksum(&[]), 0xffff);
        assert_eq!(internet_checksum(&[0x12]), !0x1200);
        assert_eq!(internet_checksum(&[0x12, 0x34, 0x56]), !(0x1234 + 0x5600));
        assert_eq!(
            internet_checksum(&[0xff, 0xff, 0xff]),
            !(((0xffffu32 + 0xff00) & 0xffff) as u16 + 1)
        );
    }

    #[test]
    fn jumbo_buffers_do_not_overflow() {
        let data = vec![0xffu8; 1 << 20];
        assert_eq!(internet_checksum(&data), 0);
        let mut odd = vec![0xffu8; (1 << 20) + 1];
        odd[0] = 0;
        // 2^19 words: one is 0x00ff, the rest 0xffff, and a last byte 0xff00.
        let expect = {
            let mut acc: u64 = 0xff + 0xff00 + 0xffff * ((1 << 19) - 1);
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            !(acc as u16)
        };
        assert_eq!(internet_checksum(&odd), expect);
    }

    #[test]
    fn pseudo_header_of_a_udp_segment() {
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        assert_eq!(
            pseudo_header_sum(src, dst, 17, 12),
            0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 17 + 12
        );
    }

    proptest! {
        /// Against etherparse's independent implementation (which sums native-endian
        /// words: its result's native bytes are the wire bytes), at every length.
        #[test]
        fn agrees_with_etherparse(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let theirs = etherparse::checksum::Sum16BitWords::new().add_slice(&data).ones_complement();
            prop_assert_eq!(internet_checksum(&data), u16::from_be_bytes(theirs.to_ne_bytes()));
        }

        /// Summing in two even-split parts is summing the whole.
        #[test]
        fn sums_continue_across_slices(data in proptest::collection::vec(any::<u8>(), 0..300), cut in any::<prop::sample::Index>()) {
            let at = cut.index(data.len() + 1) & !1;
            let acc = sum_words(sum_words(0, &data[..at]), &data[at..]);
            prop_assert_eq!(fold_checksum(acc), internet_checksum(&data));
        }
    }
}
