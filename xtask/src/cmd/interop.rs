//! The interop step of `cargo xtask test --wire`: real Soft-RoCE (the kernel's `rdma_rxe`
//! in the VM of `cargo xtask vm`) against the emulated NIC, over the fabric's QEMU port.
//!
//! It builds the emulator (debug), starts `verbs-emu-fabric` with
//! `emulator/topologies/vm-on-fabric.toml` (h1 with the rxe personality, h2 mlx5, the VM
//! as the remote host 10.100.0.20), a QEMU stream port and a capture, and runs each case
//! as one VM boot (`--fabric`) against a program run on the host as the emulated h1 (the
//! emulated libibverbs first on `LD_LIBRARY_PATH`, not through the launcher, so that its
//! out-of-band TCP is on the host's loopback, which the guest reaches as 10.0.2.2):
//!
//! - `ibv_rc_pingpong -g 1`, server emulated, client in the VM, then the other way round
//!   (the host's client reaching the VM's server through a port forwarded into the VM);
//! - `ibv_ud_pingpong -g 1 -s 1000`, server emulated, client in the VM;
//! - perftest `ib_send_bw` and `ib_write_bw` (RC, 64 KiB), server emulated, client in
//!   the VM;
//! - `ibv_rc_pingpong` again on a second fabric whose topology loses 2% of the frames the
//!   switch sends to the VM and to h1, so that both stacks retransmit.
//!
//! Each case checks that both programs exit with 0 and print their result lines exactly
//! (`819200 bytes in ... seconds = ... Mbit/sec`, `100 iters in ... usec/iter`, perftest's
//! result row for 65536 bytes), and that each side saw the other's GID. Each capture is
//! then read by tshark: no malformed frame (`-Y _ws.malformed` prints nothing), and the
//! RoCE frames from the VM's MAC are counted (at least those the cases must send); in the
//! lossy run, data packets sent again (the same source MAC, destination QP, PSN and
//! opcode) are counted for each side, and each side must have some.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{cargo, root, Error};
use super::fabric::FabricProcess;
use crate::vm::{self, qemu::FabricNic, VmOptions};

/// perftest, for its programs on the host (the VM's come from the same file system).
const PERFTEST: &[vm::packages::Package] = &[vm::packages::Package {
    name: "perftest",
    why: "ib_send_bw and ib_write_bw between the emulated h1 and rxe in the VM",
}];

/// The topology of the interop runs.
const TOPOLOGY: &str = "emulator/topologies/vm-on-fabric.toml";
/// The VM's address on the fabric (a remote host of [`TOPOLOGY`]).
const VM_IP: &str = "10.100.0.20";
/// The emulated host the host-side programs run as.
const HOST: &str = "h1";
/// h1's address.
const HOST_IP: &str = "10.100.0.1";
/// The host as the guest sees it on QEMU's user-mode network.
const HOST_FROM_GUEST: &str = "10.0.2.2";
/// The TCP port of every case (one case at a time).
const PORT: u16 = 18600;
/// The longest a case's VM or host program may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(180);

/// The lossy run's topology: [`TOPOLOGY`]'s hosts with 2% loss on the frames the switch
/// sends to h1 and out of the VM's port (`@SOCK@` is the port's path).
const LOSSY_TOPOLOGY: &str = r#"[[host]]
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

/// Starts `bin` with `topology` and `args`, its stderr (the summary) into `dir`.
fn start_fabric(
    bin: &Path,
    topology: &Path,
    args: &[&str],
    dir: &Path,
) -> Result<(FabricProcess, PathBuf), Error> {
    let stderr = dir.join("fabric.err");
    let err = std::fs::File::create(&stderr)
        .map_err(|e| format!("cannot create {}: {e}", stderr.display()))?;
    let mut c = Command::new(bin);
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

/// Where a case's server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// The emulated h1 serves; the VM's client connects to 10.0.2.2.
    Emulated,
    /// The VM serves; the host's client connects to the forwarded port on 127.0.0.1.
    Vm,
}

/// One case: a tool run as server and client with the same arguments.
struct Case {
    name: &'static str,
    tool: &'static str,
    args: Vec<String>,
    server: Server,
    /// Lines (prefix, suffix) each side's stdout must have.
    results: Vec<(String, &'static str)>,
}

fn pingpong(name: &'static str, tool: &'static str, server: Server, size: u32) -> Case {
    let iters = 100;
    Case {
        name,
        tool,
        args: [
            "-g",
            "1",
            "-n",
            &iters.to_string(),
            "-s",
            &size.to_string(),
            "-p",
            &PORT.to_string(),
        ]
        .map(String::from)
        .to_vec(),
        server,
        results: vec![
            (format!("{} bytes in ", 2 * iters * size), " Mbit/sec"),
            (format!("{iters} iters in "), " usec/iter"),
        ],
    }
}

fn perftest(name: &'static str, tool: &'static str) -> Case {
    Case {
        name,
        tool,
        args: [
            "-x",
            "1",
            "-s",
            "65536",
            "-n",
            "200",
            "-p",
            &PORT.to_string(),
        ]
        .map(String::from)
        .to_vec(),
        server: Server::Emulated,
        results: vec![(" 65536      200 ".into(), "")],
    }
}

/// The output of one side of a case.
struct Side {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The emulated libraries under the names programs load (as `cargo xtask emu --debug`).
fn lib_dir() -> Result<PathBuf, Error> {
    super::common::link_emulated_libraries(
        &root().join("target/debug/libibverbs.so"),
        &root().join("target/emu/interop-lib"),
    )
}

/// A program run on the host as the emulated h1, its output into files in `dir`.
fn host_program(
    case: &Case,
    env: &HostEnv<'_>,
    dir: &Path,
    peer: Option<&str>,
) -> Result<Child, Error> {
    let file = |ext: &str| {
        let p = dir.join(format!("{}-host.{ext}", case.name));
        std::fs::File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    let mut c = Command::new(case.tool);
    c.args(&case.args)
        .args(peer)
        .env("LD_LIBRARY_PATH", env.lib)
        .env("VERBS_EMU_FABRIC", env.socket)
        .env("VERBS_EMU_HOST", HOST)
        .env("VERBS_EMU_TOPOLOGY", env.topology)
        .stdin(Stdio::null())
        .stdout(file("out")?)
        .stderr(file("err")?);
    eprintln!(
        "xtask interop: {}: host (emulated {HOST}): {c:?}",
        case.name
    );
    c.spawn()
        .map_err(|e| format!("cannot start {}: {e}", case.tool))
}

/// Waits for a host program, killing it after [`CASE_TIMEOUT`].
fn finish_host(case: &Case, mut child: Child, dir: &Path) -> Result<Side, Error> {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            break s;
        }
        if start.elapsed() > CASE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{}: the host's {} did not finish within {} s",
                case.name,
                case.tool,
                CASE_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt;
    let read = |ext: &str| {
        std::fs::read_to_string(dir.join(format!("{}-host.{ext}", case.name))).unwrap_or_default()
    };
    Ok(Side {
        code: status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        stdout: read("out"),
        stderr: read("err"),
    })
}

/// Whether something listens on TCP `port` of the host (IPv4 or IPv6).
fn listening(port: u16) -> bool {
    let want = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3 && format!("{} ", w[1]).ends_with(&want) && w[3] == "0A"
            })
    })
}

/// The shell functions of `backend-hw/scripts/rxe-helpers.sh` (wait_port).
const HELPERS: &str = include_str!("../../../backend-hw/scripts/rxe-helpers.sh");

struct HostEnv<'a> {
    lib: &'a Path,
    socket: &'a str,
    topology: &'a Path,
    vm_socket: &'a Path,
}

fn vm_options(env: &HostEnv<'_>, forward: bool) -> VmOptions {
    VmOptions {
        timeout: CASE_TIMEOUT,
        echo: false,
        fabric: Some(FabricNic {
            socket: env.vm_socket.to_path_buf(),
            ip: VM_IP.parse().expect("VM_IP is an address"),
            forward: if forward { vec![PORT] } else { vec![] },
        }),
        ..VmOptions::default()
    }
}

fn vm_side(out: vm::VmOutput) -> Side {
    Side {
        code: out.exit_code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs one case; returns (host side, VM side, the VM's boot+setup and total seconds).
fn run_case(case: &Case, env: &HostEnv<'_>, dir: &Path) -> Result<(Side, Side, f64, f64), Error> {
    // A server already on the port would take the case's connection (or QEMU's forward).
    if listening(PORT) {
        return Err(format!(
            "{}: TCP port {PORT} of this machine is already taken; the interop cases need it",
            case.name
        ));
    }
    let quoted: Vec<String> = case.args.iter().map(|a| vm::sh_quote(a)).collect();
    let vm_tool = format!("{} -d {}", case.tool, vm::RXE_DEVICE);
    match case.server {
        Server::Emulated => {
            let server = host_program(case, env, dir, None)?;
            let start = Instant::now();
            while !listening(PORT) {
                if start.elapsed() > Duration::from_secs(30) {
                    let side = finish_host(case, server, dir);
                    return Err(format!(
                        "{}: the emulated server never listened on port {PORT}: {}",
                        case.name,
                        side.map(|s| s.stderr).unwrap_or_else(|e| e)
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let cmd = format!("{vm_tool} {} {HOST_FROM_GUEST}", quoted.join(" "));
            eprintln!("xtask interop: {}: VM: {cmd}", case.name);
            let out = vm::run_in_vm(&["sh".into(), "-c".into(), cmd], &vm_options(env, false));
            let host = finish_host(case, server, dir)?;
            let out = out?;
            let times = (
                out.boot_time.unwrap_or_default().as_secs_f64(),
                out.total_time.as_secs_f64(),
            );
            Ok((host, vm_side(out), times.0, times.1))
        }
        Server::Vm => {
            let ready = dir.join(format!("{}.ready", case.name));
            let _ = std::fs::remove_file(&ready);
            let cmd = format!(
                "{HELPERS}\n{vm_tool} {args} & S=$!\nwait_port {PORT} || exit 1\n: > {ready}\nwait $S\n",
                args = quoted.join(" "),
                ready = vm::sh_quote(&ready.to_string_lossy()),
            );
            eprintln!(
                "xtask interop: {}: VM: {vm_tool} {} (server)",
                case.name,
                quoted.join(" ")
            );
            let opts = vm_options(env, true);
            let vm_run =
                std::thread::spawn(move || vm::run_in_vm(&["sh".into(), "-c".into(), cmd], &opts));
            let start = Instant::now();
            while !ready.exists() && !vm_run.is_finished() {
                if start.elapsed() > CASE_TIMEOUT {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let host = if ready.exists() {
                let client = host_program(case, env, dir, Some("127.0.0.1"))?;
                Some(finish_host(case, client, dir))
            } else {
                None
            };
            let out = vm_run
                .join()
                .map_err(|_| format!("{}: the VM thread panicked", case.name))??;
            let vm = vm_side(out.clone());
            let Some(host) = host else {
                return Err(format!(
                    "{}: the VM's server never listened (exit {}): {}{}",
                    case.name, vm.code, vm.stdout, vm.stderr
                ));
            };
            Ok((
                host?,
                vm,
                out.boot_time.unwrap_or_default().as_secs_f64(),
                out.total_time.as_secs_f64(),
            ))
        }
    }
}

/// Checks one side's exit code, result lines and the peer's GID.
fn check_side(case: &Case, who: &str, side: &Side, peer_ip: &str) -> Result<(), Error> {
    let fail = |why: String| {
        Err(format!(
            "{} ({who}): {why}\n--- stdout:\n{}--- stderr:\n{}",
            case.name, side.stdout, side.stderr
        ))
    };
    if side.code != 0 {
        return fail(format!("{} exited with {}", case.tool, side.code));
    }
    for (prefix, suffix) in &case.results {
        if !side
            .stdout
            .lines()
            .any(|l| l.starts_with(prefix.as_str()) && l.ends_with(suffix))
        {
            return fail(format!("no line `{prefix}...{suffix}`"));
        }
    }
    // rdma-core's pingpongs end the remote address line with the GID; perftest prints it
    // on the next line.
    let gid = format!("::ffff:{peer_ip}");
    let lines: Vec<&str> = side.stdout.lines().collect();
    let remote_gid = lines.iter().enumerate().any(|(i, l)| {
        (l.starts_with("  remote address:") && l.ends_with(&format!("GID {gid}")))
            || (l.contains("remote address:")
                && lines
                    .get(i + 1)
                    .is_some_and(|n| n.trim() == format!("GID: {}", perftest_gid(peer_ip))))
    });
    if !remote_gid {
        return fail(format!("no remote address with the GID {gid}"));
    }
    Ok(())
}

/// How perftest prints an IPv4-mapped GID (`00:00:...:255:255:10:100:00:01`).
fn perftest_gid(ip: &str) -> String {
    let mut parts: Vec<String> = vec!["00".into(); 10];
    parts.extend(["255".into(), "255".into()]);
    parts.extend(
        ip.split('.')
            .map(|b| format!("{:02}", b.parse::<u8>().unwrap_or(0))),
    );
    parts.join(":")
}

/// The RoCE frames of a capture: (source MAC, destination QP, PSN, opcode) each.
fn roce_frames(pcap: &Path) -> Result<Vec<(String, String, String, String)>, Error> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            "-Y",
            "infiniband",
            "-T",
            "fields",
            "-e",
            "eth.src",
            "-e",
            "infiniband.bth.destqp",
            "-e",
            "infiniband.bth.psn",
            "-e",
            "infiniband.bth.opcode",
        ])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run tshark: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tshark -r {} failed ({})",
            pcap.display(),
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split('\t').collect();
            (w.len() == 4).then(|| (w[0].into(), w[1].into(), w[2].into(), w[3].into()))
        })
        .collect())
}

/// No malformed frame in `pcap`, by tshark.
fn no_malformed(pcap: &Path) -> Result<(), Error> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-Y", "_ws.malformed"])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run tshark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.trim().is_empty() {
        return Err(format!(
            "tshark finds malformed frames in {} ({}):\n{text}",
            pcap.display(),
            out.status
        ));
    }
    Ok(())
}

/// Data packets (acknowledges aside, opcode 17) sent again by `mac`: the same destination
/// QP, PSN and opcode as an earlier frame from it.
fn resent(frames: &[(String, String, String, String)], mac: &str) -> usize {
    let mut seen: HashMap<(&str, &str, &str), usize> = HashMap::new();
    for (src, qp, psn, op) in frames {
        if src == mac && op != "17" {
            *seen.entry((qp, psn, op)).or_default() += 1;
        }
    }
    seen.values().map(|n| n - 1).sum()
}

fn vm_mac() -> String {
    FabricNic {
        socket: PathBuf::new(),
        ip: VM_IP.parse().expect("VM_IP is an address"),
        forward: vec![],
    }
    .mac()
}

/// Runs `cases` on one fabric; returns the capture's RoCE frames.
fn run_cases(
    cases: &[Case],
    dir: &Path,
    topology: &Path,
    flags: &[&str],
    lib: &Path,
) -> Result<Vec<(String, String, String, String)>, Error> {
    let pcap = dir.join("fabric.pcap");
    let sock = dir.join("vm.sock");
    let _ = std::fs::remove_file(&sock);
    let mut args: Vec<&str> = flags.to_vec();
    let pcap_s = pcap.to_string_lossy().into_owned();
    args.extend(["--pcap", &pcap_s]);
    let bin = root().join("target/debug/verbs-emu-fabric");
    let (fabric, fabric_err) = start_fabric(&bin, topology, &args, dir)?;
    let env = HostEnv {
        lib,
        socket: &fabric.socket,
        topology,
        vm_socket: &sock,
    };
    let mut result = Ok(());
    for case in cases {
        let t = Instant::now();
        let r = run_case(case, &env, dir).and_then(|(host, vmside, boot, total)| {
            let (host_peer, vm_peer) = (VM_IP, HOST_IP);
            check_side(case, "emulated h1", &host, host_peer)?;
            check_side(case, "rxe in the VM", &vmside, vm_peer)?;
            let lines = |s: &Side| {
                s.stdout
                    .lines()
                    .filter(|l| case.results.iter().any(|(p, _)| l.starts_with(p.as_str())))
                    .collect::<Vec<_>>()
                    .join(" | ")
            };
            eprintln!(
                "xtask interop: {} passed in {:.1} s (VM boot+setup {boot:.1} s, total {total:.1} s)\n  host: {}\n  VM:   {}",
                case.name,
                t.elapsed().as_secs_f64(),
                lines(&host),
                lines(&vmside)
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
    no_malformed(&pcap)?;
    roce_frames(&pcap)
}

/// `cargo xtask test --wire`'s interop step (see the module docs).
///
/// # Errors
/// A failing build, case or capture check, named.
pub fn run() -> Result<(), Error> {
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
    let lib = lib_dir()?;
    let dir = root().join("target/interop");
    let _ = std::fs::remove_dir_all(&dir);
    let mac = vm_mac();

    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain)
        .map_err(|e| format!("cannot create {}: {e}", plain.display()))?;
    let cases = vec![
        pingpong(
            "rc-emulated-server",
            "ibv_rc_pingpong",
            Server::Emulated,
            4096,
        ),
        pingpong("rc-vm-server", "ibv_rc_pingpong", Server::Vm, 4096),
        pingpong(
            "ud-emulated-server",
            "ibv_ud_pingpong",
            Server::Emulated,
            1000,
        ),
        perftest("send-bw-emulated-server", "ib_send_bw"),
        perftest("write-bw-emulated-server", "ib_write_bw"),
    ];
    let topology = root().join(TOPOLOGY);
    let sock = plain.join("vm.sock");
    let sock_s = sock.to_string_lossy().into_owned();
    let frames = run_cases(&cases, &plain, &topology, &["--qemu-stream", &sock_s], &lib)?;
    let from_vm = frames.iter().filter(|f| f.0 == mac).count();
    // Each RC pingpong: 200 messages of 4096 bytes, 4 packets each at MTU 1024, half
    // of them the VM's; UD: 100 of the VM's; perftest: 200 x 64 packets (send and write).
    let least = 2 * 400 + 100 + 2 * 200 * 64;
    eprintln!(
        "xtask interop: capture {}: no malformed frame; {} RoCE frames, {from_vm} from the VM's MAC {mac}",
        plain.join("fabric.pcap").display(),
        frames.len()
    );
    if from_vm < least {
        return Err(format!(
            "only {from_vm} RoCE frames from the VM's MAC {mac} (at least {least} expected)"
        ));
    }

    let lossy = dir.join("lossy");
    std::fs::create_dir_all(&lossy)
        .map_err(|e| format!("cannot create {}: {e}", lossy.display()))?;
    let lossy_sock = lossy.join("vm.sock");
    let lossy_topology = lossy.join("topology.toml");
    std::fs::write(
        &lossy_topology,
        LOSSY_TOPOLOGY.replace("@SOCK@", &lossy_sock.to_string_lossy()),
    )
    .map_err(|e| format!("cannot write {}: {e}", lossy_topology.display()))?;
    let cases = vec![pingpong(
        "rc-lossy-emulated-server",
        "ibv_rc_pingpong",
        Server::Emulated,
        4096,
    )];
    let frames = run_cases(&cases, &lossy, &lossy_topology, &["--seed", "7"], &lib)?;
    let h1_mac = "02:00:0a:64:00:01";
    let (vm_again, h1_again) = (resent(&frames, &mac), resent(&frames, h1_mac));
    eprintln!(
        "xtask interop: lossy capture: {} RoCE frames; data packets sent again: {vm_again} by rxe in the VM, {h1_again} by the emulated h1",
        frames.len()
    );
    if vm_again == 0 || h1_again == 0 {
        return Err(format!(
            "with 2% loss both stacks should have retransmitted: the VM {vm_again}, h1 {h1_again}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_prints_ipv4_mapped_gids_in_decimal_bytes() {
        assert_eq!(
            perftest_gid("10.100.0.1"),
            "00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:01"
        );
    }

    #[test]
    fn resent_counts_repeated_data_packets_of_one_sender() {
        let f = |s: &str, qp: &str, psn: &str, op: &str| {
            (s.to_owned(), qp.to_owned(), psn.to_owned(), op.to_owned())
        };
        let frames = vec![
            f("a", "17", "1", "4"),
            f("a", "17", "1", "4"),
            f("a", "17", "1", "17"),
            f("a", "17", "1", "17"),
            f("b", "17", "1", "4"),
            f("a", "17", "2", "4"),
        ];
        assert_eq!(resent(&frames, "a"), 1);
        assert_eq!(resent(&frames, "b"), 0);
    }

    #[test]
    fn pingpong_expects_both_result_lines() {
        let c = pingpong("x", "ibv_rc_pingpong", Server::Vm, 4096);
        assert_eq!(c.results[0].0, "819200 bytes in ");
        assert_eq!(c.results[1].0, "100 iters in ");
        assert!(c.args.windows(2).any(|w| w == ["-g", "1"]));
    }
}
