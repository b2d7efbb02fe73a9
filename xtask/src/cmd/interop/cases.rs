//! The interop cases: which program runs on each side, which side starts first and how it
//! shows it is ready, and what each side must print ([`Check`]).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::addresses::{link_local_of, HOST, HOST_FROM_GUEST, PORT};
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

/// The GID a case's programs use (`-g` of the pingpongs, `-x` of perftest), which each
/// side must have seen of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gid {
    /// GID 1, the RoCE v2 GID of the host's IPv4 address (`::ffff:10.100.0.1`).
    Ipv4,
    /// GID 0, the host's link-local IPv6 address (`fe80::aff:fe64:1`): RoCE v2 over IPv6.
    LinkLocal,
}

impl Gid {
    /// Its index in the GID table of rxe0 and of the emulated NIC.
    pub fn index(self) -> u8 {
        match self {
            Gid::Ipv4 => 1,
            Gid::LinkLocal => 0,
        }
    }

    /// What a case's name has for it (`-ll` for the link-local GID; the capture check
    /// counts the VM's frames of those cases as sent over IPv6).
    pub fn tag(self) -> &'static str {
        match self {
            Gid::Ipv4 => "",
            Gid::LinkLocal => "-ll",
        }
    }
}

/// Whether `name` is the name of a case over the link-local GID ([`Gid::tag`]).
pub fn over_ipv6(name: &str) -> bool {
    name.contains("-ll-")
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

impl Case {
    /// A case between h1 ([`HOST`], on the host outside any namespace) and the VM on
    /// QEMU's default CPU: `sides` the host's command and the VM's.
    pub fn on_h1(
        name: String,
        first: Server,
        ready: Ready,
        sides: (Vec<String>, String),
        check: Check,
        vm_frames: usize,
    ) -> Case {
        Case {
            name,
            first,
            ready,
            emulated: HOST,
            netns_ip: None,
            host: sides.0,
            vm: sides.1,
            vm_cpu: None,
            check,
            vm_frames,
        }
    }
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

/// How a case's name says which side is the server.
pub fn side_name(s: Server) -> &'static str {
    match s {
        Server::Emulated => "emulated-server",
        Server::Vm => "vm-server",
    }
}

/// rdma-core's `ibv_rc_pingpong` or `ibv_ud_pingpong`, 100 iterations of `size` bytes on
/// GID `gid`.
pub fn pingpong(tool: &str, gid: Gid, server: Server, size: u32) -> Case {
    let iters = 100;
    let args: Vec<String> = [
        "-g",
        &gid.index().to_string(),
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
    Case::on_h1(
        format!("{kind}{}-{}", gid.tag(), side_name(server)),
        server,
        Ready::Tcp,
        (host, vm),
        Check::Verbs {
            client: lines.clone(),
            server: lines,
            gid,
        },
        iters as usize * packets,
    )
}

/// perftest's `ib_send_bw` or `ib_write_bw` (RC, 200 messages of 64 KiB, GID `gid`).
pub fn bandwidth(tool: &str, gid: Gid, server: Server) -> Case {
    // -F: perftest's report needs the CPU's clock rate, which it samples against
    // gettimeofday and refuses ("Can't produce a report", exit 1) when the samples
    // correlate worse than r^2 0.9 (`sample_get_cpu_mhz`, perftest src/get_clock.c), as
    // they did once in the VM under TCG; with -F it reports anyway (the rates are then
    // not numbers; no rate is checked).
    let args: Vec<String> = [
        "-F",
        "-x",
        &gid.index().to_string(),
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
    // The client's 200 x 64 packets at MTU 1024; a server acknowledges at least once
    // a message (each message's last packet asks for it).
    Case::on_h1(
        format!("{name}{}-{}", gid.tag(), side_name(server)),
        server,
        Ready::Tcp,
        (host, vm),
        Check::Verbs {
            client: row.clone(),
            server: row,
            gid,
        },
        match server {
            Server::Emulated => 200 * 64,
            Server::Vm => 200,
        },
    )
}

/// perftest's `ib_read_lat` (RC RDMA READ of 2 bytes, 200 iterations, GID `gid`, the
/// QPs' parameters exchanged over its TCP socket): only the client prints the result row.
pub fn read_latency(gid: Gid, server: Server) -> Case {
    // -F as in [`bandwidth`] (the latency report does not refuse; the flag keeps the two
    // alike).
    let x = gid.index().to_string();
    let args: Vec<String> = ["-F", "-x", &x, "-n", "200", "-p", &PORT.to_string()]
        .map(String::from)
        .to_vec();
    let (host, vm) = both_sides("ib_read_lat", &args, server);
    // 200 READ requests from a client, 200 responses from a server.
    Case::on_h1(
        format!("read-lat{}-{}", gid.tag(), side_name(server)),
        server,
        Ready::Tcp,
        (host, vm),
        Check::Verbs {
            client: vec![(" 2       200 ".into(), "")],
            server: vec![],
            gid,
        },
        200,
    )
}

/// How rdma-core's pingpongs and perftest print the peer's GID: the pingpongs end their
/// `  remote address:` line with `GID ADDRESS` (`inet_ntop`); perftest prints `GID:` and
/// the 16 bytes in decimal on the line after its `remote address:` line
/// (`PERF_GID_FMT`, perftest src/perftest_communication.h).
pub fn gid_seen(stdout: &str, gid: Gid, peer_ip: &str) -> bool {
    let addr: Ipv6Addr = match gid {
        Gid::Ipv4 => peer_ip
            .parse::<Ipv4Addr>()
            .unwrap_or(Ipv4Addr::UNSPECIFIED)
            .to_ipv6_mapped(),
        Gid::LinkLocal => link_local_of(peer_ip)
            .parse()
            .unwrap_or(Ipv6Addr::UNSPECIFIED),
    };
    // inet_ntop writes an IPv4-mapped address with its IPv4 part dotted.
    let text = match addr.to_ipv4_mapped() {
        Some(v4) => format!("::ffff:{v4}"),
        None => addr.to_string(),
    };
    let perftest = format!("GID: {}", perftest_gid(addr.octets()));
    let lines: Vec<&str> = stdout.lines().collect();
    lines.iter().enumerate().any(|(i, l)| {
        (l.starts_with("  remote address:") && l.ends_with(&format!("GID {text}")))
            || (l.contains("remote address:")
                && lines.get(i + 1).is_some_and(|n| n.trim() == perftest))
    })
}

/// How perftest prints a GID: each byte in decimal, at least two digits
/// (`00:00:...:255:255:10:100:00:01`).
fn perftest_gid(gid: [u8; 16]) -> String {
    gid.iter()
        .map(|b| format!("{b:02}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_prints_ipv4_mapped_gids_in_decimal_bytes() {
        assert_eq!(
            perftest_gid(Ipv4Addr::new(10, 100, 0, 1).to_ipv6_mapped().octets()),
            "00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:01"
        );
        let out = " remote address: LID 0000 QPN 0x0011 PSN 0x3 OUT 0x80 RKey 0x1 VAddr 0x5\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:01\n";
        assert!(gid_seen(out, Gid::Ipv4, "10.100.0.1"));
        assert!(!gid_seen(out, Gid::Ipv4, "10.100.0.2"));
        assert!(!gid_seen(out, Gid::LinkLocal, "10.100.0.1"));
        // The VM's link-local GID fe80::aff:fe64:14 (MAC 02:00:0a:64:00:14), as perftest
        // prints it with `-x 0`.
        let out = " remote address: LID 0000 QPN 0x0011 PSN 0x3 OUT 0x80 RKey 0x1 VAddr 0x5\n GID: 254:128:00:00:00:00:00:00:00:00:10:255:254:100:00:20\n";
        assert!(gid_seen(out, Gid::LinkLocal, "10.100.0.20"));
        assert!(!gid_seen(out, Gid::LinkLocal, "10.100.0.1"));
        assert!(!gid_seen(out, Gid::Ipv4, "10.100.0.20"));
    }

    #[test]
    fn pingpong_expects_both_result_lines_and_the_gid_asked() {
        let c = pingpong("ibv_rc_pingpong", Gid::Ipv4, Server::Vm, 4096);
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
        let c = pingpong("ibv_rc_pingpong", Gid::LinkLocal, Server::Emulated, 4096);
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
        let c = pingpong("ibv_ud_pingpong", Gid::LinkLocal, Server::Vm, 1000);
        assert_eq!(c.name, "ud-ll-vm-server");
        assert!(over_ipv6(&c.name));
        assert!(c.host.windows(2).any(|w| w == ["-g", "0"]));
        assert_eq!(c.vm_frames, 100);
    }

    #[test]
    fn read_latency_checks_the_clients_row_only() {
        let c = read_latency(Gid::Ipv4, Server::Emulated);
        assert_eq!(c.name, "read-lat-emulated-server");
        let Check::Verbs { client, server, .. } = &c.check else {
            panic!("a verbs case")
        };
        assert_eq!(client.len(), 1);
        assert!(server.is_empty());
        assert_eq!(
            bandwidth("ib_write_bw", Gid::Ipv4, Server::Vm).name,
            "write-bw-vm-server"
        );
        let c = bandwidth("ib_send_bw", Gid::LinkLocal, Server::Emulated);
        assert_eq!(c.name, "send-bw-ll-emulated-server");
        assert!(c.vm.contains(" '-x' '0' "), "{}", c.vm);
        assert_eq!(c.vm_frames, 200 * 64);
        let c = read_latency(Gid::LinkLocal, Server::Vm);
        assert_eq!(c.name, "read-lat-ll-vm-server");
        assert!(c.host.windows(2).any(|w| w == ["-x", "0"]));
        assert!(over_ipv6(&c.name) && !over_ipv6("read-lat-vm-server"));
    }
}
