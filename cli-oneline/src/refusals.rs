//! Bad-input tables for the tools' tests: each row runs a tool on something wrong, and
//! the tool must refuse it the way this crate's errors look: the status the row names,
//! a line on stderr that starts with the tool's prefix and names what was wrong, and no
//! panic. A usage error (status 2), or any refusal of a table made with
//! [`Refusals::one_line`], is that one line and nothing else.

use std::process::Output;

/// The rows of a bad-input table checked so far, and those that failed.
#[derive(Debug, Default)]
pub struct Refusals {
    one_line: bool,
    rows: usize,
    failures: Vec<String>,
}

impl Refusals {
    /// A table whose refusals of status 2 are one line (others may print more, such as
    /// what was written out before the error).
    #[must_use]
    pub fn new() -> Self {
        Refusals::default()
    }

    /// A table whose every refusal is one line on stderr.
    #[must_use]
    pub fn one_line() -> Self {
        Refusals {
            one_line: true,
            ..Refusals::default()
        }
    }

    /// Checks one row: `out` (of the run named `what`) exited with `status`, and a line of
    /// its stderr starts with `prefix` and contains `words`.
    pub fn check(&mut self, what: &str, out: &Output, status: i32, prefix: &str, words: &str) {
        self.rows += 1;
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().find(|l| l.contains(words));
        let ok = out.status.code() == Some(status)
            && line.is_some_and(|l| l.starts_with(prefix))
            && !err.contains("panicked")
            && (!(self.one_line || status == crate::USAGE) || err.lines().count() == 1);
        if !ok {
            self.failures.push(format!(
                "{what}: status {:?}, want {status} and a line {prefix:?}... naming {words:?}; \
                 stderr: {err}",
                out.status.code()
            ));
        }
    }

    /// Adds a failure the caller found in a row itself.
    pub fn fail(&mut self, why: String) {
        self.failures.push(why);
    }

    /// Panics listing every failed row, if any; returns how many rows were checked.
    ///
    /// # Panics
    /// When a row failed.
    pub fn assert_all_refused(self) -> usize {
        assert!(
            self.failures.is_empty(),
            "{} of {} rows:\n{}",
            self.failures.len(),
            self.rows,
            self.failures.join("\n")
        );
        self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    fn out(code: i32, stderr: &str) -> Output {
        Output {
            status: ExitStatus::from_raw(code << 8),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_one_line_usage_error_passes_and_anything_else_fails() {
        let mut t = Refusals::new();
        t.check("ok", &out(2, "tool: error: bad --x\n"), 2, "tool: ", "--x");
        t.check(
            "ok",
            &out(1, "wrote 3 heaps\ntool: f.pcap: truncated\n"),
            1,
            "tool: ",
            "f.pcap",
        );
        assert_eq!(t.assert_all_refused(), 2);
        for (o, status) in [
            (out(2, "tool: error: bad --x\nusage: tool\n"), 2), // two lines
            (out(1, "tool: error: bad --x\n"), 2),              // status
            (out(2, "other: error: bad --x\n"), 2),             // prefix
            (out(2, "tool: error: bad --y\n"), 2),              // words
            (out(2, "tool: --x thread 'main' panicked\n"), 2),  // panic
        ] {
            let mut t = Refusals::new();
            t.check("bad", &o, status, "tool: ", "--x");
            assert!(std::panic::catch_unwind(move || t.assert_all_refused()).is_err());
        }
        let mut t = Refusals::one_line();
        t.check("bad", &out(1, "tool: x\nmore\n"), 1, "tool: ", "x");
        assert!(std::panic::catch_unwind(move || t.assert_all_refused()).is_err());
    }
}
