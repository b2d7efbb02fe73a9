//! A case's outcome as exact, backend-independent lines: every post's return code, every
//! completion with all the fields a device sets (wr_id, status, opcode, byte_len,
//! immediate, flags, QP and source QP, in the order polled), QP states, async events.
//! QP numbers and handles differ between backends and runs, so they are logged by the
//! names the case gives them. A case logs what it sees and compares the whole log with
//! the expected lines at the end, so one run on a device shows every difference at once.

use std::time::{Duration, Instant};

use verbs_api::{
    AsyncEvent, Completion, CompletionQueue, Context, EventElement, QueuePair, Result, WcFlags,
};

/// How long [`Log::collect`] waits for completions that should come.
const COLLECT_DEADLINE: Duration = Duration::from_secs(5);
/// How long [`Log::collect`] and [`Log::events`] keep looking for more than expected.
const QUIET: Duration = Duration::from_millis(150);

/// The lines a case observed, with the names its QPs, CQs and SRQs go by.
#[derive(Debug, Default)]
pub struct Log {
    qps: Vec<(u32, &'static str)>,
    /// QPs of another process (the split cases), whose numbers may equal ours.
    peer_qps: Vec<(u32, &'static str)>,
    handles: Vec<(EventElement, &'static str)>,
    lines: Vec<String>,
}

impl Log {
    /// An empty log.
    pub fn new() -> Self {
        Log::default()
    }

    /// Names a QP (its number in completions and events).
    pub fn qp<Q: QueuePair>(&mut self, name: &'static str, qp: &Q) {
        self.qps.push((qp.qp_num(), name));
        self.handles.push((EventElement::Qp(qp.qp_num()), name));
    }

    /// Names a peer's QP in another process or host (the split cases) by its number,
    /// which may equal one of ours: it names the source QP of completions, before ours.
    pub fn peer_qp(&mut self, name: &'static str, qpn: u32) {
        self.peer_qps.push((qpn, name));
    }

    /// Names a CQ (in events).
    pub fn cq<Q: CompletionQueue>(&mut self, name: &'static str, cq: &Q) {
        self.handles.push((EventElement::Cq(cq.handle()), name));
    }

    /// Names an SRQ (in events).
    pub fn srq(&mut self, name: &'static str, handle: u32) {
        self.handles.push((EventElement::Srq(handle), name));
    }

    fn qp_name(&self, qpn: u32) -> String {
        self.name_in(&self.qps, qpn)
    }

    fn name_in(&self, first: &[(u32, &'static str)], qpn: u32) -> String {
        match first.iter().chain(&self.qps).find(|(n, _)| *n == qpn) {
            Some((_, name)) => (*name).to_string(),
            None if qpn == 0 => "0".into(),
            None => format!("qpn {qpn:#x}"),
        }
    }

    /// Adds a free-form line.
    pub fn line(&mut self, s: impl Into<String>) {
        self.lines.push(s.into());
    }

    /// Logs the outcome of a post or another call: `what: ok` or `what: KIND` (and the
    /// index of the failed work request, when the call names one).
    pub fn result<T>(&mut self, what: &str, r: &Result<T>) {
        let s = match r {
            Ok(_) => format!("{what}: ok"),
            Err(e) => match e.bad_wr() {
                Some(i) => format!("{what}: {:?} bad_wr={i}", e.kind()),
                None => format!("{what}: {:?}", e.kind()),
            },
        };
        self.lines.push(s);
    }

    /// Logs one completion, polled from the CQ named `cq`.
    pub fn wc(&mut self, cq: &str, w: &Completion) {
        let imm = w
            .imm()
            .map_or_else(|| "-".to_string(), |i| format!("{i:#x}"));
        let flags = if w.wc_flags.is_empty() {
            "-".to_string()
        } else {
            let mut f = Vec::new();
            for (name, flag) in [
                ("GRH", WcFlags::GRH),
                ("IMM", WcFlags::WITH_IMM),
                ("CSUM", WcFlags::IP_CSUM_OK),
                ("INV", WcFlags::WITH_INV),
            ] {
                if w.wc_flags.contains(flag) {
                    f.push(name);
                }
            }
            f.join("|")
        };
        let line = format!(
            "{cq}: wr {} {:?} {:?} len {} imm {imm} flags {flags} qp {} src {}",
            w.wr_id,
            w.status,
            w.opcode,
            w.byte_len,
            self.qp_name(w.qp_num),
            self.name_in(&self.peer_qps, w.src_qp),
        );
        self.lines.push(line);
    }

    /// Polls `cq` until `n` completions came (or a deadline), then a little longer to
    /// catch any surplus, and logs them all in the order polled.
    pub fn collect<Q: CompletionQueue>(&mut self, name: &str, cq: &Q, n: usize) {
        let mut got = Vec::new();
        let mut buf = [Completion::default(); 16];
        let start = Instant::now();
        while got.len() < n && start.elapsed() < COLLECT_DEADLINE {
            let k = cq.poll(&mut buf).expect("poll_cq");
            got.extend_from_slice(&buf[..k]);
            if k == 0 {
                std::thread::yield_now();
            }
        }
        let quiet = Instant::now();
        while quiet.elapsed() < QUIET {
            let k = cq.poll(&mut buf).expect("poll_cq");
            got.extend_from_slice(&buf[..k]);
            std::thread::sleep(Duration::from_millis(1));
        }
        for w in &got {
            self.wc(name, w);
        }
    }

    /// Logs a QP's state: `state NAME: STATE`.
    pub fn state<Q: QueuePair>(&mut self, name: &str, qp: &Q) {
        let s = match qp.state() {
            Ok(s) => s.as_str().to_string(),
            Err(e) => format!("{:?}", e.kind()),
        };
        self.lines.push(format!("state {name}: {s}"));
    }

    fn event(&mut self, e: &AsyncEvent) {
        let what = match self.handles.iter().find(|(h, _)| *h == e.element) {
            Some((_, name)) => (*name).to_string(),
            None => format!("{:?}", e.element),
        };
        self.lines
            .push(format!("event {}: {what}", e.event_type.as_str()));
    }

    /// Logs every async event raised so far or within a short while, driving the
    /// simulator's clock through empty polls of `cq`.
    pub fn events<C: Context>(&mut self, ctx: &C, cq: &C::Cq) {
        let start = Instant::now();
        while start.elapsed() < QUIET {
            while let Some(e) = ctx.poll_async_event().expect("poll_async_event") {
                self.event(&e);
            }
            let _ = cq.poll(&mut []);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The lines logged so far.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Compares the log with `expected`, line by line.
    ///
    /// # Panics
    /// On the first difference, showing both logs in full.
    pub fn check(&self, expected: &[&str]) {
        let same = self.lines.len() == expected.len()
            && self.lines.iter().zip(expected).all(|(a, b)| a == b);
        assert!(
            same,
            "outcome differs\n--- expected\n{}\n--- got\n{}\n",
            expected.join("\n"),
            self.lines
                .iter()
                .map(|l| format!("{l:?},"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
