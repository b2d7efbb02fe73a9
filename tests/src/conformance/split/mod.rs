//! Conformance cases split across the wire: each case's two QPs are in two processes
//! (the `split-peer` program, on real rxe in the Soft-RoCE VM or on the emulated rxe of a
//! fabric host), an *active* side that posts the requests and a *passive* side that
//! answers them, joined by a TCP control connection ([`ctl`]) over which they exchange
//! QP numbers, PSNs, GIDs, addresses and rkeys and meet at barriers.
//!
//! Each side logs what it observes with the suite's [`Log`] (every completion with all
//! its fields, QP states, bytes), naming its QP `a` (active) or `b` (passive) and the
//! peer's QP by the same names, so the lines do not depend on where a side runs. At the
//! end of a case the passive side sends its lines to the active side, which writes the
//! case's outcome ([`write_outcome`]): the same text whichever stacks the two sides run
//! on. `cargo xtask test --wire` runs every case with both sides on rxe (the baseline)
//! and with one side on rxe and the other emulated, both ways round, and requires the
//! texts to be equal; the `lossy_` cases run again on a fabric that loses frames.

pub mod cases;
pub mod ctl;

use std::io::Write;

use verbs_api::helpers::{bring_up, transition::RemoteQp, ConnectParams};
use verbs_api::{AccessFlags, AhAttr, Context, Gid, MemoryRegion, QpState, QpType, QueuePair};

use super::outcome::Log;
use super::rig::{CqPair, Rig};
pub use ctl::{Ctl, Info};

/// Which half of a case a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Posts the requests (QP `a`).
    Active,
    /// Answers them (QP `b`).
    Passive,
}

impl Side {
    /// This side's name in the outcome (`a` or `b`).
    pub fn name(self) -> &'static str {
        match self {
            Side::Active => "a",
            Side::Passive => "b",
        }
    }

    /// The other side.
    pub fn peer(self) -> Side {
        match self {
            Side::Active => Side::Passive,
            Side::Passive => Side::Active,
        }
    }

    /// Parses `active` or `passive`.
    ///
    /// # Errors
    /// Anything else.
    pub fn parse(s: &str) -> Result<Side, String> {
        match s {
            "active" => Ok(Side::Active),
            "passive" => Ok(Side::Passive),
            _ => Err(format!("a side is `active` or `passive`, not {s:?}")),
        }
    }
}

/// One side of one case: the device, the connection to the peer, the log.
pub struct Session<'a, C: Context> {
    /// Which side this is.
    pub side: Side,
    /// The device.
    pub rig: Rig<C>,
    /// The connection to the other side.
    pub ctl: &'a mut Ctl,
    /// What this side observed.
    pub log: Log,
}

impl<C: Context> std::fmt::Debug for Session<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("side", &self.side)
            .field("rig", &self.rig)
            .finish()
    }
}

/// A connected QP of one side, its CQ and memory, and what the peer said about its own.
pub struct Endpoint<C: Context> {
    /// The CQ (send and receive), named `cq_a` or `cq_b`.
    pub cq: CqPair<C>,
    /// The QP.
    pub qp: C::Qp,
    /// This side's memory (its address and rkey went to the peer).
    pub mr: C::Mr,
    /// The peer's QP, memory and GID.
    pub peer: Info,
}

impl<C: Context> std::fmt::Debug for Endpoint<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("qp", &self.qp.qp_num())
            .field("peer", &self.peer)
            .finish()
    }
}

/// The first send PSN of each side's QPs (distinct, so a frame's PSN tells its sender).
pub const fn first_psn(side: Side) -> u32 {
    match side {
        Side::Active => 0x10_0000,
        Side::Passive => 0x20_0000,
    }
}

impl<C: Context> Session<'_, C> {
    /// Panics with the control connection's error: the case cannot go on.
    fn ctl_ok<T>(r: Result<T, String>) -> T {
        r.unwrap_or_else(|e| panic!("control connection: {e}"))
    }

    /// Both sides reach `tag` before either goes on.
    pub fn barrier(&mut self, tag: &str) {
        Self::ctl_ok(self.ctl.barrier(tag));
    }

    /// This side's name (`a` or `b`).
    pub fn me(&self) -> &'static str {
        self.side.name()
    }

    /// A CQ of 64 entries named `cq_a` or `cq_b` in the log.
    pub fn cq(&mut self) -> CqPair<C> {
        let cq = self.rig.cq(64);
        let name = match self.side {
            Side::Active => "cq_a",
            Side::Passive => "cq_b",
        };
        self.log.cq(name, &cq.cq);
        cq
    }

    /// Logs `n` completions of this side's CQ (see [`Log::collect`]).
    pub fn collect(&mut self, cq: &CqPair<C>, n: usize) {
        let name = match self.side {
            Side::Active => "cq_a",
            Side::Passive => "cq_b",
        };
        self.log.collect(name, &cq.cq, n);
    }

    /// Logs the state of this side's QP.
    pub fn state(&mut self, qp: &C::Qp) {
        let me = self.me();
        self.log.state(me, qp);
    }

    /// Names this side's QP and the peer's (by number) in the log.
    fn name_qps(&mut self, qp: &C::Qp, peer_qpn: u32) {
        let (me, peer) = (self.me(), self.side.peer().name());
        self.log.qp(me, qp);
        self.log.peer_qp(peer, peer_qpn);
    }

    /// What this side tells the peer about `qp` and `mr`.
    fn info(&self, qp: &C::Qp, mr: &C::Mr) -> Info {
        Info {
            qpn: qp.qp_num(),
            psn: first_psn(self.side),
            gid: self.rig.gid.0,
            addr: mr.addr(),
            rkey: mr.rkey(),
        }
    }

    /// The address vector to the peer's GID.
    pub fn peer_av(&self, peer: &Info) -> AhAttr {
        AhAttr::roce(Gid(peer.gid), self.rig.gid_index, self.rig.port)
    }

    /// An RC QP on a fresh CQ with `mr_len` bytes of memory allowing `access` (QP and
    /// memory), told to the peer and connected to the peer's, in RTS after `tweak`
    /// adjusted its parameters; both sides are in RTS when it returns.
    pub fn rc(
        &mut self,
        mr_len: usize,
        access: AccessFlags,
        tweak: impl FnOnce(&mut ConnectParams),
    ) -> Endpoint<C> {
        let cq = self.cq();
        let qp = self.rig.qp(QpType::Rc, &cq.cq, 64);
        let mr = self.rig.mr(mr_len, access);
        let peer: Info = Self::ctl_ok(self.ctl.exchange(&self.info(&qp, &mr)));
        self.name_qps(&qp, peer.qpn);
        let mut p = ConnectParams {
            port: self.rig.port,
            access,
            remote: Some(RemoteQp {
                qpn: peer.qpn,
                psn: peer.psn,
                av: self.peer_av(&peer),
            }),
            sq_psn: first_psn(self.side),
            ..ConnectParams::default()
        };
        tweak(&mut p);
        bring_up(&qp, QpState::Rts, &p).expect("bring the RC QP up");
        self.barrier("rts");
        Endpoint { cq, qp, mr, peer }
    }

    /// A UD QP in RTS with Q_Key `qkey` on a fresh CQ, and `mr_len` bytes of memory; the
    /// peer's QP number and GID are in the result.
    pub fn ud(&mut self, mr_len: usize, qkey: u32) -> Endpoint<C> {
        let cq = self.cq();
        let qp = self.rig.ud_qp(&cq.cq, qkey);
        let mr = self.rig.mr(mr_len, AccessFlags::empty());
        let peer: Info = Self::ctl_ok(self.ctl.exchange(&self.info(&qp, &mr)));
        self.name_qps(&qp, peer.qpn);
        self.barrier("rts");
        Endpoint { cq, qp, mr, peer }
    }

    /// Logs whether `len` bytes of `mr` at `offset` are `want`: `bytes NAME: as sent`, or
    /// how many differ and the first that does.
    pub fn bytes(&mut self, name: &str, mr: &C::Mr, offset: usize, want: &[u8]) {
        let got = super::rig::read(mr, offset, want.len());
        let differ: Vec<usize> = (0..want.len()).filter(|&i| got[i] != want[i]).collect();
        let line = match differ.first() {
            None => format!("bytes {name}: as sent"),
            Some(i) => format!(
                "bytes {name}: {} of {} differ, the first at {i} ({:#04x}, not {:#04x})",
                differ.len(),
                want.len(),
                got[*i],
                want[*i]
            ),
        };
        self.log.line(line);
    }
}

/// `len` bytes of a pattern that differs with `seed` and has no period shorter than 251
/// bytes (a misplaced packet shows).
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i % 251) as u8).wrapping_mul(7).wrapping_add(seed) ^ ((i / 251) as u8))
        .collect()
}

/// A case: both sides' halves in one function, which looks at [`Session::side`].
pub type CaseFn<C> = fn(&mut Session<'_, C>);

/// Runs the cases named in `names` (in that order) as `side` over `ctl`, each on a
/// freshly opened device (`open`). The active side returns each case's outcome lines (its
/// own, then the passive side's); the passive side returns empty outcomes.
///
/// # Errors
/// A control-connection failure, or the sides disagreeing on the cases.
pub fn run_cases<C: Context>(
    side: Side,
    ctl: &mut Ctl,
    names: &[&str],
    open: impl Fn() -> Rig<C>,
) -> Result<Vec<(String, Vec<String>)>, String> {
    let table = cases::all::<C>();
    let mut out = Vec::new();
    for name in names {
        let case = table
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| format!("no split case {name}"))?
            .1;
        ctl.barrier(&format!("case {name}"))?;
        let mut s = Session {
            side,
            rig: open(),
            ctl,
            log: Log::new(),
        };
        case(&mut s);
        let mine = s.log.lines().to_vec();
        drop(s);
        match side {
            Side::Passive => {
                ctl.send(&mine)?;
                out.push(((*name).to_owned(), Vec::new()));
            }
            Side::Active => {
                let theirs: Vec<String> = ctl.recv()?;
                let mut lines = mine;
                lines.extend(theirs);
                out.push(((*name).to_owned(), lines));
            }
        }
    }
    Ok(out)
}

/// Writes outcomes as the step reads them: `case NAME`, its lines, `end NAME`.
///
/// # Errors
/// Writing failed.
pub fn write_outcome(
    w: &mut impl Write,
    outcomes: &[(String, Vec<String>)],
) -> std::io::Result<()> {
    for (name, lines) in outcomes {
        writeln!(w, "case {name}")?;
        for l in lines {
            writeln!(w, "{l}")?;
        }
        writeln!(w, "end {name}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_has_no_short_period() {
        let p = pattern(3, 4096);
        assert_ne!(p[0], p[1]);
        for period in 1..251 {
            assert!(
                (0..p.len() - period).any(|i| p[i] != p[i + period]),
                "period {period}"
            );
        }
        assert_ne!(pattern(4, 16), pattern(3, 16));
    }

    #[test]
    fn outcomes_are_written_in_blocks() {
        let mut v = Vec::new();
        write_outcome(
            &mut v,
            &[
                ("x".into(), vec!["l1".into(), "l2".into()]),
                ("y".into(), vec![]),
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "case x\nl1\nl2\nend x\ncase y\nend y\n"
        );
    }
}
