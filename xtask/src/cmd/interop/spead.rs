//! The SPEAD cases: multicast heaps between the emulated mlx5 host h2 (RAW_PACKET QPs,
//! through the emulated libibverbs) and kernel UDP sockets in the Soft-RoCE VM, each way,
//! with our tools (`spead-send`, `spead-recv`) and with spead2 (UdpIbvStream and
//! add_udp_ibv_reader on h2, UdpStream and add_udp_reader in the VM,
//! `launcher/tests/py/spead2_two_hosts.py`). The receiver must print exactly the heaps
//! sent: our tools' against the same heaps written to a file and read back, spead2's
//! against the lines its sender printed (each heap's counter and items' bytes in hex).

use std::path::Path;
use std::process::Command;

use super::addresses::{SPEAD_HOST, SPEAD_HOST_IP, VM_IP};
use super::cases::{heap_lines, Case, Check, Ready, Server};
use crate::cmd::common::{root, Error};
use crate::vm::sh_quote;

/// The heaps our tools send (as `emulator/tests/wire.rs`): 20 heaps of 30000 bytes in 3
/// items, in 1472-byte packets (fit for the VM's 1500-byte MTU), 20 Mb/s (the VM runs
/// under TCG; its socket's buffer is raised to 8 MiB too).
const HEAP_ARGS: [&str; 8] = [
    "--heaps",
    "20",
    "--heap-size",
    "30000",
    "--items",
    "3",
    "--rate",
    "0.02",
];

/// Heaps spead2_two_hosts.py sends, and its largest packet (the VM's MTU less the IPv4
/// and UDP headers).
const SPEAD2_HEAPS: &str = "20";
const SPEAD2_PACKET: &str = "1472";

/// What `spead-recv --json` prints for the heaps of [`HEAP_ARGS`]: the same sender into
/// a file, read back.
fn reference_heaps(tools: &Path, dir: &Path) -> Result<Vec<String>, Error> {
    let file = dir.join("heaps.spead");
    let wrote = Command::new(tools.join("spead-send"))
        .args(HEAP_ARGS)
        .arg(format!("file:{}", file.display()))
        .output()
        .map_err(|e| format!("spead-send: {e}"))?;
    let read = Command::new(tools.join("spead-recv"))
        .arg(format!("file:{}", file.display()))
        .arg("--json")
        .output()
        .map_err(|e| format!("spead-recv: {e}"))?;
    let heaps = heap_lines(&String::from_utf8_lossy(&read.stdout));
    if !wrote.status.success() || !read.status.success() || heaps.len() != 20 {
        return Err(format!(
            "the reference heaps: spead-send {} ({}), spead-recv {} ({}), {} heaps",
            wrote.status,
            String::from_utf8_lossy(&wrote.stderr),
            read.status,
            String::from_utf8_lossy(&read.stderr),
            heaps.len()
        ));
    }
    Ok(heaps)
}

/// The VM's receive buffer limit raised to what the receivers ask (8 MiB), as spead2's
/// documentation advises for a receiving host.
const VM_RMEM: &str = "sysctl -q -w net.core.rmem_max=8388608 &&";

/// The names of [`cases`]' cases, in their order.
pub const NAMES: [&str; 4] = [
    "spead-tools-to-vm",
    "spead-tools-from-vm",
    "spead2-to-vm",
    "spead2-from-vm",
];

/// The four SPEAD cases; `tools` holds spead-send and spead-recv (built with `hw`).
///
/// # Errors
/// spead2 cannot be installed, or the reference heaps cannot be made.
pub fn cases(tools: &Path, dir: &Path) -> Result<Vec<Case>, Error> {
    let want = reference_heaps(tools, dir)?;
    let python = crate::cmd::spead2::python()?;
    let script = root().join("launcher/tests/py/spead2_two_hosts.py");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let (send, recv) = (s(&tools.join("spead-send")), s(&tools.join("spead-recv")));
    let (py, script) = (s(&python), s(&script));
    let q = |v: &[&str]| v.iter().map(|a| sh_quote(a)).collect::<Vec<_>>().join(" ");
    let owned = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let heap_args = HEAP_ARGS.to_vec();
    let ibv = ["--backend", "hw", "--ibv-interface", SPEAD_HOST_IP];

    let to_vm_tools = Case {
        name: NAMES[0].into(),
        first: Server::Vm,
        emulated: SPEAD_HOST,
        netns_ip: Some(SPEAD_HOST_IP),
        ready: Ready::Line("spead-recv: listening on udp:239.10.0.1:7148".into()),
        host: owned(
            &[
                &[send.as_str()][..],
                &heap_args,
                &ibv,
                &["ibv:239.10.0.1:7148"],
            ]
            .concat(),
        ),
        vm: format!(
            "{VM_RMEM} {}",
            q(&[&recv, "udp:239.10.0.1:7148", "--bind", VM_IP, "--json"])
        ),
        vm_cpu: None,
        check: Check::Heaps {
            receiver: Server::Vm,
            want: want.clone(),
        },
        vm_frames: 0,
    };
    let from_vm_tools = Case {
        name: NAMES[1].into(),
        first: Server::Emulated,
        emulated: SPEAD_HOST,
        netns_ip: Some(SPEAD_HOST_IP),
        ready: Ready::Line(format!(
            "spead-recv: receiving on ibv:239.10.0.2:7150 (raw, interface {SPEAD_HOST_IP})"
        )),
        host: owned(
            &[
                &[recv.as_str()][..],
                &ibv,
                &["ibv:239.10.0.2:7150", "--json"],
            ]
            .concat(),
        ),
        vm: q(&[
            &[send.as_str()][..],
            &heap_args,
            &["--bind", VM_IP, "--ttl", "1", "udp:239.10.0.2:7150"],
        ]
        .concat()),
        vm_cpu: None,
        check: Check::Heaps {
            receiver: Server::Emulated,
            want,
        },
        vm_frames: 0,
    };
    let spead2 = |mode: &str, group: &str, port: &str, ip: &str| {
        owned(&[
            &py,
            &script,
            mode,
            group,
            port,
            ip,
            SPEAD2_HEAPS,
            SPEAD2_PACKET,
        ])
    };
    let ready = Ready::Line(r#"{"ready": true}"#.into());
    let to_vm_spead2 = Case {
        name: NAMES[2].into(),
        first: Server::Vm,
        emulated: SPEAD_HOST,
        netns_ip: Some(SPEAD_HOST_IP),
        ready: ready.clone(),
        host: spead2("send", "239.10.0.3", "7152", SPEAD_HOST_IP),
        vm: format!(
            "{VM_RMEM} {}",
            q(&spead2("recv-udp", "239.10.0.3", "7152", VM_IP)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>())
        ),
        // spead2's numpy dies of SIGILL on QEMU's default CPU (no SSE4.2, POPCNT).
        vm_cpu: Some("max"),
        check: Check::HeapsAsSent {
            receiver: Server::Vm,
        },
        vm_frames: 0,
    };
    let from_vm_spead2 = Case {
        name: NAMES[3].into(),
        first: Server::Emulated,
        emulated: SPEAD_HOST,
        netns_ip: Some(SPEAD_HOST_IP),
        ready,
        host: spead2("recv", "239.10.0.4", "7154", SPEAD_HOST_IP),
        vm: q(&spead2("send-udp", "239.10.0.4", "7154", VM_IP)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()),
        // spead2's numpy dies of SIGILL on QEMU's default CPU (no SSE4.2, POPCNT).
        vm_cpu: Some("max"),
        check: Check::HeapsAsSent {
            receiver: Server::Emulated,
        },
        vm_frames: 0,
    };
    Ok(vec![
        to_vm_tools,
        from_vm_tools,
        to_vm_spead2,
        from_vm_spead2,
    ])
}
