//! The interop cases through the RDMA CM: `rping`, perftest's `ib_read_lat -R` and
//! `udaddy` (UD, by SIDR), whose connection manager MADs the fabric translates
//! (emulator/src/fabric/ports/cm_bridge.rs, cm_sidr.rs),
//! and how the VM's side shows that its server listens.

use super::addresses::{link_local_of, HOST_IP, PORT, VM_IP};
use super::cases::{side_name, Case, Check, Gid, Ready, Server};
use crate::vm;

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

/// The scope id the emulated side gives a link-local address (`%1`): the emulated
/// host's rdma_cm takes any non-zero scope id as its one port's interface (see
/// docs/divergences.md row 103).
pub const EMULATED_SCOPE: &str = "1";

/// The VM's shell text for the interface of rxe0's port (its netdev, `gid_attrs/ndevs`
/// of the kernel's sysfs), the scope of its link-local addresses.
pub const VM_SCOPE: &str = "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0)";

/// The server's address as the host's side and as the VM's side give it: over
/// [`Gid::Ipv4`] its IPv4 address, over [`Gid::LinkLocal`] its link-local address with the scope of the side's own interface (`fe80::aff:fe64:1%1`,
/// `fe80::aff:fe64:1%$(cat ...)`: getaddrinfo gives it as `sin6_scope_id`, which the
/// kernel's rdma_cm requires of a link-local address, `cma_check_linklocal`).
fn server_address(gid: Gid, server: Server) -> (String, String) {
    let ip = match server {
        Server::Emulated => HOST_IP,
        Server::Vm => VM_IP,
    };
    match gid {
        Gid::Ipv4 => (ip.to_owned(), ip.to_owned()),
        Gid::LinkLocal => {
            let ll = link_local_of(ip);
            (format!("{ll}%{EMULATED_SCOPE}"), format!("{ll}%{VM_SCOPE}"))
        }
    }
}

/// rdma-core's `rping` (RC, SEND, RDMA READ and WRITE through the RDMA CM, 10 pings) to
/// the server's address of `gid`'s kind: the connection manager's MADs cross between the
/// VM's kernel and the fabric (see emulator/src/fabric/ports/cm_bridge.rs). An emulated
/// server prints `rdma_listen` (`-d`, its stdout line-buffered) just before it listens,
/// which the VM's boot of seconds follows; the VM's server is ready when its kernel lists
/// it listening.
pub fn rping(gid: Gid, server: Server) -> Case {
    let count = 10;
    let (on_host, on_vm) = server_address(gid, server);
    let common = |a: &str| format!("-v -C {count} -a {a} -p {PORT}");
    let split = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
    let (host, vm, ready) = match server {
        Server::Emulated => (
            split(&format!("stdbuf -oL rping -s -d {}", common(&on_host))),
            format!("rping -c {}", common(&on_vm)),
            "rdma_listen",
        ),
        Server::Vm => (
            split(&format!("rping -c {}", common(&on_host))),
            listening_in_vm(&format!("rping -s {}", common(&on_vm))),
            CM_LISTENING,
        ),
    };
    let data = rping_data(count);
    // Each ping: the client's two SENDs; the server's RDMA READ request, WRITE and
    // two SENDs.
    Case::on_h1(
        format!("rping{}-{}", gid.tag(), side_name(server)),
        server,
        Ready::Line(ready.into()),
        (host, vm),
        Check::Lines {
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
        2 * count,
    )
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
    // 200 READ requests from a client, 200 responses from a server.
    Case::on_h1(
        format!("read-lat-cm-{}", side_name(server)),
        server,
        Ready::Line(ready.into()),
        (host, vm),
        Check::Verbs {
            client: vec![(" 2       200 ".into(), "")],
            server: vec![],
            gid: Gid::Ipv4,
        },
        200,
    )
}

/// perftest's `ib_send_lat -c UD -R` with the server on h1: the UD QPs' numbers and Q_Keys
/// exchanged by SIDR through the RDMA CM (emulator/src/fabric/ports/cm_sidr.rs), then 200
/// SENDs of 2 bytes each way (both sides print the result line). An emulated server prints its `Waiting for client to
/// connect` banner (stdout line-buffered) just before it listens.
pub fn send_latency_ud_cm() -> Case {
    let args = format!("-F -R -c UD -x 1 -n 200 -p {PORT}");
    let split = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
    Case::on_h1(
        "send-lat-ud-cm-emulated-server".into(),
        Server::Emulated,
        Ready::Line("Waiting for client to connect".into()),
        (
            split(&format!("stdbuf -oL ib_send_lat {args}")),
            format!("ib_send_lat -d {} {args} {HOST_IP}", vm::RXE_DEVICE),
        ),
        Check::Verbs {
            client: vec![(" 2       200 ".into(), "")],
            server: vec![(" 2       200 ".into(), "")],
            gid: Gid::Ipv4,
        },
        200,
    )
}

/// The lines `udaddy -C 4` prints (librdmacm/examples/udaddy.c) as the client and as the
/// server, in order.
pub fn udaddy_lines() -> (Vec<String>, Vec<String>) {
    let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let end = [
        "data transfers complete",
        "test complete",
        "return status 0",
    ];
    let client = [
        &[
            "udaddy: starting client",
            "udaddy: connecting",
            "initiating data transfers",
            "receiving data transfers",
        ][..],
        &end,
    ]
    .concat();
    let server = [
        &[
            "udaddy: starting server",
            "receiving data transfers",
            "sending replies",
        ][..],
        &end,
    ]
    .concat();
    (v(&client), v(&server))
}

/// librdmacm-utils' `udaddy -C 4` to the server's address of `gid`'s kind (UD through the
/// RDMA CM: the client's SIDR REQ and the server's SIDR REP cross between the VM's kernel
/// and the fabric, over IPv6 between link-local addresses, see
/// emulator/src/fabric/ports/cm_sidr.rs; then four datagrams each way to the QP number
/// and Q_Key of the SIDR REP). Both sides' stdout is line-buffered (`stdbuf -oL`) so the
/// lines come in order; an emulated server's `udaddy: starting server` comes just before
/// it listens, which the VM's boot of seconds follows; the VM's server is ready when its
/// kernel lists it listening (its [`CM_LISTENING`] line, after `udaddy: starting
/// server`, is among the lines checked). The server binds the address the client is
/// given (`-b`); the client binds none.
pub fn udaddy(gid: Gid, server: Server) -> Case {
    let (client_lines, mut server_lines) = udaddy_lines();
    let (on_host, on_vm) = server_address(gid, server);
    let split = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
    let tool = "stdbuf -oL udaddy -C 4";
    let (host, vm, ready) = match server {
        Server::Emulated => (
            split(&format!("{tool} -b {on_host}")),
            format!("{tool} -s {on_vm}"),
            "udaddy: starting server",
        ),
        Server::Vm => {
            server_lines.insert(1, CM_LISTENING.to_owned());
            (
                split(&format!("{tool} -s {on_host}")),
                listening_in_vm(&format!("{tool} -b {on_vm}")),
                CM_LISTENING,
            )
        }
    };
    // Four datagrams from the VM, and its SIDR REQ or SIDR REP.
    Case::on_h1(
        format!("udaddy{}-{}", gid.tag(), side_name(server)),
        server,
        Ready::Line(ready.into()),
        (host, vm),
        Check::Lines {
            client: ("", client_lines),
            server: ("", server_lines),
        },
        5,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The VM's wrapper is valid shell, waits for a listening id and keeps the exit code
    /// (run here with a stand-in `rdma` that reports a listener).
    #[test]
    fn the_vms_listening_wrapper_waits_and_keeps_the_exit_code() {
        // A fake `rdma` that lists a listening id only once the server made `listening`:
        // the marker comes after that, whenever the shells run (no order of the two
        // programs' lines is asserted, since both print after it). A server that ends
        // without listening ends the wait too, its exit code kept.
        let dir = std::env::temp_dir().join(format!("interop-listen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rdma = dir.join("rdma");
        let flag = dir.join("listening");
        let log = dir.join("marker-after-listening");
        std::fs::write(
            &rdma,
            format!(
                "#!/bin/sh\n[ -e {f} ] && echo 'link rxe0/1 state LISTEN ps TCP'\nexit 0\n",
                f = flag.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&rdma, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let run = |server: &str| {
            // After the wrapper's marker: whether the flag existed when it was printed.
            let check = format!(
                "; if [ -e {f} ]; then echo yes > {l}; else echo no > {l}; fi",
                f = flag.display(),
                l = log.display()
            );
            let script = listening_in_vm(server).replace("; wait $P", &format!("{check}; wait $P"));
            let out = std::process::Command::new("sh")
                .args(["-c", &script])
                .env("PATH", &path)
                .output()
                .unwrap();
            let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(String::from)
                .collect();
            lines.sort();
            (
                out.status.code(),
                lines,
                std::fs::read_to_string(&log).unwrap(),
            )
        };
        // The server listens after 0.2 s, then serves until the marker was printed.
        let listens = format!(
            "sh -c 'sleep 0.2; touch {f}; echo served; exit 3'",
            f = flag.display()
        );
        let (code, lines, seen) = run(&listens);
        assert_eq!(code, Some(3));
        assert_eq!(lines, [CM_LISTENING.to_owned(), "served".to_owned()]);
        assert_eq!(seen, "yes\n");
        std::fs::remove_file(&flag).unwrap();
        // A server that fails at once: the marker (the wait is over), its code.
        let (code, lines, seen) = run("sh -c 'exit 5'");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(code, Some(5));
        assert_eq!(lines, [CM_LISTENING.to_owned()]);
        assert_eq!(seen, "no\n");
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
        let c = rping(Gid::Ipv4, Server::Emulated);
        assert_eq!(c.name, "rping-emulated-server");
        assert_eq!(
            c.host.join(" "),
            "stdbuf -oL rping -s -d -v -C 10 -a 10.100.0.1 -p 18600"
        );
        assert_eq!(c.vm, "rping -c -v -C 10 -a 10.100.0.1 -p 18600");
        assert_eq!(c.ready, Ready::Line("rdma_listen".into()));
        let c = rping(Gid::Ipv4, Server::Vm);
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
        let c = rping(Gid::LinkLocal, Server::Emulated);
        assert_eq!(c.name, "rping-ll-emulated-server");
        assert_eq!(
            c.host.join(" "),
            "stdbuf -oL rping -s -d -v -C 10 -a fe80::aff:fe64:1%1 -p 18600"
        );
        assert_eq!(
            c.vm,
            format!("rping -c -v -C 10 -a fe80::aff:fe64:1%{VM_SCOPE} -p 18600")
        );
        let c = rping(Gid::LinkLocal, Server::Vm);
        assert_eq!(c.name, "rping-ll-vm-server");
        assert_eq!(
            c.host.join(" "),
            "rping -c -v -C 10 -a fe80::aff:fe64:14%1 -p 18600"
        );
        assert!(
            c.vm.contains("rping -s -v -C 10 -a fe80::aff:fe64:14%$(cat /sys/class/"),
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
}
