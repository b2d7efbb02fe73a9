//! `verbs-emu run`: joins (or starts) the fabric, enters the host's namespaces, lays out
//! its device files and runs the command as that host.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ibverbs::topology::{Topology, HOST_ENV, SEED_ENV, TOPOLOGY_ENV};

use crate::error::{setup, Error};
use crate::holder;
use crate::overlay::{self, Device};
use crate::paths::{self, Emulator};
use crate::proto::{self, Request, Response};
use crate::sys;

/// The environment variable naming the fabric's socket (the emulated library's).
const FABRIC_ENV: &str = "VERBS_EMU_FABRIC";

/// What `verbs-emu run` is given.
#[derive(Debug, Clone)]
pub struct Options {
    /// The host the command runs as.
    pub host: String,
    /// A topology file (for the fabric's first launcher; later ones must give the same or none).
    pub topology: Option<PathBuf>,
    /// The seed (likewise).
    pub seed: Option<u64>,
    /// A capture file (first launcher only).
    pub pcap: Option<PathBuf>,
    /// The fabric's name.
    pub fabric: String,
    /// The command and its arguments.
    pub command: Vec<OsString>,
}

fn absolute(option: &str, p: &Path) -> Result<PathBuf, Error> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    std::env::current_dir()
        .map(|d| d.join(p))
        .map_err(|e| Error::Usage(format!("{option} {}: {e}", p.display())))
}

/// Checks the files before anything starts: the topology parses and names the host, the
/// capture's folder exists.
fn check_files(o: &Options) -> Result<(Option<String>, Option<PathBuf>), Error> {
    let text = match &o.topology {
        None => None,
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .map_err(|e| Error::Usage(format!("--topology {}: {e}", p.display())))?;
            let topo = Topology::parse(&t)
                .map_err(|e| Error::Usage(format!("--topology {}: {e}", p.display())))?;
            if !topo.hosts.iter().any(|h| h.name == o.host) {
                let all: Vec<&str> = topo.hosts.iter().map(|h| h.name.as_str()).collect();
                return Err(Error::Usage(format!(
                    "--host {}: no such host in {} ({})",
                    o.host,
                    p.display(),
                    all.join(", ")
                )));
            }
            Some(t)
        }
    };
    let pcap = match &o.pcap {
        None => None,
        Some(p) => {
            let abs = absolute("--pcap", p)?;
            let dir = abs.parent().unwrap_or(Path::new("/"));
            if !dir.is_dir() {
                return Err(Error::Usage(format!(
                    "--pcap {}: {} is not a directory",
                    p.display(),
                    dir.display()
                )));
            }
            Some(abs)
        }
    };
    Ok((text, pcap))
}

/// The connection to the holder and its answer.
struct Joined {
    _conn: UnixStream,
    fabric: PathBuf,
    topology: Option<PathBuf>,
    seed: u64,
    userns: Option<OwnedFd>,
    netns: OwnedFd,
    interface: String,
}

/// Asks the holder on `dir`; `Ok(None)` when none answers.
fn ask(dir: &Path, req: &Request) -> Result<Option<Joined>, Error> {
    let Ok(conn) = UnixStream::connect(holder::control_path(dir)) else {
        return Ok(None);
    };
    if proto::send(&conn, req, &[]).is_err() {
        return Ok(None);
    }
    let (resp, mut fds) = match proto::recv::<Response>(&conn) {
        Ok(Some(r)) => r,
        _ => return Ok(None),
    };
    match resp {
        Response::Refused(why) => Err(Error::Usage(why)),
        Response::Stopping => {
            // The holder closes the connection when it has stopped its fabric and exits.
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(&mut &conn, &mut rest);
            Ok(None)
        }
        Response::Joined {
            fabric,
            topology,
            seed,
            userns,
            interface,
        } => {
            let want = if userns { 2 } else { 1 };
            if fds.len() != want {
                return Err(setup(format!(
                    "the fabric's holder sent {} descriptors, not {want}",
                    fds.len()
                )));
            }
            let netns = fds
                .pop()
                .ok_or_else(|| setup("no namespace from the holder"))?;
            Ok(Some(Joined {
                _conn: conn,
                fabric,
                topology,
                seed,
                userns: fds.pop(),
                netns,
                interface,
            }))
        }
    }
}

/// Starts the holder of the fabric in `dir` (the caller has the fabric's lock) and waits
/// until it is ready.
fn start_holder(
    dir: &Path,
    emu: &Emulator,
    topology: Option<&str>,
    seed: u64,
    pcap: Option<&Path>,
) -> Result<(), Error> {
    let topo_file = dir.join(holder::TOPOLOGY);
    let _ = std::fs::remove_file(&topo_file);
    let me = std::env::current_exe().map_err(|e| setup(format!("cannot find verbs-emu: {e}")))?;
    let log_path = dir.join("fabric.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| setup(format!("cannot write {}: {e}", log_path.display())))?;
    let mut c = Command::new(me);
    c.arg("holder")
        .arg("--state")
        .arg(dir)
        .arg("--fabric-bin")
        .arg(&emu.fabric)
        .args(["--seed", &seed.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    if let Some(t) = topology {
        std::fs::write(&topo_file, t)
            .map_err(|e| setup(format!("cannot write {}: {e}", topo_file.display())))?;
        c.arg("--topology").arg(&topo_file);
    }
    if let Some(p) = pcap {
        c.arg("--pcap").arg(p);
    }
    let mut child = c
        .spawn()
        .map_err(|e| setup(format!("cannot start the fabric's holder: {e}")))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    match line.trim_end() {
        "ready" => Ok(()),
        "" => {
            let status = child
                .wait()
                .map_or_else(|e| e.to_string(), |s| s.to_string());
            Err(setup(format!(
                "the fabric's holder ended ({status}); see {}",
                log_path.display()
            )))
        }
        why => {
            let _ = child.wait();
            Err(setup(why.to_owned()))
        }
    }
}

/// Joins fabric `o.fabric` as host `o.host` (starting it if it does not run).
fn join(o: &Options, emu: &Emulator) -> Result<(Joined, PathBuf), Error> {
    let (topology, pcap) = check_files(o)?;
    let dir = paths::state_dir(&o.fabric)?;
    let lock_path = dir.join(holder::LOCK);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| setup(format!("{}: {e}", lock_path.display())))?;
    sys::lock_exclusive(lock.as_fd(), true)
        .map_err(|e| setup(format!("cannot lock {}: {e}", lock_path.display())))?;
    let lib = emu.link_libraries(&dir)?;
    let req = Request {
        host: o.host.clone(),
        topology: topology.clone(),
        seed: o.seed,
        pcap: pcap.clone(),
    };
    let joined = match ask(&dir, &req)? {
        Some(j) => j,
        None => {
            start_holder(
                &dir,
                emu,
                topology.as_deref(),
                o.seed.unwrap_or(holder::DEFAULT_SEED),
                pcap.as_deref(),
            )?;
            ask(&dir, &req)?.ok_or_else(|| {
                setup(format!(
                    "the fabric's holder does not answer on {}",
                    holder::control_path(&dir).display()
                ))
            })?
        }
    };
    drop(lock);
    Ok((joined, lib))
}

/// Runs the command as host `o.host`; returns its exit status (128 + the signal's number
/// when a signal ended it; 127 when it cannot be found, 126 when it cannot be run).
pub fn run(o: &Options) -> Result<u8, Error> {
    let Some((program, args)) = o.command.split_first() else {
        return Err(Error::Usage(
            "run: no command given (usage: verbs-emu run [OPTIONS] -- CMD [ARGS...])".into(),
        ));
    };
    let emu = Emulator::beside_me()?;
    let (j, lib) = join(o, &emu)?;

    // The host's device as the fabric's topology describes it.
    let topology = match &j.topology {
        Some(p) => Topology::parse(
            &std::fs::read_to_string(p).map_err(|e| setup(format!("{}: {e}", p.display())))?,
        )
        .map_err(setup)?,
        None => Topology::default(),
    };
    let spec = topology
        .hosts
        .iter()
        .find(|h| h.name == o.host)
        .ok_or_else(|| setup(format!("--host {}: not in the fabric's topology", o.host)))?;
    let devices = [Device::first(
        &spec.name,
        spec.ip,
        spec.personality,
        &j.interface,
    )];

    let (uid, gid) = sys::ids();
    if let Some(u) = &j.userns {
        sys::setns(u.as_fd(), libc::CLONE_NEWUSER)
            .map_err(|e| setup(format!("cannot join the fabric's user namespace: {e}")))?;
    }
    sys::setns(j.netns.as_fd(), libc::CLONE_NEWNET).map_err(|e| {
        setup(format!(
            "cannot join the network namespace of {}: {e}",
            o.host
        ))
    })?;
    overlay::prepare(&devices).map_err(setup)?;
    if j.userns.is_some() {
        // In the fabric's user namespace this process is uid 0 (your uid outside). The
        // command runs as you: a user namespace inside it maps your uid to that uid 0.
        sys::unshare(libc::CLONE_NEWUSER)
            .map_err(|e| setup(format!("cannot make the command's user namespace: {e}")))?;
        sys::map_to(uid, gid, 0, 0)
            .map_err(|e| setup(format!("cannot map uid {uid} for the command: {e}")))?;
    }

    let mut path = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let signals = sys::signals().map_err(|e| setup(format!("cannot catch signals: {e}")))?;
    let mut c = Command::new(program);
    c.args(args)
        .env("LD_LIBRARY_PATH", path)
        .env(FABRIC_ENV, &j.fabric)
        .env(HOST_ENV, &o.host)
        .env(SEED_ENV, j.seed.to_string());
    match &j.topology {
        Some(t) => c.env(TOPOLOGY_ENV, t),
        None => c.env_remove(TOPOLOGY_ENV),
    };
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // pthread_sigmask and prctl, which are async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            sys::unblock_all()?;
            sys::die_with_parent(libc::SIGTERM)
        });
    }
    let name = program.to_string_lossy();
    let mut child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("verbs-emu: {name}: command not found");
            return Ok(127);
        }
        Err(e) => {
            eprintln!("verbs-emu: {name}: {e}");
            return Ok(126);
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(setup(format!("waiting for {name}: {e}"))),
        }
        let (sig, from_terminal) = sys::read_signal(signals.as_fd())
            .map_err(|e| setup(format!("reading signals: {e}")))?;
        // Ctrl-C and Ctrl-\ reach the command from the terminal already.
        let terminal = from_terminal && (sig == libc::SIGINT || sig == libc::SIGQUIT);
        if sig != libc::SIGCHLD && !terminal {
            let _ = sys::kill(child.id(), sig);
        }
    };
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(s)) => u8::try_from(128 + s).unwrap_or(255),
        _ => 1,
    })
}
