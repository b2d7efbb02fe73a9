//! `verbs-emu-fabric`: the fabric process that emulated processes join (see the
//! emulator's `fabric` module). It prints its socket's path on the first line of stdout
//! once it listens (what `VERBS_EMU_FABRIC` must name), serves until SIGTERM, SIGINT or
//! SIGHUP (or, with `--stop-on-eof`, until its stdin closes or gets input: a parent that
//! holds the other end of a pipe stops it by closing it, and by dying), then prints a
//! summary of the run on stderr and removes its socket.
//!
//! ```text
//! verbs-emu-fabric [--topology FILE] [--seed N] [--pcap OUT] [--dir DIR]
//!                  [--vxlan LOCAL,REMOTE,VNI]... [--qemu-stream PATH]...
//!                  [--die-with-parent] [--stop-on-eof] [--no-direct]
//! ```
//!
//! Two processes whose hosts' links have no faults send each other their unicast frames
//! through shared rings of their own when nothing is captured (the fabric keeping
//! control, see the emulator's `fabric::direct`); `--no-direct` makes every frame cross
//! the fabric process.
//!
//! `--vxlan` and `--qemu-stream` add ports to real networks after the topology's own
//! `[[port]]` tables (see the emulator's `fabric::ports`): a VXLAN tunnel binding LOCAL
//! (`IP:PORT`) to REMOTE with network identifier VNI, and a Unix socket at PATH for a
//! QEMU `-netdev stream` NIC.

use std::io::Write;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;

use ibverbs::fabric::server::{Config, Server};
use ibverbs::fabric::sys;
use ibverbs::topology::{parse_vxlan_flag, PortKind, PortSpec, Topology, SEED_ENV, TOPOLOGY_ENV};

const USAGE: &str = "usage: verbs-emu-fabric [--topology FILE] [--seed N] [--pcap OUT] \
                     [--dir DIR] [--vxlan LOCAL,REMOTE,VNI]... [--qemu-stream PATH]... \
                     [--die-with-parent] [--stop-on-eof] [--no-direct]";

#[derive(Debug, Default)]
struct Args {
    topology: Option<PathBuf>,
    seed: Option<u64>,
    pcap: Option<PathBuf>,
    dir: Option<PathBuf>,
    die_with_parent: bool,
    stop_on_eof: bool,
    no_direct: bool,
    /// Ports given by flags, in order.
    ports: Vec<PortSpec>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--topology" => a.topology = Some(value("--topology")?.into()),
            "--seed" => {
                let v = value("--seed")?;
                a.seed = Some(
                    v.parse()
                        .map_err(|_| format!("--seed {v}: expected a decimal number"))?,
                );
            }
            "--pcap" => a.pcap = Some(value("--pcap")?.into()),
            "--dir" => a.dir = Some(value("--dir")?.into()),
            "--vxlan" => a.ports.push(parse_vxlan_flag(&value("--vxlan")?)?),
            "--qemu-stream" => {
                let path = value("--qemu-stream")?;
                if path.is_empty() {
                    return Err("--qemu-stream needs a path".into());
                }
                a.ports.push(PortSpec {
                    kind: PortKind::QemuStream { path: path.into() },
                    faults: backend_sim::LinkFaults::default(),
                    drop_cm_mads: 0,
                });
            }
            "--die-with-parent" => a.die_with_parent = true,
            "--stop-on-eof" => a.stop_on_eof = true,
            "--no-direct" => a.no_direct = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

/// The topology of `--topology`, else of `VERBS_EMU_TOPOLOGY`, else the default.
fn topology(path: Option<&PathBuf>) -> Result<Topology, String> {
    match path {
        None => Topology::from_env(),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("--topology {}: {e}", p.display()))?;
            Topology::parse(&text).map_err(|e| format!("--topology {}: {e}", p.display()))
        }
    }
}

fn serve(a: &Args) -> Result<(), String> {
    // Before anything else: the signals that stop the fabric arrive on a descriptor.
    let stop = sys::stop_signals().map_err(|e| format!("cannot catch stop signals: {e}"))?;
    if a.die_with_parent {
        // SAFETY: PR_SET_PDEATHSIG takes a signal number and no pointers.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) } != 0 {
            return Err(format!(
                "cannot ask to stop with the parent: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    let mut topology = topology(a.topology.as_ref())?;
    topology.ports.extend(a.ports.iter().cloned());
    topology.check_ports()?;
    let seed = match a.seed {
        Some(s) => s,
        None => ibverbs::topology::seed_from_env()?,
    };
    let config = Config {
        topology,
        seed,
        pcap: a.pcap.clone(),
        dir: a.dir.clone(),
        direct: !a.no_direct,
    };
    let mut server = Server::bind(&config)?;
    let hosts = &config.topology.hosts;
    let names: Vec<&str> = hosts
        .iter()
        .filter(|h| !h.remote)
        .map(|h| h.name.as_str())
        .collect();
    let remote: Vec<&str> = hosts
        .iter()
        .filter(|h| h.remote)
        .map(|h| h.name.as_str())
        .collect();
    let beyond = if remote.is_empty() {
        String::new()
    } else {
        format!(" (beyond its ports: {})", remote.join(", "))
    };
    eprintln!(
        "verbs-emu-fabric: hosts {}{beyond} at {} (seed {seed}{})",
        names.join(", "),
        server.socket_path().display(),
        a.pcap
            .as_ref()
            .map_or(String::new(), |p| format!(", capturing to {}", p.display()))
    );
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", server.socket_path().display())
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot print the socket's path: {e}"))?;
    drop(out);
    let stdin = std::io::stdin();
    let mut stops = vec![stop.as_fd()];
    if a.stop_on_eof {
        stops.push(stdin.as_fd());
    }
    let result = server.run(&stops);
    eprintln!("verbs-emu-fabric: {}", server.summary());
    result.map_err(|e| format!("stopped: {e}"))
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}\nenvironment: {TOPOLOGY_ENV} (a topology file), {SEED_ENV}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("verbs-emu-fabric: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match serve(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("verbs-emu-fabric: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn arguments_parse_and_bad_ones_are_named() {
        let a = p(&["--seed", "7", "--pcap", "x.pcap", "--die-with-parent"]).unwrap();
        assert!(!a.stop_on_eof);
        assert!(p(&["--stop-on-eof"]).unwrap().stop_on_eof);
        assert_eq!(a.seed, Some(7));
        assert_eq!(a.pcap, Some(PathBuf::from("x.pcap")));
        assert!(a.die_with_parent && a.topology.is_none() && a.dir.is_none());
        assert_eq!(p(&["--seed"]).unwrap_err(), "--seed needs a value");
        assert_eq!(
            p(&["--seed", "x"]).unwrap_err(),
            "--seed x: expected a decimal number"
        );
        assert_eq!(p(&["--bogus"]).unwrap_err(), "unknown argument \"--bogus\"");
        assert_eq!(p(&["--help"]).unwrap_err(), "");
        let v = p(&[
            "--vxlan",
            "127.0.0.1:4789,127.0.0.1:4790,42",
            "--qemu-stream",
            "/x",
        ])
        .unwrap();
        assert_eq!(v.ports.len(), 2);
        assert_eq!(
            v.ports[0].kind,
            PortKind::Vxlan {
                local: "127.0.0.1:4789".parse().unwrap(),
                remote: "127.0.0.1:4790".parse().unwrap(),
                vni: 42
            }
        );
        assert_eq!(
            p(&["--vxlan", "1.2.3.4:5,1.2.3.4:6,99999999"]).unwrap_err(),
            "--vxlan 1.2.3.4:5,1.2.3.4:6,99999999: vni = 99999999 is not a 24-bit VNI (0..=16777215)"
        );
        assert_eq!(
            p(&["--qemu-stream", ""]).unwrap_err(),
            "--qemu-stream needs a path"
        );
    }
}
