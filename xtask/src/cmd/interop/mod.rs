//! The interop step of `cargo xtask test --wire`: real Soft-RoCE (the kernel's `rdma_rxe`
//! in the VM of `cargo xtask vm`) against the emulated NIC, over the fabric's QEMU port.
//!
//! It builds the emulator (debug) and spead-tools (with `hw`), starts `verbs-emu-fabric`
//! with `emulator/topologies/vm-on-fabric.toml` (h1 with the rxe personality, h2 mlx5,
//! the VM as the remote host 10.100.0.20), a QEMU stream port and a capture, and runs each
//! case ([`cases`], [`cm_cases`], [`spead`]) as one VM boot (`--fabric`) against a program run on the
//! host as an emulated host ([`runner`]: the emulated libibverbs first on
//! `LD_LIBRARY_PATH`, not through the launcher, so that the out-of-band TCP is on the
//! host's loopback, which the guest reaches as 10.0.2.2; the VM's servers are reached
//! through a port forwarded into it):
//!
//! - each side as the server in turn, each on the IPv4 GID (`-g 1`, `-x 1`) and on the
//!   link-local GID (`-g 0`, `-x 0`: RoCE v2 over IPv6 between the link-local addresses;
//!   the cases' names have `-ll`): `ibv_rc_pingpong` (4 KiB), `ibv_ud_pingpong -s 1000`,
//!   perftest `ib_send_bw`, `ib_write_bw` (RC, 64 KiB) and `ib_read_lat` (RDMA READ;
//!   perftest's own TCP exchange of the QPs' parameters) ([`cases`]);
//! - through the RDMA CM ([`cm_cases`]): `rping -v -C 10`, each side as the server (each
//!   side's ping data lines exactly), to the server's IPv4 address and to its link-local
//!   address with the scope of the side's interface (`fe80::aff:fe64:1%1` on h1,
//!   `%` and rxe0's netdev in the VM); and `ib_read_lat -R` with the server on h1 (the
//!   parameters exchanged over the CM too; with the server in the VM its client races the
//!   server's second listen); and librdmacm-utils' `udaddy -C 4`, each side as the
//!   server, to its IPv4 and to its link-local address (UD through the RDMA CM: SIDR REQ
//!   and SIDR REP; each side's lines exactly), and `ib_send_lat -c UD -R` with the server on h1 (the UD QPs found by
//!   SIDR): the fabric translates between the emulated CM's messages and the kernel's CM MADs,
//!   over IPv6 for the link-local addresses (emulator/src/fabric/ports/cm_bridge.rs;
//!   cm_sidr.rs; docs/divergences.md rows 85, 103);
//! - SPEAD multicast between h2's RAW_PACKET QPs and the VM's kernel UDP sockets, each
//!   way, with our tools and with spead2 ([`spead`]; h2's programs in a network
//!   namespace whose interface holds 10.100.0.2, as spead2 looks for it; the VM with
//!   `-cpu max` for spead2's numpy);
//! - `ibv_rc_pingpong` and `rping` (server on h1) again on a second fabric whose topology
//!   loses 2% of the frames the switch sends to the VM and to h1, so that both stacks
//!   retransmit, and whose VM port also drops the first CM MAD it would send (h1's REP):
//!   the fabric sends it again on the kernel CM's timeout
//!   (emulator/src/fabric/ports/cm_resend.rs), which its summary must show.
//!
//! `cargo xtask test --wire --interop --case NAME` (repeatable) runs only the cases named
//! (their captures checked for what those cases send).
//!
//! Each case checks both exit codes and what each side prints ([`check`]: result lines,
//! the peer's GID; heaps). Each capture is then checked ([`capture`]): tshark decodes it
//! with no malformed frame (its RPC-over-RDMA heuristic off: it reads perftest's 4-byte
//! SENDs of `-R` as RPC messages); netwire verifies the ICRC of every RoCE frame, every one of
//! the VM's included, and the VM must have sent at least the frames the cases need, over
//! IPv4 and over IPv6, and of those over IPv6 the UD datagrams of the UD pingpongs and the
//! CM MADs of rping; in the lossy run, data packets sent again (the same source MAC,
//! destination QP, PSN and opcode; `crate::cmd::roce_capture`) are counted for each side,
//! and each side must have some.

mod addresses;
mod capture;
mod cases;
mod check;
mod cm_cases;
mod runner;
mod spead;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use self::addresses::{mac_of, HOST, HOST_IP, TOPOLOGY, VM_IP};
use self::cases::{Case, Gid, Server};
use self::runner::HostRun;
use super::common::{cargo, root, Error};
use super::fabric::FabricProcess;
use super::roce_capture::{resent, roce_frames, RoceFrame};
use crate::vm;

/// perftest, for its programs on the host (the VM's come from the same file system).
const PERFTEST: &[vm::packages::Package] = &[vm::packages::Package {
    name: "perftest",
    why: "ib_send_bw, ib_write_bw and ib_read_lat between the emulated h1 and rxe in the VM",
}];

/// The lossy run's topology: [`TOPOLOGY`]'s hosts with 2% loss on the frames the switch
/// sends to h1 and out of the VM's port (`@SOCK@` is the port's path).
pub(crate) const LOSSY_TOPOLOGY: &str = r#"[[host]]
name = "h1"
ip = "10.100.0.1"
personality = "rxe"
faults = { loss = 0.02 }

[[host]]
name = "h2"
ip = "10.100.0.2"
personality = "mlx5"

[[host]]
name = "vm"
ip = "10.100.0.20"
remote = true

[[port]]
kind = "qemu-stream"
path = "@SOCK@"
faults = { loss = 0.02 }
"#;

/// Starts the fabric with `topology` and `args`, its stderr (the summary) into `dir`.
fn start_fabric(
    topology: &Path,
    args: &[&str],
    dir: &Path,
) -> Result<(FabricProcess, PathBuf), Error> {
    let bin = root().join("target/debug/verbs-emu-fabric");
    let stderr = dir.join("fabric.err");
    let err = std::fs::File::create(&stderr)
        .map_err(|e| format!("cannot create {}: {e}", stderr.display()))?;
    let mut c = Command::new(&bin);
    c.arg("--topology")
        .arg(topology)
        .args(args)
        .stderr(Stdio::from(err));
    let fabric = FabricProcess::start(c).map_err(|e| {
        format!(
            "{e}: {}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        )
    })?;
    eprintln!(
        "xtask interop: fabric {} at {}",
        bin.display(),
        fabric.socket
    );
    Ok((fabric, stderr))
}

/// Stops the fabric and returns its summary (its stderr).
fn stop_fabric(fabric: FabricProcess, stderr: &Path) -> Result<String, Error> {
    let status = fabric.stop()?;
    let summary = std::fs::read_to_string(stderr).unwrap_or_default();
    eprint!("{summary}");
    if status.success() {
        Ok(summary)
    } else {
        Err(format!("the fabric failed ({status}): {summary}"))
    }
}

/// Runs `cases` on one fabric (its capture `dir/fabric.pcap`); checks the capture with
/// tshark and returns its RoCE frames.
fn run_cases(
    cases: &[Case],
    dir: &Path,
    topology: &Path,
    flags: &[&str],
    lib: &Path,
) -> Result<(Vec<RoceFrame>, String), Error> {
    let pcap = dir.join("fabric.pcap");
    let sock = dir.join("vm.sock");
    let _ = std::fs::remove_file(&sock);
    let mut args: Vec<&str> = flags.to_vec();
    let pcap_s = pcap.to_string_lossy().into_owned();
    args.extend(["--pcap", &pcap_s]);
    let (fabric, fabric_err) = start_fabric(topology, &args, dir)?;
    let base = HostRun {
        lib: lib.to_path_buf(),
        socket: fabric.socket.clone(),
        topology: topology.to_path_buf(),
        host: HOST,
        netns_ip: None,
    };
    let mut result = Ok(());
    for case in cases {
        let t = Instant::now();
        let r = runner::run_case(case, &base, &sock, dir).and_then(|ran| {
            check::check(case, &ran.host, &ran.vm)?;
            eprintln!(
                "xtask interop: {} passed in {:.1} s (VM boot+setup {:.1} s, total {:.1} s)\n  host: {}\n  VM:   {}",
                case.name,
                t.elapsed().as_secs_f64(),
                ran.boot,
                ran.total,
                check::summary(case, &ran.host),
                check::summary(case, &ran.vm)
            );
            Ok(())
        });
        if let Err(e) = r {
            result = Err(e);
            break;
        }
    }
    let summary = stop_fabric(fabric, &fabric_err);
    result?;
    let summary = summary?;
    if !summary.contains(&format!("port qemu-stream {}: ", sock.display())) {
        return Err(format!(
            "the fabric's summary names no QEMU port: {summary}"
        ));
    }
    capture::no_malformed(&pcap)?;
    Ok((roce_frames(&pcap)?, summary))
}

/// Checks the ICRC of every RoCE frame of `pcap` with netwire: none bad, and the VM's
/// MAC sent at least what `want` counts (its `bad` unused).
fn check_icrc(pcap: &Path, want: capture::Sent) -> Result<(), Error> {
    let counts = capture::icrc_counts(pcap)?;
    let vm_mac = mac_of(VM_IP);
    for (mac, c) in &counts {
        eprintln!(
            "xtask interop: ICRC (netwire): {mac}{}: {} RoCE v2 frames over IPv4, {} over IPv6 ({} UD datagrams, {} CM MADs), {} bad",
            if *mac == vm_mac { " (rxe in the VM)" } else { "" },
            c.v4,
            c.v6,
            c.v6_ud,
            c.v6_mads,
            c.bad
        );
    }
    if let Some((mac, c)) = counts.iter().find(|(_, c)| c.bad > 0) {
        return Err(format!(
            "{}: {} RoCE frames from {mac} fail netwire's ICRC check",
            pcap.display(),
            c.bad
        ));
    }
    let got = counts.get(&vm_mac).copied().unwrap_or_default();
    if got.v4 < want.v4 || got.v6 < want.v6 || got.v6_ud < want.v6_ud || got.v6_mads < want.v6_mads
    {
        return Err(format!(
            "{}: the VM's MAC {vm_mac} sent {got:?}, at least {want:?} expected",
            pcap.display()
        ));
    }
    Ok(())
}

/// What the VM must have sent in `cases` at least: their RoCE frames over IPv4 and over
/// IPv6 (the link-local cases'), of those over IPv6 the UD datagrams of the UD pingpongs
/// and the CM MADs of rping (two each at least: its REQ and RTU as client, its REP and
/// DREQ or DREP as server).
fn vm_sends(cases: &[Case]) -> capture::Sent {
    let ll = || cases.iter().filter(|c| cases::over_ipv6(&c.name));
    let v6: usize = ll().map(|c| c.vm_frames).sum();
    capture::Sent {
        v4: cases.iter().map(|c| c.vm_frames).sum::<usize>() - v6,
        v6,
        v6_ud: ll()
            .filter(|c| c.name.starts_with("ud-"))
            .map(|c| c.vm_frames)
            .sum(),
        v6_mads: 2 * ll().filter(|c| c.name.starts_with("rping-")).count(),
        bad: 0,
    }
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// `cargo xtask test --wire`'s interop step (see the module docs); with names in `only`
/// (`--case`), those cases alone.
///
/// # Errors
/// A failing build, case or capture check, named; a name of no case.
pub fn run(only: &[String]) -> Result<(), Error> {
    let start = Instant::now();
    for name in only {
        case_name(name)?;
    }
    // The emulator's packages, tshark and perftest; the VM's own (QEMU, rdma-core) are
    // its business (`vm::prepare`), and its NICs need no boot ROM.
    vm::packages::ensure_installed(&[
        vm::packages::EMU_PACKAGES,
        vm::packages::TOOL_PACKAGES,
        PERFTEST,
    ])?;
    let mut build = cargo();
    build.args(["build", "-p", "emulator"]);
    super::common::run(build, "building the emulator (debug)")?;
    let mut build = cargo();
    build.args(["build", "-p", "spead-tools", "--features", "hw", "--bins"]);
    super::common::run(build, "building spead-send and spead-recv (hw)")?;
    let lib = super::common::link_emulated_libraries(
        &root().join("target/debug/libibverbs.so"),
        &root().join("target/emu/interop-lib"),
    )?;
    let dir = root().join("target/interop");
    let _ = std::fs::remove_dir_all(&dir);

    let plain = dir.join("plain");
    create_dir(&plain)?;
    let mut cases = plain_cases();
    cases.extend(spead::cases(&root().join("target/debug"), &plain)?);
    let mut lossy = lossy_cases();
    let chosen = |name: &str| only.is_empty() || only.iter().any(|n| n == name);
    cases.retain(|c| chosen(&c.name));
    lossy.retain(|c| chosen(&c.name));
    let mut ran = 0;
    if !cases.is_empty() {
        run_plain(&cases, &plain, &lib)?;
        ran += cases.len();
    }
    if !lossy.is_empty() {
        run_lossy(&lossy, &dir, &lib)?;
        ran += lossy.len();
    }
    eprintln!(
        "xtask interop: {ran} cases passed in {:.0} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The verbs cases of the plain run, each side as the server: over the IPv4 GID and over
/// the link-local GID.
fn plain_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for server in [Server::Emulated, Server::Vm] {
        for gid in [Gid::Ipv4, Gid::LinkLocal] {
            cases.extend([
                cases::pingpong("ibv_rc_pingpong", gid, server, 4096),
                cases::pingpong("ibv_ud_pingpong", gid, server, 1000),
                cases::bandwidth("ib_send_bw", gid, server),
                cases::bandwidth("ib_write_bw", gid, server),
                cases::read_latency(gid, server),
                cm_cases::rping(gid, server),
                cm_cases::udaddy(gid, server),
            ]);
        }
    }
    // perftest -R with its server in the VM is not run: its client's data connection does
    // not wait for the server's second listen (REJECTED, invalid service id, when the VM
    // is slower), and perftest 4.5-0.17's retry then passes rdma_resolve_addr an id it
    // has destroyed (see docs/divergences.md row 85).
    cases.push(cm_cases::read_latency_cm(Server::Emulated));
    cases.push(cm_cases::send_latency_ud_cm());
    cases
}

/// The names of every case, in the order they run.
pub fn case_names() -> Vec<String> {
    plain_cases()
        .into_iter()
        .map(|c| c.name)
        .chain(spead::NAMES.map(String::from))
        .chain(lossy_cases().into_iter().map(|c| c.name))
        .collect()
}

/// `name` if it is a case's (`--case`).
///
/// # Errors
/// No case has that name: the error lists them.
pub fn case_name(name: &str) -> Result<String, Error> {
    let all = case_names();
    if all.iter().any(|n| n == name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "no interop case `{name}`; the cases: {}",
            all.join(", ")
        ))
    }
}

/// The lossy run's cases: the RC pingpong and rping, each with h1 as the server.
fn lossy_cases() -> Vec<Case> {
    let mut rc = cases::pingpong("ibv_rc_pingpong", Gid::Ipv4, Server::Emulated, 4096);
    rc.name = "rc-lossy-emulated-server".into();
    let mut rping = cm_cases::rping(Gid::Ipv4, Server::Emulated);
    rping.name = "rping-lossy-emulated-server".into();
    vec![rc, rping]
}

/// The plain run: `cases` on the topology's fabric with a QEMU port, then the capture's
/// checks (the VM sent at least what [`vm_sends`] counts).
fn run_plain(cases: &[Case], plain: &Path, lib: &Path) -> Result<(), Error> {
    let topology = root().join(TOPOLOGY);
    let sock = plain.join("vm.sock");
    let sock_s = sock.to_string_lossy().into_owned();
    let (frames, _) = run_cases(cases, plain, &topology, &["--qemu-stream", &sock_s], lib)?;
    let mac = mac_of(VM_IP);
    let from_vm = frames.iter().filter(|f| f.src == mac).count();
    eprintln!(
        "xtask interop: capture {}: no malformed frame; {} RoCE frames, {from_vm} from the VM's MAC {mac}",
        plain.join("fabric.pcap").display(),
        frames.len()
    );
    check_icrc(&plain.join("fabric.pcap"), vm_sends(cases))
}

/// The lossy run: `cases` on a fabric that loses 2% of the frames to the VM and to h1,
/// its VM port also dropping the first CM MAD it would send; both stacks must have sent
/// data packets again, and the fabric the dropped MAD (when rping ran: the pingpong sends
/// no CM MAD).
fn run_lossy(cases: &[Case], dir: &Path, lib: &Path) -> Result<(), Error> {
    let mac = mac_of(VM_IP);
    let lossy = dir.join("lossy");
    create_dir(&lossy)?;
    let lossy_sock = lossy.join("vm.sock");
    let lossy_topology = lossy.join("topology.toml");
    // The port's table is the last: the line goes into it.
    std::fs::write(
        &lossy_topology,
        format!(
            "{}drop_cm_mads = 1\n",
            LOSSY_TOPOLOGY.replace("@SOCK@", &lossy_sock.to_string_lossy())
        ),
    )
    .map_err(|e| format!("cannot write {}: {e}", lossy_topology.display()))?;
    let (frames, summary) = run_cases(cases, &lossy, &lossy_topology, &["--seed", "7"], lib)?;
    if cases.iter().any(|c| c.name.starts_with("rping-")) {
        // h1's REP, dropped at the VM's port, went again.
        let resent = count_before(&summary, " resent");
        if !summary.contains(", 1 CM MADs dropped") || resent.is_none_or(|n| n == 0) {
            return Err(format!(
                "the lossy fabric should have dropped one CM MAD and sent it again: {summary}"
            ));
        }
    }
    let h1_mac = mac_of(HOST_IP);
    let (vm_again, h1_again) = (resent(&frames, &mac), resent(&frames, &h1_mac));
    eprintln!(
        "xtask interop: lossy capture: {} RoCE frames; data packets sent again: {vm_again} by rxe in the VM, {h1_again} by the emulated h1",
        frames.len()
    );
    if vm_again == 0 || h1_again == 0 {
        return Err(format!(
            "with 2% loss both stacks should have retransmitted: the VM {vm_again}, h1 {h1_again}"
        ));
    }
    // A lost frame is lost whole: every captured one must verify, the VM's at least.
    check_icrc(
        &lossy.join("fabric.pcap"),
        capture::Sent {
            v4: cases.iter().map(|c| c.vm_frames).sum(),
            ..capture::Sent::default()
        },
    )
}

/// The number just before `what` in a fabric's summary (`1 resent`).
fn count_before(summary: &str, what: &str) -> Option<u64> {
    let before = &summary[..summary.find(what)?];
    before.rsplit(' ').next().and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vm_must_send_what_the_link_local_cases_need() {
        let cases = [
            cases::pingpong("ibv_ud_pingpong", Gid::LinkLocal, Server::Vm, 1000),
            cases::pingpong("ibv_rc_pingpong", Gid::Ipv4, Server::Vm, 4096),
            cm_cases::rping(Gid::LinkLocal, Server::Emulated),
            cm_cases::rping(Gid::Ipv4, Server::Emulated),
        ];
        assert_eq!(
            vm_sends(&cases),
            capture::Sent {
                v4: 400 + 20,
                v6: 100 + 20,
                v6_ud: 100,
                v6_mads: 2,
                bad: 0
            }
        );
        let all = plain_cases();
        assert_eq!(all.len(), 30);
        let names = case_names();
        assert_eq!(names.len(), 36);
        assert_eq!(names[34], "rc-lossy-emulated-server");
        assert_eq!(names[35], "rping-lossy-emulated-server");
        for n in [
            "udaddy-emulated-server",
            "udaddy-vm-server",
            "udaddy-ll-emulated-server",
            "udaddy-ll-vm-server",
            "send-lat-ud-cm-emulated-server",
        ] {
            assert_eq!(case_name(n), Ok(n.into()));
        }
        assert_eq!(case_name("ud-ll-vm-server"), Ok("ud-ll-vm-server".into()));
        let e = case_name("ud-ll").unwrap_err();
        assert!(
            e.starts_with("no interop case `ud-ll`; the cases: rc-emulated-server, "),
            "{e}"
        );
        assert_eq!(all.iter().filter(|c| cases::over_ipv6(&c.name)).count(), 14);
    }

    #[test]
    fn a_count_is_read_before_its_words_and_missing_words_give_none() {
        let s = "port qemu-stream /x: 9 frames in, 8 out, 0 malformed, 0 unsent, 1 CM MADs \
                 dropped; CM MADs: 2 sent, 3 taken in, 1 resent, 0 duplicates; CM \
                 connections live: 1\n";
        assert_eq!(count_before(s, " CM MADs dropped"), Some(1));
        assert_eq!(count_before(s, " resent"), Some(1));
        assert_eq!(count_before(s, " taken in"), Some(3));
        assert_eq!(count_before(s, " timed out"), None);
    }
}
