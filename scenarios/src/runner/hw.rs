//! Scenarios on real verbs: every host of the scenario is played by one device (Soft-RoCE
//! rxe0 in the VM, or a NIC) whose QPs talk to each other through it. Only what real
//! verbs can do without a fabric runs here: UD receivers (rxe has no RAW_PACKET), and
//! faults the senders apply themselves (exact drops and duplicates).

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use backend_hw::HwVerbs;

use super::drive::{build, Clock, RunError};
use crate::model::{Scenario, Transport};
use crate::outcome::Outcome;

struct WallClock(Instant);

impl Clock for WallClock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
    fn step(&self) -> bool {
        std::thread::sleep(Duration::from_micros(200));
        true
    }
    fn advance(&self, ns: u64) {
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

/// Whether `s` can run on real verbs as-is.
///
/// # Errors
/// [`RunError::Unsupported`] naming what cannot run there.
pub fn check_runnable(s: &Scenario) -> Result<(), RunError> {
    if let Some((i, _)) = s
        .receivers
        .iter()
        .enumerate()
        .find(|(_, r)| r.transport != Transport::Ud)
    {
        return Err(RunError::Unsupported(format!(
            "receiver {i}: only UD receivers run on real verbs here"
        )));
    }
    if !s.faults.sender_applicable() {
        return Err(RunError::Unsupported(
            "only exact drops and duplicates can be applied on real verbs (at the senders)".into(),
        ));
    }
    if s.receivers.iter().any(|r| r.consumer_delay_ns > 0) || s.senders.iter().any(|x| x.rate > 0.0)
    {
        return Err(RunError::Unsupported(
            "consumer delays and rates are simulated time only".into(),
        ));
    }
    Ok(())
}

/// Runs `s` on the device with interface address `iface`.
///
/// # Errors
/// As [`check_runnable`]; transport errors.
pub fn run_hw(s: &Scenario, iface: Ipv4Addr) -> Result<Outcome, RunError> {
    s.validate()?;
    check_runnable(s)?;
    let drive = build(s, |_| HwVerbs::new(), |_| iface, |_| [0; 6])?;
    drive.run(s, &WallClock(Instant::now()), 500)
}
