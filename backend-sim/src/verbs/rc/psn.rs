//! Packet sequence numbers and the IBA's timer encodings: 24-bit PSN arithmetic, the
//! local ACK timeout and the RNR NAK timer table.

/// PSNs are 24 bits wide.
pub(crate) const PSN_MASK: u32 = 0x00ff_ffff;

/// `a + n` in the 24-bit PSN space.
pub(crate) fn psn_add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}

/// Signed distance a - b in the 24-bit PSN space.
pub(crate) fn psn_cmp(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// The IBA encoding of RNR timer values (table 45), in nanoseconds.
pub(crate) fn rnr_ns(code: u8) -> u64 {
    const US: [u64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
        245_760, 327_680, 491_520,
    ];
    US[usize::from(code & 31)] * 1000
}

/// The local ACK timeout: 4.096 us * 2^timeout; 0 means none.
pub(crate) fn ack_timeout_ns(t: u8) -> Option<u64> {
    (t != 0).then(|| 4096u64 << u32::from(t.min(31)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_arithmetic_wraps_at_24_bits() {
        assert_eq!(psn_add(PSN_MASK, 1), 0);
        assert_eq!(psn_add(PSN_MASK - 1, 3), 1);
        assert_eq!(psn_add(PSN_MASK, PSN_MASK), PSN_MASK - 1);
        assert_eq!(psn_cmp(1, PSN_MASK), 2);
        assert_eq!(psn_cmp(PSN_MASK, 1), -2);
        assert_eq!(psn_cmp(5, 5), 0);
        // Half the space ahead is "after", the other half "before".
        assert_eq!(psn_cmp(0x7f_ffff, 0), 0x7f_ffff);
        assert_eq!(psn_cmp(0x80_0000, 0), -0x80_0000);
    }

    #[test]
    fn timer_encodings_follow_the_iba_tables() {
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8192));
        assert_eq!(ack_timeout_ns(14), Some(4096 << 14));
        assert_eq!(rnr_ns(0), 655_360_000);
        assert_eq!(rnr_ns(1), 10_000);
        assert_eq!(rnr_ns(12), 640_000);
        assert_eq!(rnr_ns(31), 491_520_000);
    }
}
