//! Striding ("multi-packet") receive queues, sans-IO: where in the current WQE a packet
//! lands and what its completion says.
//!
//! The rules, and where they are read:
//! - A WQE is one buffer of `2^log_num_strides` strides of `2^log_stride_bytes` bytes
//!   (`struct mlx5dv_striding_rq_init_attr`, rdma-core providers/mlx5/mlx5dv.h). Each
//!   packet starts at the next free stride of the current WQE and takes as many strides
//!   as its bytes need, so a packet larger than a stride takes several (DPDK
//!   drivers/net/mlx5/mlx5_rx.c, `mlx5_rx_burst_mprq`: `strd_cnt` strides per packet,
//!   `consumed_strd += strd_cnt`).
//! - With the two-byte shift (`two_byte_shift_en`) the device writes each packet two
//!   bytes into its first stride and counts those two bytes in the completion's byte
//!   count (spead2 `ibv_wq_mprq_t::read_wc` subtracts `data_offset` from it).
//! - The completion's 32-bit byte count is packed: bits 0-15 the byte count, bits 16-30
//!   the strides consumed, bit 31 the filler flag, as spead2's `ibv_wq_mprq_t::read_wc`
//!   reads it (DPDK's drivers/common/mlx5/mlx5_prm.h masks the stride count with
//!   `MLX5_MPRQ_STRIDE_NUM_MASK` 0x3fff0000, 14 bits, with `MLX5_MPRQ_LEN_MASK` 0xffff and
//!   `MLX5_MPRQ_FILLER_MASK` 0x80000000; no count here reaches bit 30, except a filler of
//!   more than 2^14 - 1 strides, which only WQEs of more than 2^14 strides can have).
//! - A packet that does not fit in the strides left in the WQE is not split: the device
//!   completes the rest of the WQE as a filler completion (no packet, filler flag, the
//!   strides left) and places the packet at the start of the next WQE (DPDK's
//!   `mlx5_rx_burst_mprq` adds a filler CQE's strides to `consumed_strd`, then skips it:
//!   `if (byte_cnt & MLX5_MPRQ_FILLER_MASK) continue;`).
//! - A WQE is finished, and the next one becomes current, when all its strides are
//!   consumed (spead2 sets `FLAG_LAST` then and reposts the WQE).
//!
//! Choices of this model where the sources say nothing: a packet larger than a whole WQE
//! (or than the 16-bit byte count) is dropped; a filler of more strides than the 15-bit
//! field holds (only with 2^16 strides per WQE) is completed as several fillers.

use verbs_api::StridingRqAttr;

/// The filler flag of the packed byte count.
pub(crate) const FILLER: u32 = 1 << 31;
/// The largest stride count the packed field holds.
pub(crate) const MAX_STRIDES_FIELD: u32 = 0x7fff;

/// Where the next packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// At byte `offset` of the current WQE's buffer (the shift included), taking
    /// `strides` strides; `byte_cnt` is the completion's packed word.
    Packet {
        offset: u64,
        strides: u32,
        byte_cnt: u32,
    },
    /// It does not fit the `strides` left: complete them as filler first.
    Filler { strides: u32 },
    /// It fits no WQE.
    TooLarge,
}

/// The packed byte count of a completion.
pub(crate) fn byte_cnt(bytes: u32, strides: u32, filler: bool) -> u32 {
    debug_assert!(bytes <= 0xffff && strides <= MAX_STRIDES_FIELD);
    (bytes & 0xffff) | ((strides & MAX_STRIDES_FIELD) << 16) | if filler { FILLER } else { 0 }
}

/// Where a packet of `len` bytes goes in a WQE of geometry `g` of which `consumed`
/// strides are used.
pub(crate) fn place(g: &StridingRqAttr, consumed: u32, len: usize) -> Placement {
    let shift = if g.two_byte_shift_en { 2 } else { 0 };
    let bytes = len as u64 + shift;
    let stride = u64::from(g.stride_bytes());
    let need = bytes.div_ceil(stride);
    if bytes > 0xffff || need > u64::from(g.num_strides()) {
        return Placement::TooLarge;
    }
    let left = g.num_strides() - consumed;
    if need > u64::from(left) {
        return Placement::Filler { strides: left };
    }
    let strides = need as u32;
    Placement::Packet {
        offset: u64::from(consumed) * stride + shift,
        strides,
        byte_cnt: byte_cnt(bytes as u32, strides, false),
    }
}

/// The filler completions (their packed words) that complete `strides` strides.
pub(crate) fn fillers(mut strides: u32) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        (strides > 0).then(|| {
            let n = strides.min(MAX_STRIDES_FIELD);
            strides -= n;
            byte_cnt(0, n, true)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(log_stride: u32, log_num: u32, shift: bool) -> StridingRqAttr {
        StridingRqAttr {
            single_stride_log_num_of_bytes: log_stride,
            single_wqe_log_num_of_strides: log_num,
            two_byte_shift_en: shift,
        }
    }

    /// spead2's `read_wc`: (byte_len, strides, filler) from the packed word.
    fn read_wc(word: u32, data_offset: u32) -> (u32, u32, bool) {
        let strides = word >> 16;
        (
            (word & 0xffff).wrapping_sub(data_offset),
            strides & 0x7fff,
            strides & 0x8000 != 0,
        )
    }

    #[test]
    fn packets_take_consecutive_strides() {
        let g = geometry(6, 9, false); // 64-byte strides, 512 per WQE
        assert_eq!(
            place(&g, 0, 60),
            Placement::Packet {
                offset: 0,
                strides: 1,
                byte_cnt: 60 | 1 << 16
            }
        );
        // 1472 bytes of UDP payload in a frame of 1514 bytes: 24 strides.
        let Placement::Packet {
            offset,
            strides,
            byte_cnt,
        } = place(&g, 1, 1514)
        else {
            panic!("fits");
        };
        assert_eq!((offset, strides), (64, 24));
        assert_eq!(read_wc(byte_cnt, 0), (1514, 24, false));
        // Exactly one stride, and one byte more.
        assert!(matches!(
            place(&g, 0, 64),
            Placement::Packet { strides: 1, .. }
        ));
        assert!(matches!(
            place(&g, 0, 65),
            Placement::Packet { strides: 2, .. }
        ));
    }

    #[test]
    fn the_two_byte_shift_moves_the_packet_and_counts_in_the_byte_count() {
        let g = geometry(6, 9, true);
        let Placement::Packet {
            offset,
            strides,
            byte_cnt,
        } = place(&g, 3, 62)
        else {
            panic!("fits");
        };
        assert_eq!((offset, strides), (3 * 64 + 2, 1));
        assert_eq!(read_wc(byte_cnt, 2), (62, 1, false));
        // 63 bytes plus the shift need two strides.
        assert!(matches!(
            place(&g, 0, 63),
            Placement::Packet { strides: 2, .. }
        ));
    }

    #[test]
    fn a_packet_that_does_not_fit_the_rest_of_the_wqe_gets_a_filler() {
        let g = geometry(6, 9, false);
        assert_eq!(place(&g, 500, 1514), Placement::Filler { strides: 12 });
        let words: Vec<u32> = fillers(12).collect();
        assert_eq!(words, vec![12 << 16 | FILLER]);
        assert_eq!(read_wc(words[0], 0), (0, 12, true));
        // It fits exactly into the last strides.
        assert!(matches!(
            place(&g, 488, 1514),
            Placement::Packet {
                offset: 31232,
                strides: 24,
                ..
            }
        ));
    }

    #[test]
    fn fillers_beyond_the_field_are_split_and_huge_packets_fit_nowhere() {
        let words: Vec<u32> = fillers(0x8001).collect();
        assert_eq!(
            words,
            vec![FILLER | MAX_STRIDES_FIELD << 16, FILLER | 2 << 16]
        );
        assert_eq!(fillers(0).count(), 0);
        let g = geometry(6, 9, false); // 32 KiB per WQE
        assert_eq!(place(&g, 0, 32 * 1024 + 1), Placement::TooLarge);
        let big = geometry(13, 16, false);
        assert_eq!(place(&big, 0, 0x10000), Placement::TooLarge);
        assert!(matches!(
            place(&big, 0, 9000),
            Placement::Packet { strides: 2, .. }
        ));
    }
}
