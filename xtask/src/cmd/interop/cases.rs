//! The interop cases: which program runs on each side, which side starts first and how it
//! shows it is ready, and what each side must print ([`Check`]).

use super::addresses::{link_local_of, HOST, HOST_FROM_GUEST, HOST_IP, PORT, VM_IP};
use crate::vm;

/// The side that starts first (the server, or the receiver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// The emulated host: the VM's client connects to 10.0.2.2 (or sends to it).
    Emulated,
    /// The VM: the host's client connects to the forwarded port on 127.0.0.1.
    Vm,
}

/// How the side started first shows that the other may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// It listens on TCP [`PORT`].
    Tcp,
    /// It prints this text (on stdout or stderr).
    Line(String),
}

/// The GID each side of a verbs case must have seen of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gid {
    /// The RoCE v2 GID of the peer's IPv4 address (`-g 1`, `-x 1`).
    Ipv4,
    /// The peer's link-local IPv6 address (`-g 0`).
    LinkLocal,
}

/// What a case checks, besides both sides exiting with 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// rdma-core's and perftest's programs: result lines (prefix, suffix) of the client's
    /// and of the server's stdout, and the peer's GID on each side.
    Verbs {
        /// Lines the client must print.
        client: Vec<(String, &'static str)>,
        /// Lines the server must print.
        server: Vec<(String, &'static str)>,
        /// The peer's GID, printed by both.
        gid: Gid,
    },
    /// SPEAD: the receiver's heap lines (`{"cnt"...` JSON, the items' bytes in hex) are
    /// exactly these, in order.
    Heaps {
        /// Which side receives.
        receiver: Server,
        /// The heap lines it must print.
        want: Vec<String>,
    },
    /// Each side's lines that start with its prefix are exactly these, in order (rping's
    /// `ping data:` lines).
    Lines {
        /// The client's prefix and lines.
        client: (&'static str, Vec<String>),
        /// The server's.
        server: (&'static str, Vec<String>),
    },
    /// SPEAD: the receiver prints exactly the heap lines the sender printed.
    HeapsAsSent {
        /// Which side receives.
        receiver: Server,
    },
}

/// One case: a program on each side, as complete commands.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case's name (its files in the run's folder start with it).
    pub name: String,
    /// The side that starts first.
    pub first: Server,
    /// How it shows it is ready.
    pub ready: Ready,
    /// The emulated host the host side runs as.
    pub emulated: &'static str,
    /// The address of the network namespace of its own the host side runs in, if any
    /// (`super::runner::HostRun::netns_ip`).
    pub netns_ip: Option<&'static str>,
    /// The host side's command and arguments.
    pub host: Vec<String>,
    /// The VM side's shell command.
    pub vm: String,
    /// The VM's CPU model, if not QEMU's default (`crate::vm::VmOptions::cpu`).
    pub vm_cpu: Option<&'static str>,
    /// What the case checks.
    pub check: Check,
    /// RoCE frames the VM must have sent in this case, at least (for the capture's check).
    pub vm_frames: usize,
}

/// The heap lines of a SPEAD program's output (spead-recv `--json`, spead2_two_hosts.py).
pub fn heap_lines(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with("{\"cnt\""))
        .map(str::to_owned)
        .collect()
}

/// A tool run with the same arguments on both sides, the client naming its server.
fn both_sides(tool: &str, args: &[String], server: Server) -> (Vec<String>, String) {
    let quoted: Vec<String> = args.iter().map(|a| vm::sh_quote(a)).collect();
    let vm_tool = format!("{tool} -d {} {}", vm::RXE_DEVICE, quoted.join(" "));
    let mut host: Vec<String> = std::iter::once(tool.to_owned())
        .chain(args.iter().cloned())
        .collect();
    match server {
        Server::Emulated => (host, format!("{vm_tool} {HOST_FROM_GUEST}")),
        Server::Vm => {
            host.push("127.0.0.1".into());
            (host, vm_tool)
        }
    }
}

fn side_name(s: Server) -> &'static str {
    match s {
        Server::Emulated => "emulated-server",
        Server::Vm => "vm-server",
    }
}

/// rdma-core's `ibv_rc_pingpong` or `ibv_ud_pingpong`, 100 iterations of `size` bytes on
/// GID `gid` (0 or 1).
pub fn pingpong(tool: &str, gid: u8, server: Server, size: u32) -> Case {
    let iters = 100;
    let args: Vec<String> = [
        "-g",
        &gid.to_string(),
        "-n",
        &iters.to_string(),
        "-s",
        &size.to_string(),
        "-p",
        &PORT.to_string(),
    ]
    .map(String::from)
    .to_vec();
    let (host, vm) = both_sides(tool, &args, server);
    let kind = if tool.contains("_ud_") { "ud" } else { "rc" };
    let ll = if gid == 0 { "-ll" } else { "" };
    let lines = vec![
        (format!("{} bytes in ", 2 * iters * size), " Mbit/sec"),
        (format!("{iters} iters in "), " usec/iter"),
    ];
    // Each sends `iters` messages; RC at MTU 1024 in ceil(size / 1024) packets.
    let packets = if kind == "ud" {
        1
    } else {
        size.div_ceil(1024) as usize
    };
    Case {
        name: format!("{kind}{ll}-{}", side_name(server)),
        first: server,
        ready: Ready::Tcp,
        emulated: HOST,
        netns_ip: None,
        host,
        vm,
        vm_cpu: None,
        check: Check::Verbs {
            client: lines.clone(),
            server: lines,
            gid: if gid == 0 { Gid::LinkLocal } else { Gid::Ipv4 },
        },
        vm_frames: iters as usize * packets,
    }
}

/// perftest's `ib_send_bw` or `ib_write_bw` (RC, 200 messages of 64 KiB, GID 1).
pub fn bandwidth(tool: &str, server: Server) -> Case {
    // -F: perftest's report needs the CPU's clock rate, which it samples against
    // gettimeofday and refuses ("Can't produce a report", exit 1) when the samples
    // correlate worse than r^2 0.9 (`sample_get_cpu_mhz`, perftest src/get_clock.c), as
    // they did once in the VM under TCG; with -F it reports anyway (the rates are then
    // not numbers; no rate is checked).
    let args: Vec<String> = [
        "-F",
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
    .to_vec();
    let (host, vm) = both_sides(tool, &args, server);
    let row = vec![(" 65536      200 ".into(), "")];
    let name = tool.trim_start_matches("ib_").replace('_', "-");
    Case {
        name: format!("{name}-{}", side_name(server)),
        first: server,
        ready: Ready::Tcp,
        emulated: HOST,
        netns_ip: None,
        host,
        vm,
        vm_cpu: None,
        check: Check::Verbs {
            client: row.clone(),
            server: row,
            gid: Gid::Ipv4,
        },
        // The client's 200 x 64 packets at MTU 1024; a server acknowledges at least once
        // a message (each message's last packet asks for it).
        vm_frames: match server {
            Server::Emulated => 200 * 64,
            Server::Vm => 200,
        },
    }
}

/// perftest's `ib_read_lat` (RC RDMA READ of 2 bytes, 200 iterations, GID 1, the QPs'
/// parameters exchanged over its TCP socket): only the client prints the result row.
pub fn read_latency(server: Server) -> Case {
    // -F as in [`bandwidth`] (the latency report does not refuse; the flag keeps the two
    // alike).
    let args: Vec<String> = ["-F", "-x", "1", "-n", "200", "-p", &PORT.to_string()]
        .map(String::from)
        .to_vec();
    let (host, vm) = both_sides("ib_read_lat", &args, server);
    Case {
        name: format!("read-lat-{}", side_name(server)),
        first: server,
        ready: Ready::Tcp,
        emulated: HOST,
        netns_ip: None,
        host,
        vm,
        vm_cpu: None,
        check: Check::Verbs {
            client: vec![(" 2       200 ".into(), "")],
            server: vec![],
            gid: Gid::Ipv4,
        },
        // 200 READ requests from a client, 200 responses from a server.
        vm_frames: 200,
    }
}

/// The `ping data` lines of `rping -v -C count` with its default size of 64 bytes
/// (librdmacm/examples/rping.c `rping_test_client`: `rdma-ping-N: `, then letters from
/// 'A' + N on, each next one up to 'z' and round to 'A', the buffer's last byte a NUL).
pub fn rping_data(count: usize) -> Vec<String> {
    (0..count)
        .map(|n| {
            let mut s = format!("rdma-ping-{n}: ");
            let mut c = b'A' + (n % 58) as u8;
            while s.len() < 63 {
                s.push(char::from(c));
                c = if c == b'z' { b'A' } else { c + 1 };
            }
            s
        })
        .collect()
}

/// The line the VM's side prints once its kernel's CM has an id listening
/// ([`listening_in_vm`]).
pub const CM_LISTENING: &str = "cm id listening";

/// The VM's shell command that runs `cmd` (a server through the RDMA CM) and prints
/// [`CM_LISTENING`] once the kernel lists an id of its in state LISTEN (`rdma resource
/// show cm_id`), then ends with its exit code: the servers' own messages come before
/// their `rdma_listen` (rping `-d`'s `rdma_listen` line, perftest's banner).
pub fn listening_in_vm(cmd: &str) -> String {
    let inner = format!(
        "{cmd} & P=$!; until rdma resource show cm_id | grep -q 'state LISTEN'; do \
         kill -0 $P 2> /dev/null || break; sleep 0.1; done; echo '{CM_LISTENING}'; wait $P"
    );
    format!("sh -c {}", vm::sh_quote(&inner))
}

/// rdma-core's `rping` (RC, SEND, RDMA READ and WRITE through the RDMA CM, 10 pings):
/// the connection manager's MADs cross between the VM's kernel and the fabric (see
/// emulator/src/fabric/ports/cm_bridge.rs). An emulated server prints `rdma_listen`
/// (`-d`, its stdout line-buffered) just before it listens, which the VM's boot of
/// seconds follows; the VM's server is ready when its kernel lists it listening.
pub fn rping(server: Server) -> Case {
    let count = 10;
    let server_ip = match server {
        Server::Emulated => HOST_IP,
        Server::Vm => VM_IP,
    };
    let common = format!("-v -C {count} -a {server_ip} -p {PORT}");
    let client_cmd = format!("rping -c {common}");
    let split = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
    let (host, vm, ready) = match server {
        Server::Emulated => (
            split(&format!("stdbuf -oL rping -s -d {common}")),
            client_cmd,
            "rdma_listen",
        ),
        Server::Vm => (
            split(&client_cmd),
            listening_in_vm(&format!("rping -s {common}")),
            CM_LISTENING,
        ),
    };
    let data = rping_data(count);
    Case {
        name: format!("rping-{}", side_name(server)),
        first: server,
        ready: Ready::Line(ready.into()),
        emulated: HOST,
        netns_ip: None,
        host,
        vm,
        vm_cpu: None,
        check: Check::Lines {
            client: (
                "ping data: ",
                data.iter().map(|d| format!("ping data: {d}")).collect(),
            ),
            server: (
                "server ping data: ",
                data.iter()
                    .map(|d| format!("server ping data: {d}"))
                    .collect(),
            ),
        },
        // Each ping: the client's two SENDs; the server's RDMA READ request, WRITE and
        // two SENDs.
        vm_frames: 2 * count,
    }
}

/// perftest's `ib_read_lat -R`: as [`read_latency`], the QPs connected and the
/// parameters exchanged through the RDMA CM (no TCP). An emulated server prints its
/// `Waiting for client to connect` banner (stdout line-buffered) just before it listens.
/// The interop step runs it with the server on h1 only: its client connects its data QP
/// without waiting for the server's second listen, which the VM may not have reached.
pub fn read_latency_cm(server: Server) -> Case {
    let args = format!("-F -R -x 1 -n 200 -p {PORT}");
    let split = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
    let vm_tool = format!("ib_read_lat -d {} {args}", vm::RXE_DEVICE);
    let (host, vm, ready) = match server {
        Server::Emulated => (
            split(&format!("stdbuf -oL ib_read_lat {args}")),
            format!("{vm_tool} {HOST_IP}"),
            "Waiting for client to connect",
        ),
        Server::Vm => (
            split(&format!("ib_read_lat {args} {VM_IP}")),
            listening_in_vm(&vm_tool),
            CM_LISTENING,
        ),
    };
    Case {
        name: format!("read-lat-cm-{}", side_name(server)),
        first: server,
        ready: Ready::Line(ready.into()),
        emulated: HOST,
        netns_ip: None,
        host,
        vm,
        vm_cpu: None,
        check: Check::Verbs {
            client: vec![(" 2       200 ".into(), "")],
            server: vec![],
            gid: Gid::Ipv4,
        },
        // 200 READ requests from a client, 200 responses from a server.
        vm_frames: 200,
    }
}

/// How rdma-core's pingpongs and perftest print the peer's GID: the pingpongs end their
/// `  remote address:` line with `GID ADDRESS` (`inet_ntop`); perftest prints `GID:` and
/// the 16 bytes in decimal on the line after its `remote address:` line.
pub fn gid_seen(stdout: &str, gid: Gid, peer_ip: &str) -> bool {
    let text = match gid {
        Gid::Ipv4 => format!("::ffff:{peer_ip}"),
        Gid::LinkLocal => link_local_of(peer_ip),
    };
    let lines: Vec<&str> = stdout.lines().collect();
    lines.iter().enumerate().any(|(i, l)| {
        (l.starts_with("  remote address:") && l.ends_with(&format!("GID {text}")))
            || (gid == Gid::Ipv4
                && l.contains("remote address:")
                && lines
                    .get(i + 1)
                    .is_some_and(|n| n.trim() == format!("GID: {}", perftest_gid(peer_ip))))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_prints_ipv4_mapped_gids_in_decimal_bytes() {
        assert_eq!(
            perftest_gid("10.100.0.1"),
            "00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:01"
        );
        let out = " remote address: LID 0000 QPN 0x0011 PSN 0x3 OUT 0x80 RKey 0x1 VAddr 0x5\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:01\n";
        assert!(gid_seen(out, Gid::Ipv4, "10.100.0.1"));
        assert!(!gid_seen(out, Gid::Ipv4, "10.100.0.2"));
    }

    #[test]
    fn pingpong_expects_both_result_lines_and_the_gid_asked() {
        let c = pingpong("ibv_rc_pingpong", 1, Server::Vm, 4096);
        assert_eq!(c.name, "rc-vm-server");
        let Check::Verbs { client, gid, .. } = &c.check else {
            panic!("a verbs case")
        };
        assert_eq!(client[0].0, "819200 bytes in ");
        assert_eq!(client[1].0, "100 iters in ");
        assert_eq!(*gid, Gid::Ipv4);
        assert!(c.host.windows(2).any(|w| w == ["-g", "1"]));
        assert_eq!(c.host.last().map(String::as_str), Some("127.0.0.1"));
        assert_eq!(c.vm_frames, 400);
        let c = pingpong("ibv_rc_pingpong", 0, Server::Emulated, 4096);
        assert_eq!(c.name, "rc-ll-emulated-server");
        assert!(
            c.vm.starts_with("ibv_rc_pingpong -d rxe0 '-g' '0' "),
            "{}",
            c.vm
        );
        assert!(c.vm.ends_with(" 10.0.2.2"), "{}", c.vm);
        let out =
            "  remote address: LID 0x0000, QPN 0x000011, PSN 0x0e8e1c, GID fe80::aff:fe64:14\n";
        assert!(gid_seen(out, Gid::LinkLocal, "10.100.0.20"));
        assert!(!gid_seen(out, Gid::Ipv4, "10.100.0.20"));
    }

    /// The VM's wrapper is valid shell, waits for a listening id and keeps the exit code
    /// (run here with a stand-in `rdma` that reports a listener).
    #[test]
    fn the_vms_listening_wrapper_waits_and_keeps_the_exit_code() {
        let dir = std::env::temp_dir().join(format!("interop-listen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rdma = dir.join("rdma");
        std::fs::write(&rdma, "#!/bin/sh\necho 'link rxe0/1 state LISTEN ps TCP'\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&rdma, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                &listening_in_vm("sh -c 'sleep 0.2; echo served; exit 3'"),
            ])
            .env("PATH", path)
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(out.status.code(), Some(3));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text, format!("{CM_LISTENING}\nserved\n"));
    }

    #[test]
    fn rping_expects_its_ping_data_lines_exactly() {
        let d = rping_data(10);
        assert_eq!(
            d[0],
            "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
        );
        assert_eq!(
            d[9],
            "rdma-ping-9: JKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzA"
        );
        let c = rping(Server::Emulated);
        assert_eq!(c.name, "rping-emulated-server");
        assert_eq!(
            c.host.join(" "),
            "stdbuf -oL rping -s -d -v -C 10 -a 10.100.0.1 -p 18600"
        );
        assert_eq!(c.vm, "rping -c -v -C 10 -a 10.100.0.1 -p 18600");
        assert_eq!(c.ready, Ready::Line("rdma_listen".into()));
        let c = rping(Server::Vm);
        assert_eq!(
            c.host.join(" "),
            "rping -c -v -C 10 -a 10.100.0.20 -p 18600"
        );
        assert_eq!(c.ready, Ready::Line(CM_LISTENING.into()));
        assert!(
            c.vm.starts_with("sh -c 'rping -s -v -C 10 -a 10.100.0.20 -p 18600 & P=$!; "),
            "{}",
            c.vm
        );
        let c = read_latency_cm(Server::Emulated);
        assert_eq!(c.name, "read-lat-cm-emulated-server");
        assert_eq!(
            c.vm,
            "ib_read_lat -d rxe0 -F -R -x 1 -n 200 -p 18600 10.100.0.1"
        );
        let c = read_latency_cm(Server::Vm);
        assert_eq!(
            c.host.join(" "),
            "ib_read_lat -F -R -x 1 -n 200 -p 18600 10.100.0.20"
        );
    }

    #[test]
    fn read_latency_checks_the_clients_row_only() {
        let c = read_latency(Server::Emulated);
        assert_eq!(c.name, "read-lat-emulated-server");
        let Check::Verbs { client, server, .. } = &c.check else {
            panic!("a verbs case")
        };
        assert_eq!(client.len(), 1);
        assert!(server.is_empty());
        assert_eq!(
            bandwidth("ib_write_bw", Server::Vm).name,
            "write-bw-vm-server"
        );
    }
}
