//! CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the CRC that RoCEv2's ICRC uses.
//!
//! Written by hand (slice-by-8 tables built at compile time) so the crate needs no
//! dependency for it and the RoCE path stays fast.

const POLY: u32 = 0xEDB8_8320;

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            s += 1;
        }
        i += 1;
    }
    t
}

static TABLES: [[u32; 256]; 8] = make_tables();

/// Continues a raw CRC-32 register (no pre- or post-inversion) over `data`, like the
/// kernel's `crc32_le`.
#[must_use]
pub fn crc32_le(mut crc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) ^ crc;
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xff) as usize]
            ^ TABLES[2][((hi >> 8) & 0xff) as usize]
            ^ TABLES[1][((hi >> 16) & 0xff) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ TABLES[0][((crc ^ u32::from(b)) & 0xff) as usize];
    }
    crc
}

/// The standard CRC-32 of `data` (initial value all ones, final inversion), as used by
/// Ethernet, zlib and `crc32fast::hash`.
#[must_use]
pub fn crc32(data: &[u8]) -> u32 {
    !crc32_le(!0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn rxe_seed_is_eight_ff_bytes() {
        // rxe starts its ICRC from 0xdebb20e3: the register after 8 bytes of 0xff.
        assert_eq!(crc32_le(!0, &[0xff; 8]), 0xdebb_20e3);
    }

    #[test]
    fn slice_by_8_matches_bytewise() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 + 7) as u8).collect();
        let mut bytewise = !0u32;
        for &b in &data {
            bytewise = (bytewise >> 8) ^ TABLES[0][((bytewise ^ u32::from(b)) & 0xff) as usize];
        }
        assert_eq!(crc32_le(!0, &data), bytewise);
    }
}
