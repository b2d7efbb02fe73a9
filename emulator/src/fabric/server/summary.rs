//! The one-line summary the fabric prints when it stops: frames moved and lost, the
//! connection manager's messages, the processes that joined, then the CM MADs'
//! clause ([`Server::cm_summary`]) and one per port.

use super::Server;

impl Server {
    /// The one-line summary the fabric prints when it stops.
    #[must_use]
    pub fn summary(&self) -> String {
        let f = self.fabric.stats();
        let s = self.stats;
        let lost: Vec<String> = [
            ("loss", f.dropped_loss),
            ("burst", f.dropped_burst),
            ("FCS", f.dropped_fcs),
            ("overrun", f.dropped_overrun),
            ("no route", f.dropped_no_route),
            ("no process", s.no_process),
            ("process full", s.process_full),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{what} {n}"))
        .collect();
        let cm_lost = if s.cm_lost > 0 {
            format!(", {} lost", s.cm_lost)
        } else {
            String::new()
        };
        let d = self.direct_counts();
        let direct = if d.sent > 0 {
            format!("; {} of the frames went host to host directly", d.sent)
        } else {
            String::new()
        };
        let paused = match s.pauses {
            0 => String::new(),
            1 => ", senders paused once".to_owned(),
            n => format!(", senders paused {n} times"),
        };
        format!(
            "{} frames from hosts, {} delivered, lost: {}; {} duplicated, {} corrupted in \
             the switch{paused}{direct}; {} CM messages forwarded, {} returned{cm_lost}; {} processes \
             joined, {} refused, {} hung up on for bad messages{}{}",
            f.transmitted + d.sent,
            f.delivered + d.delivered,
            if lost.is_empty() {
                "none".to_owned()
            } else {
                lost.join(", ")
            },
            f.duplicated,
            f.corrupted_switch,
            s.cm_forwarded,
            s.cm_returned,
            s.joined,
            s.refused,
            s.bad_messages,
            self.cm_summary(),
            self.ports.summary(),
        )
    }
}
