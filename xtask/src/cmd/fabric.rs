//! A `verbs-emu-fabric` process started by a command (`emu`, `bench emu`, the interop
//! step): run with `--stop-on-eof`, so it stops when its stdin, a pipe held here, closes,
//! also when xtask dies.

use std::io::BufRead;
use std::process::{Child, Command, ExitStatus, Stdio};

use super::common::Error;

/// A running fabric process and the socket it serves.
#[derive(Debug)]
pub struct FabricProcess {
    child: Child,
    /// The socket's path, from the fabric's readiness line (what `VERBS_EMU_FABRIC` names).
    pub socket: String,
}

impl FabricProcess {
    /// Starts `c` (the fabric binary with the caller's options and stderr) with
    /// `--stop-on-eof` and waits for its readiness line, the path of its socket.
    ///
    /// # Errors
    /// It cannot be started, or it exits before saying it listens (the error names the
    /// command and its exit status; its own message is on its stderr).
    pub fn start(mut c: Command) -> Result<Self, Error> {
        c.arg("--stop-on-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| format!("cannot start the fabric process {c:?}: {e}"))?;
        let mut line = String::new();
        let read = child
            .stdout
            .take()
            .map(|out| std::io::BufReader::new(out).read_line(&mut line));
        if !matches!(read, Some(Ok(n)) if n > 0) {
            let status = child
                .wait()
                .map_or_else(|e| e.to_string(), |s| s.to_string());
            return Err(format!("the fabric process {c:?} did not start ({status})"));
        }
        Ok(FabricProcess {
            child,
            socket: line.trim_end().to_owned(),
        })
    }

    /// Its process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for it to exit by itself (Ctrl-C, SIGTERM), its stdin held open meanwhile.
    ///
    /// # Errors
    /// Waiting failed.
    pub fn serve(mut self) -> Result<ExitStatus, Error> {
        // Child::wait closes the child's stdin first, and a closed stdin stops the fabric
        // (--stop-on-eof): hold it open until it exits.
        let _stdin = self.child.stdin.take();
        self.child
            .wait()
            .map_err(|e| format!("waiting for the fabric process: {e}"))
    }

    /// Closes its stdin and waits for it to print its summary and exit.
    ///
    /// # Errors
    /// Waiting failed.
    pub fn stop(mut self) -> Result<ExitStatus, Error> {
        drop(self.child.stdin.take());
        self.child
            .wait()
            .map_err(|e| format!("waiting for the fabric process: {e}"))
    }
}

impl Drop for FabricProcess {
    /// A fabric left running (an early error) is stopped the same way.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
