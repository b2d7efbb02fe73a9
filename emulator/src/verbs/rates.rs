//! Static rate conversions (`ibv_rate_to_mult`, `mult_to_ibv_rate`, `ibv_rate_to_mbps`,
//! `mbps_to_ibv_rate`), with the values of rdma-core's `libibverbs/verbs.c` (v44.0).

use std::ffi::c_int;

use crate::base::boundary::{boundary, Value};
use crate::base::ffi;

/// `(rate, multiple of 2.5 Gb/s, Mb/s)`; rates without a multiple have 0 there.
const RATES: &[(ffi::ibv_rate, c_int, c_int)] = &[
    (ffi::IBV_RATE_2_5_GBPS, 1, 2500),
    (ffi::IBV_RATE_5_GBPS, 2, 5000),
    (ffi::IBV_RATE_10_GBPS, 4, 10000),
    (ffi::IBV_RATE_20_GBPS, 8, 20000),
    (ffi::IBV_RATE_30_GBPS, 12, 30000),
    (ffi::IBV_RATE_40_GBPS, 16, 40000),
    (ffi::IBV_RATE_60_GBPS, 24, 60000),
    (ffi::IBV_RATE_80_GBPS, 32, 80000),
    (ffi::IBV_RATE_120_GBPS, 48, 120000),
    (ffi::IBV_RATE_14_GBPS, 0, 14062),
    (ffi::IBV_RATE_56_GBPS, 0, 56250),
    (ffi::IBV_RATE_112_GBPS, 0, 112500),
    (ffi::IBV_RATE_168_GBPS, 0, 168750),
    (ffi::IBV_RATE_25_GBPS, 0, 25781),
    (ffi::IBV_RATE_100_GBPS, 0, 103125),
    (ffi::IBV_RATE_200_GBPS, 0, 206250),
    (ffi::IBV_RATE_300_GBPS, 0, 309375),
    (ffi::IBV_RATE_28_GBPS, 11, 28125),
    (ffi::IBV_RATE_50_GBPS, 20, 53125),
    (ffi::IBV_RATE_400_GBPS, 160, 425000),
    (ffi::IBV_RATE_600_GBPS, 240, 637500),
    (ffi::IBV_RATE_800_GBPS, 320, 850000),
    (ffi::IBV_RATE_1200_GBPS, 480, 1275000),
];

/// `ibv_rate_to_mult`: -1 for a rate with no multiple.
pub extern "C" fn ibv_rate_to_mult(rate: ffi::ibv_rate) -> c_int {
    boundary(Value(-1), move || {
        RATES
            .iter()
            .find(|r| r.0 == rate && r.1 != 0)
            .map_or(-1, |r| r.1)
    })
}

/// `mult_to_ibv_rate`: `IBV_RATE_MAX` for an unknown multiple.
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> ffi::ibv_rate {
    boundary(Value(ffi::IBV_RATE_MAX), move || {
        RATES
            .iter()
            .find(|r| r.1 == mult && mult != 0)
            .map_or(ffi::IBV_RATE_MAX, |r| r.0)
    })
}

/// `ibv_rate_to_mbps`: -1 for an unknown rate.
pub extern "C" fn ibv_rate_to_mbps(rate: ffi::ibv_rate) -> c_int {
    boundary(Value(-1), move || {
        RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
    })
}

/// `mbps_to_ibv_rate`: `IBV_RATE_MAX` for an unknown speed.
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> ffi::ibv_rate {
    boundary(Value(ffi::IBV_RATE_MAX), move || {
        RATES
            .iter()
            .find(|r| r.2 == mbps)
            .map_or(ffi::IBV_RATE_MAX, |r| r.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip_and_refuse_unknowns() {
        assert_eq!(ibv_rate_to_mult(ffi::IBV_RATE_40_GBPS), 16);
        assert_eq!(mult_to_ibv_rate(16), ffi::IBV_RATE_40_GBPS);
        assert_eq!(ibv_rate_to_mult(ffi::IBV_RATE_100_GBPS), -1);
        assert_eq!(mult_to_ibv_rate(0), ffi::IBV_RATE_MAX);
        assert_eq!(ibv_rate_to_mbps(ffi::IBV_RATE_100_GBPS), 103125);
        assert_eq!(mbps_to_ibv_rate(103125), ffi::IBV_RATE_100_GBPS);
        assert_eq!(mbps_to_ibv_rate(100000), ffi::IBV_RATE_MAX);
        assert_eq!(ibv_rate_to_mbps(ffi::IBV_RATE_MAX), -1);
    }
}
