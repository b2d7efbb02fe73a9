//! The interop step of `cargo xtask test --wire`: real Soft-RoCE (the kernel's `rdma_rxe`
//! in the VM of `cargo xtask vm`) against the emulated NIC, over the fabric's QEMU port.
//!
//! It builds the emulator (debug) and spead-tools (with `hw`), starts `verbs-emu-fabric`
//! with `emulator/topologies/vm-on-fabric.toml` (h1 with the rxe personality, h2 mlx5,
//! the VM as the remote host 10.100.0.20), a QEMU stream port and a capture, and runs each
//! case ([`cases`], [`spead`]) as one VM boot (`--fabric`) against a program run on the
//! host as an emulated host ([`runner`]: the emulated libibverbs first on
//! `LD_LIBRARY_PATH`, not through the launcher, so that the out-of-band TCP is on the
//! host's loopback, which the guest reaches as 10.0.2.2; the VM's servers are reached
//! through a port forwarded into it):
//!
//! - `ibv_rc_pingpong -g 1` (4 KiB), each side as the server in turn; the same with
//!   `-g 0`, RoCE v2 over IPv6 between the link-local GIDs;
//! - `ibv_ud_pingpong -g 1 -s 1000`, each side as the server;
//! - perftest `ib_send_bw`, `ib_write_bw` (RC, 64 KiB) and `ib_read_lat` (RDMA READ),
//!   each side as the server (perftest's own TCP exchange of the QPs' parameters);
//! - through the RDMA CM: `rping -v -C 10`, each side as the server (each side's ping
//!   data lines exactly), and `ib_read_lat -R` with the server on h1 (the parameters
//!   exchanged over the CM too; with the server in the VM its client races the server's
//!   second listen):
//!   the fabric translates between the emulated CM's messages and the kernel's CM MADs
//!   (emulator/src/fabric/ports/cm_bridge.rs; docs/divergences.md row 85);
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
//! Each case checks both exit codes and what each side prints ([`check`]: result lines,
//! the peer's GID; heaps). Each capture is then checked ([`capture`]): tshark decodes it
//! with no malformed frame (its RPC-over-RDMA heuristic off: it reads perftest's 4-byte
//! SENDs of `-R` as RPC messages); netwire verifies the ICRC of every RoCE frame, every one of
//! the VM's included, and the VM must have sent at least the frames the cases need, over
//! IPv4 and over IPv6; in the lossy run, data packets sent again (the same source MAC,
//! destination QP, PSN and opcode) are counted for each side, and each side must have
//! some.

mod addresses;
mod capture;
mod cases;
mod check;
mod runner;
mod spead;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use self::addresses::{mac_of, HOST, HOST_IP, TOPOLOGY, VM_IP};
use self::cases::{Case, Server};
use self::runner::HostRun;
use super::common::{cargo, root, Error};
use super::fabric::FabricProcess;
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
/// tshark and returns its RoCE frames and the fabric's summary.
fn run_cases(
    cases: &[Case],
    dir: &Path,
    topology: &Path,
    flags: &[&str],
    lib: &Path,
) -> Result<(Vec<capture::RoceFrame>, String), Error> {
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
    Ok((capture::roce_frames(&pcap)?, summary))
}

/// Checks the ICRC of every RoCE frame of `pcap` with netwire: none bad, and the VM's
/// MAC sent at least `v4` over IPv4 and `v6` over IPv6.
fn check_icrc(pcap: &Path, v4: usize, v6: usize) -> Result<(), Error> {
    let counts = capture::icrc_counts(pcap)?;
    let vm_mac = mac_of(VM_IP);
    for (mac, (n4, n6, bad)) in &counts {
        eprintln!(
            "xtask interop: ICRC (netwire): {mac}{}: {n4} RoCE v2 frames over IPv4, {n6} over IPv6, {bad} bad",
            if *mac == vm_mac { " (rxe in the VM)" } else { "" }
        );
    }
    if let Some((mac, c)) = counts.iter().find(|(_, c)| c.2 > 0) {
        return Err(format!(
            "{}: {} RoCE frames from {mac} fail netwire's ICRC check",
            pcap.display(),
            c.2
        ));
    }
    let (n4, n6, _) = counts.get(&vm_mac).copied().unwrap_or_default();
    if n4 < v4 || n6 < v6 {
        return Err(format!(
            "{}: the VM's MAC {vm_mac} sent {n4} RoCE frames over IPv4 and {n6} over IPv6 \
             (at least {v4} and {v6} expected)",
            pcap.display()
        ));
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// `cargo xtask test --wire`'s interop step (see the module docs).
///
/// # Errors
/// A failing build, case or capture check, named.
pub fn run() -> Result<(), Error> {
    let start = Instant::now();
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
    let mut cases = Vec::new();
    for server in [Server::Emulated, Server::Vm] {
        cases.extend([
            cases::pingpong("ibv_rc_pingpong", 1, server, 4096),
            cases::pingpong("ibv_rc_pingpong", 0, server, 4096),
            cases::pingpong("ibv_ud_pingpong", 1, server, 1000),
            cases::bandwidth("ib_send_bw", server),
            cases::bandwidth("ib_write_bw", server),
            cases::read_latency(server),
            cases::rping(server),
        ]);
    }
    // perftest -R with its server in the VM is not run: its client's data connection does
    // not wait for the server's second listen (REJECTED, invalid service id, when the VM
    // is slower), and perftest 4.5-0.17's retry then passes rdma_resolve_addr an id it
    // has destroyed (see docs/divergences.md row 85).
    cases.push(cases::read_latency_cm(Server::Emulated));
    // The RoCE frames the VM must have sent over IPv6 (the `-g 0` cases) and over IPv4.
    let v6: usize = cases
        .iter()
        .filter(|c| c.name.contains("-ll-"))
        .map(|c| c.vm_frames)
        .sum();
    let v4 = cases.iter().map(|c| c.vm_frames).sum::<usize>() - v6;
    cases.extend(spead::cases(&root().join("target/debug"), &plain)?);
    let topology = root().join(TOPOLOGY);
    let sock = plain.join("vm.sock");
    let sock_s = sock.to_string_lossy().into_owned();
    let (frames, _) = run_cases(&cases, &plain, &topology, &["--qemu-stream", &sock_s], &lib)?;
    let mac = mac_of(VM_IP);
    let from_vm = frames.iter().filter(|f| f.0 == mac).count();
    eprintln!(
        "xtask interop: capture {}: no malformed frame; {} RoCE frames, {from_vm} from the VM's MAC {mac}",
        plain.join("fabric.pcap").display(),
        frames.len()
    );
    check_icrc(&plain.join("fabric.pcap"), v4, v6)?;

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
    let mut rc = cases::pingpong("ibv_rc_pingpong", 1, Server::Emulated, 4096);
    rc.name = "rc-lossy-emulated-server".into();
    let mut rping = cases::rping(Server::Emulated);
    rping.name = "rping-lossy-emulated-server".into();
    let lossy_cases = [rc, rping];
    let (frames, summary) = run_cases(
        &lossy_cases,
        &lossy,
        &lossy_topology,
        &["--seed", "7"],
        &lib,
    )?;
    // h1's REP, dropped at the VM's port, went again (ibv_rc_pingpong sends no CM MAD).
    let resent = count_before(&summary, " resent");
    if !summary.contains(", 1 CM MADs dropped") || resent.is_none_or(|n| n == 0) {
        return Err(format!(
            "the lossy fabric should have dropped one CM MAD and sent it again: {summary}"
        ));
    }
    let h1_mac = mac_of(HOST_IP);
    let (vm_again, h1_again) = (
        capture::resent(&frames, &mac),
        capture::resent(&frames, &h1_mac),
    );
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
    let vm_frames = lossy_cases.iter().map(|c| c.vm_frames).sum();
    check_icrc(&lossy.join("fabric.pcap"), vm_frames, 0)?;
    eprintln!(
        "xtask interop: {} cases passed in {:.0} s",
        cases.len() + lossy_cases.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The number just before `what` in a fabric's summary (`1 resent`).
fn count_before(summary: &str, what: &str) -> Option<u64> {
    let before = &summary[..summary.find(what)?];
    before.rsplit(' ').next().and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::count_before;

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
