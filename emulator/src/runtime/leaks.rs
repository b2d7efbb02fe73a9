//! The leak report: how many verbs objects of each kind are alive, and (with
//! `VERBS_EMU_LEAKS` set) a line on stderr at exit naming those a program did not destroy.

use crate::base::boundary::{boundary, Nothing};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Environment variable that asks for the leak report at exit.
pub const LEAKS_ENV: &str = "VERBS_EMU_LEAKS";

/// The kinds of verbs object the library hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An open device.
    Context,
    /// A protection domain.
    Pd,
    /// A memory region.
    Mr,
    /// A completion channel.
    Channel,
    /// A completion queue.
    Cq,
    /// A queue pair.
    Qp,
    /// A shared receive queue.
    Srq,
    /// An address handle.
    Ah,
    /// A flow rule.
    Flow,
    /// A memory window.
    Mw,
    /// A receive work queue.
    Wq,
    /// A receive work queue indirection table.
    RwqIndTable,
}

const KINDS: [(Kind, &str); 12] = [
    (Kind::Context, "context"),
    (Kind::Pd, "PD"),
    (Kind::Mr, "MR"),
    (Kind::Channel, "completion channel"),
    (Kind::Cq, "CQ"),
    (Kind::Qp, "QP"),
    (Kind::Srq, "SRQ"),
    (Kind::Ah, "AH"),
    (Kind::Flow, "flow"),
    (Kind::Mw, "MW"),
    (Kind::Wq, "WQ"),
    (Kind::RwqIndTable, "RWQ indirection table"),
];

static LIVE: [AtomicUsize; 12] = [const { AtomicUsize::new(0) }; 12];

fn slot(kind: Kind) -> &'static AtomicUsize {
    &LIVE[kind as usize]
}

/// One more `kind` alive.
pub fn created(kind: Kind) {
    slot(kind).fetch_add(1, Ordering::Relaxed);
}

/// One `kind` fewer.
pub fn destroyed(kind: Kind) {
    slot(kind).fetch_sub(1, Ordering::Relaxed);
}

/// The report: `verbs-emu: not destroyed at exit: 1 PD, 2 MRs` or `verbs-emu: every
/// verbs object was destroyed`.
pub fn report() -> String {
    let alive: Vec<String> = KINDS
        .iter()
        .filter_map(|(k, name)| {
            let n = slot(*k).load(Ordering::Relaxed);
            (n > 0).then(|| format!("{n} {name}{}", if n == 1 { "" } else { "s" }))
        })
        .collect();
    if alive.is_empty() {
        "verbs-emu: every verbs object was destroyed".into()
    } else {
        format!("verbs-emu: not destroyed at exit: {}", alive.join(", "))
    }
}

extern "C" fn print_report() {
    boundary(Nothing, move || {
        eprintln!("{}", report());
    })
}

/// Prints the report at exit when `VERBS_EMU_LEAKS` is set (called once, at start-up).
pub fn arm() {
    if std::env::var_os(LEAKS_ENV).is_some() {
        // SAFETY: registers a function with no arguments that only reads atomics and
        // writes to stderr; atexit has no other precondition.
        if unsafe { libc::atexit(print_report) } != 0 {
            eprintln!("verbs-emu: cannot register the leak report (atexit failed)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_index_their_own_slot() {
        for (i, (k, _)) in KINDS.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
    }
}
