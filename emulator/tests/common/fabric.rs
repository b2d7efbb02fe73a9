//! A fabric process (`verbs-emu-fabric`) for the tests that run programs as two hosts,
//! and programs joined to it.

use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};

use netwire::eth::Mac;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long any one program may take before the test gives up on it.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// A scratch folder of this test (fresh each run).
pub fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fabric-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("make the scratch folder");
    d
}

/// A running fabric process.
pub struct Fabric {
    child: Child,
    /// Its socket (what `VERBS_EMU_FABRIC` names).
    pub socket: PathBuf,
    err: PathBuf,
    /// The topology file it was started with (`--topology`), if any.
    topology: Option<PathBuf>,
}

impl Fabric {
    /// Starts `verbs-emu-fabric` with `args` and waits for its readiness line (the socket's
    /// path on stdout).
    pub fn start(scratch: &Path, args: &[&str]) -> Fabric {
        Fabric::start_named(scratch, "", &[], args)
    }

    /// [`Fabric::start`] run through `wrapper` (a command that runs the rest of its
    /// arguments, such as `nsenter -t PID -n --`, which must exec it in its place: the
    /// fabric is stopped by its pid), its run folder and stderr named after `name` (for
    /// several fabrics in one scratch folder).
    pub fn start_named(scratch: &Path, name: &str, wrapper: &[&str], args: &[&str]) -> Fabric {
        let err = scratch.join(format!("fabric{name}.err"));
        let mut cmd = match wrapper.split_first() {
            None => Command::new(env!("CARGO_BIN_EXE_verbs-emu-fabric")),
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(env!("CARGO_BIN_EXE_verbs-emu-fabric"));
                c
            }
        };
        let mut child = cmd
            .arg("--dir")
            .arg(scratch.join(format!("run{name}")))
            .arg("--die-with-parent")
            .args(args)
            .env_remove("VERBS_EMU_TOPOLOGY")
            .env_remove("VERBS_EMU_SEED")
            .stdout(Stdio::piped())
            .stderr(File::create(&err).expect("the fabric's stderr file"))
            .spawn()
            .expect("start verbs-emu-fabric");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("read the fabric's first line");
        assert!(
            line.ends_with("/fabric.sock\n"),
            "the fabric did not start: {line:?}; stderr: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        let topology = args
            .windows(2)
            .find(|w| w[0] == "--topology")
            .map(|w| PathBuf::from(w[1]));
        Fabric {
            child,
            socket: PathBuf::from(line.trim_end()),
            err,
            topology,
        }
    }

    /// A command running `program` as host `host` joined to this fabric (with its
    /// topology file, if it was started with one).
    pub fn program(&self, program: &Path, host: &str) -> Command {
        let mut c = super::emulated(program);
        c.env("VERBS_EMU_FABRIC", &self.socket)
            .env("VERBS_EMU_HOST", host);
        if let Some(t) = &self.topology {
            c.env("VERBS_EMU_TOPOLOGY", t);
        }
        c
    }

    /// Stops it (SIGTERM) and returns its summary line.
    pub fn stop(mut self) -> String {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill takes no pointers; the pid is our own child's, not yet reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = wait(&mut self.child, "verbs-emu-fabric");
        let err = std::fs::read_to_string(&self.err).expect("the fabric's stderr");
        assert!(status.success(), "the fabric failed ({status}): {err}");
        assert!(!self.socket.exists(), "the socket outlived the fabric");
        err.lines()
            .last()
            .and_then(|l| l.strip_prefix("verbs-emu-fabric: "))
            .unwrap_or_else(|| panic!("no summary from the fabric: {err}"))
            .to_owned()
    }
}

/// Waits for `child` to exit, at most [`DEADLINE`] (then kills it and fails).
pub fn wait(child: &mut Child, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait for a child") {
            return s;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish in {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What a program printed and how it ended.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its stdout.
    pub out: String,
    /// Its stderr.
    pub err: String,
}

/// A started program whose output goes to files.
pub struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    what: String,
}

/// Starts `c`, its output in `scratch/NAME.out` and `.err`.
pub fn start(mut c: Command, scratch: &Path, name: &str) -> Running {
    let out = scratch.join(format!("{name}.out"));
    let err = scratch.join(format!("{name}.err"));
    c.stdout(File::create(&out).expect("stdout file"))
        .stderr(File::create(&err).expect("stderr file"));
    Running {
        child: c
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}")),
        out,
        err,
        what: name.to_owned(),
    }
}

impl Running {
    /// Waits for it (at most [`DEADLINE`]) and reads what it printed.
    pub fn finish(mut self) -> Ran {
        let status = wait(&mut self.child, &self.what);
        Ran {
            status,
            out: std::fs::read_to_string(&self.out).expect("its stdout"),
            err: std::fs::read_to_string(&self.err).expect("its stderr"),
        }
    }

    /// Kills it (SIGKILL: it can say nothing to anyone).
    pub fn kill(&mut self) {
        self.child.kill().expect("kill a child");
    }

    /// Whether it has exited already.
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().expect("poll a child").is_some()
    }

    /// What it has printed on stderr so far.
    pub fn err_so_far(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }
}

/// Flushes `sender` on a thread of its own until nothing waits in it (what did not fit
/// its ring, or past its queue limit, while the fabric paused it); gives it back.
pub fn flush_in_background(
    mut sender: ibverbs::fabric::client::Sender,
) -> std::thread::JoinHandle<ibverbs::fabric::client::Sender> {
    std::thread::spawn(move || {
        while !sender.flush() {
            std::thread::sleep(Duration::from_micros(100));
        }
        sender
    })
}

/// The next frame the fabric sends to `link`, waiting for it (at most [`DEADLINE`]).
pub fn next_frame(link: &mut ibverbs::fabric::client::Receiver) -> Vec<u8> {
    use ibverbs::fabric::sys;
    let begin = Instant::now();
    let mut buf = Vec::new();
    loop {
        link.read_control();
        if link.pop(&mut buf).is_some() {
            return buf;
        }
        assert!(!link.is_gone(), "the fabric went away");
        assert!(begin.elapsed() < DEADLINE, "no frame came");
        if !link.about_to_sleep() {
            let mut p = [sys::pollin(std::os::fd::AsRawFd::as_raw_fd(&link.fd()))];
            sys::poll(&mut p, Some(Duration::from_secs(1))).expect("poll");
        }
    }
}

/// A TCP port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// True if some socket listens on TCP `port` (IPv4 or IPv6), from /proc/net.
pub fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}

/// The MAC address these tests give host `h<last>` when they join the fabric.
pub fn mac_of(last: u8) -> Mac {
    Mac([0x02, 0x00, 10, 100, 0, last])
}

/// The IPv4 address these tests give host `h<last>` when they join the fabric.
pub fn ip_of(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 100, 0, last)
}

/// A 64-byte frame from `src` to `dst` (a local experimental EtherType), filled with `fill`.
pub fn frame(dst: Mac, src: Mac, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; 64];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f
}

/// `udaddy` (librdmacm's UD example through the RDMA CM) ran well on both sides: each
/// prints exactly the lines of a good run (`librdmacm/examples/udaddy.c`) and exits 0.
pub fn assert_udaddy_ran(client: &Ran, server: &Ran) {
    assert!(client.status.success(), "{client:?}");
    assert_eq!(
        client.out,
        "udaddy: starting client\nudaddy: connecting\ninitiating data transfers\n\
         receiving data transfers\ndata transfers complete\ntest complete\n\
         return status 0\n"
    );
    assert_eq!(client.err, "");
    assert!(server.status.success(), "{server:?}");
    assert_eq!(
        server.out,
        "udaddy: starting server\nreceiving data transfers\nsending replies\n\
         data transfers complete\ntest complete\nreturn status 0\n"
    );
    assert_eq!(server.err, "");
}

/// The fabric's counts of frames from hosts, delivered, and lost to random loss, from
/// its summary line (`S frames from hosts, D delivered, lost: loss L; ...`).
pub fn summary_counts(summary: &str) -> (u64, u64, u64) {
    let words: Vec<&str> = summary.split_whitespace().collect();
    let num = |i: usize| -> u64 {
        words
            .get(i)
            .and_then(|w| w.trim_end_matches([',', ';']).parse().ok())
            .unwrap_or_else(|| panic!("no number at word {i} of {summary:?}"))
    };
    let loss = words
        .iter()
        .position(|w| *w == "loss")
        .map_or(0, |i| num(i + 1));
    (num(0), num(4), loss)
}
