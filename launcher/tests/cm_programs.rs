//! Programs of the wider world that connect through the connection manager (the emulated
//! librdmacm), unmodified, between two launched hosts: perftest with `-R`, qperf's RC
//! tests with `-cm1`, and libfabric's verbs MSG endpoints, which its `fi_pingpong`
//! cannot use on RoCE (a clean refusal). Each server
//! runs on h1, its client on h2 naming 10.100.0.1; every launcher must end by itself
//! (the hang watch of `common/hang.rs`).

mod common;

use common::*;

/// Runs perftest `args` with `-R` as server on h1 and client on h2. With `-R` the server
/// listens through the connection manager, not on a TCP port, so the test waits for the
/// banner it prints just before it listens (its output line-buffered with `stdbuf -oL`)
/// and then starts the client. A client that comes in the moment between the banner and
/// the listen is rejected, as the kernel's CM rejects a REQ for a service nobody listens
/// on (`Unexpected CM event bl blka 8`: RDMA_CM_EVENT_REJECTED, exit status 1; perftest
/// does not retry its first connection), and is started again, at most 100 times.
fn perftest_cm_pair(f: &str, args: &[&str]) -> (Ran, Ran) {
    use std::io::BufRead;
    let stdbuf = require("stdbuf", "coreutils");
    let stdbuf = stdbuf.to_str().expect("a UTF-8 path");
    let mut server = start(
        run(f, "h1", &[&[stdbuf, "-oL"][..], args].concat()),
        "start the server",
    );
    let out = server.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if line.contains("* Waiting for client to connect... *") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    assert!(
        rx.recv_timeout(HANG).is_ok(),
        "the server never got ready: {}",
        rest_of_stderr(&mut server)
    );
    let client_args = [args, &["10.100.0.1"]].concat();
    let mut tries = 0;
    let c = loop {
        tries += 1;
        let c = finish_or_kill(
            start(run(f, "h2", &client_args), "start the client"),
            "the client",
        );
        let rejected =
            c.status.code() == Some(1) && c.err.contains("Unexpected CM event bl blka 8");
        if !rejected || tries == 100 {
            break c;
        }
    };
    // A failed client fails the test at once (its server, which may wait for it for
    // ever, then gets SIGTERM from the Reaper).
    assert!(c.status.success(), "client ({tries} tries): {c:?}");
    let s = finish_or_kill(server, "the server");
    let s = Ran {
        out: reader.join().expect("the server's output"),
        ..s
    };
    assert!(s.status.success(), "server: {s:?}\nclient: {c:?}");
    (s, c)
}

/// perftest (Debian's `perftest`, 4.5-0.17) through the connection manager (`-R`: the
/// handshake's connection and the measured QP's both made with rdma_cm) between two
/// launched hosts, on GID 0 (`-x 0`, the link-local GID: RoCE v1 on mlx5) and GID 1
/// (`-x 1`, RoCE v2 over IPv4): `ib_send_bw`, `ib_write_bw` (100 iterations of 64 KiB)
/// and `ib_read_lat` (100 iterations of 2 bytes). Each side shows the GID index asked,
/// the two GIDs of that index (its own and its peer's) and its result row (for
/// `ib_read_lat`, the client only: its server shows none), with 100 iterations.
///
/// The server listens for the measured QP's connection only once the send of its last
/// handshake message has completed, and the client connects as soon as it has that
/// message: the connection manager holds the client's REQ as far behind the client's
/// frames (the ACK) as the client sent it after them, counted from the server's first CQ
/// poll that returned completions after the ACK came, so the server is listening by then
/// (without that, the two arrived together on a loaded machine, the REQ was rejected,
/// and perftest 4.5-0.17's retry crashed its client and left its server waiting for
/// ever). On a loaded machine it can still lose that race, as on a real one: see the
/// launcher's README.
#[test]
fn perftest_through_the_connection_manager_on_both_gids() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ib_send_bw", "perftest");
    let f = fabric("perftest-cm");
    let gids = [
        (
            "0",
            "254:128:00:00:00:00:00:00:00:00:10:255:254:100:00:01",
            "254:128:00:00:00:00:00:00:00:00:10:255:254:100:00:02",
        ),
        (
            "1",
            "00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:01",
            "00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:02",
        ),
    ];
    for (x, gid1, gid2) in gids {
        for (prog, bytes) in [
            ("ib_send_bw", "65536"),
            ("ib_write_bw", "65536"),
            ("ib_read_lat", "2"),
        ] {
            let mut args = vec![prog, "-d", "mlx5_0", "-R", "-x", x, "-n", "100", "-F"];
            if prog == "ib_read_lat" {
                args.extend_from_slice(&["-s", "2"]);
            }
            let (s, c) = perftest_cm_pair(&f, &args);
            for (who, r) in [("server", &s), ("client", &c)] {
                let what = format!("{prog} -x {x} {who}");
                assert!(
                    r.out.contains(&format!(" GID index       : {x}\n")),
                    "{what}: {}",
                    r.out
                );
                let mut shown: Vec<&str> = r
                    .out
                    .lines()
                    .filter_map(|l| l.trim().strip_prefix("GID: "))
                    .collect();
                shown.sort_unstable();
                let mut want = vec![gid1, gid2];
                want.sort_unstable();
                assert_eq!(shown, want, "{what}: {}", r.out);
                if prog == "ib_read_lat" && who == "server" {
                    continue; // the latency is measured and shown by the client only
                }
                let row: Vec<&str> = r
                    .out
                    .lines()
                    .map(|l| l.split_whitespace().collect::<Vec<&str>>())
                    .find(|w| w.len() > 3 && w[0] == bytes && w[1] == "100")
                    .unwrap_or_else(|| panic!("{what}: no result row: {}", r.out));
                let n: f64 = row[3]
                    .parse()
                    .unwrap_or_else(|_| panic!("{what}: not a number: {row:?}"));
                assert!(n > 0.0, "{what}: {row:?}");
            }
            wait_fabric_gone(&f);
        }
    }
}

/// The `name = value` rows of qperf's verbose output for test `test` (values with their
/// units, thousands separators removed).
fn qperf_rows(out: &str, test: &str) -> std::collections::HashMap<String, String> {
    let start = out
        .find(&format!("{test}:\n"))
        .unwrap_or_else(|| panic!("no {test} in:\n{out}"));
    out[start + test.len() + 2..]
        .lines()
        .take_while(|l| l.starts_with(' '))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().replace(',', "")))
        .collect()
}

/// A positive number at the start of `v` (qperf's "86.4 MB/sec").
fn positive(v: &str) -> f64 {
    let n: f64 = v
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a number: {v:?}"));
    assert!(n > 0.0, "{v}");
    n
}

/// qperf (Debian's `qperf`, 0.4.11): its server on h1, two clients on h2 naming
/// 10.100.0.1, each through the connection manager (`-cm1`): `rc_bw` of 1000 messages
/// of 64 KiB (both sides count 1000 messages and 65.5 MB), then `rc_rdma_write_bw` and
/// `rc_lat` for a second each (`-n` is not used by those two: qperf ends them by time),
/// then `quit`, which ends the server. qperf's own timeout is raised to 20 s (`-to`, what
/// a user gives on a loaded machine: its default of 5 s bounds each exchange of its
/// sync phase); nothing here measures speed.
///
/// `rc_lat` waits for completions in `ibv_get_cq_event`, and each side stops when its own
/// timer's SIGALRM (an interval timer, handler without `SA_RESTART`) interrupts that
/// wait with EINTR, as libibverbs' `read` returns it. The emulated library once retried
/// the read: the side whose peer had stopped first (on a loaded machine) waited for
/// ever, its server timed out on the synchronization after the test, and the server
/// never got its `quit`. A failing client fails the test before it waits for the
/// server, which then gets SIGTERM ([`Reaper`]).
#[test]
fn qperf_rc_tests_through_the_connection_manager() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let prog = require("qperf", "qperf");
    let prog = prog.to_str().expect("a UTF-8 path");
    let f = fabric("qperf-rc");
    let mut server = start(run(&f, "h1", &[prog]), "start the server");
    wait_listening(&mut server, 19765);
    let base = [prog, "10.100.0.1", "-cm1", "-to", "20", "-vv"];
    let bw = qperf_client(&f, &[&base[..], &["-n", "1000", "rc_bw"]].concat(), "rc_bw");
    let rows = qperf_rows(&bw.out, "rc_bw");
    positive(&rows["bw"]);
    for (k, v) in [
        ("no_msgs", "1000"),
        ("send_msgs", "1000"),
        ("recv_msgs", "1000"),
        ("msg_size", "64 KiB (65536)"),
        ("send_bytes", "65.5 MB"),
        ("recv_bytes", "65.5 MB"),
        ("use_cm", "1"),
    ] {
        assert_eq!(rows[k], v, "rc_bw {k}: {}", bw.out);
    }
    let more = qperf_client(
        &f,
        &[
            &base[..],
            &["-t", "1", "rc_rdma_write_bw", "rc_lat", "quit"],
        ]
        .concat(),
        "rc_rdma_write_bw, rc_lat",
    );
    let server = finish_or_kill(server, "the server");
    assert!(server.status.success(), "server: {server:?}");
    let w = qperf_rows(&more.out, "rc_rdma_write_bw");
    positive(&w["bw"]);
    positive(&w["send_msgs"]);
    assert_eq!(w["use_cm"], "1", "{}", more.out);
    let l = qperf_rows(&more.out, "rc_lat");
    positive(&l["latency"]);
    // A ping-pong: each side received what the other sent, but for the one message in
    // flight when its time ran out (each side stops by its own timer).
    let n = |k: &str| -> u64 { l[k].parse().unwrap_or_else(|_| panic!("{k}: {}", l[k])) };
    for (sent, received) in [
        ("loc_send_msgs", "rem_recv_msgs"),
        ("rem_send_msgs", "loc_recv_msgs"),
    ] {
        let (s, r) = (n(sent), n(received));
        assert!(
            s > 0 && (s == r || s == r + 1),
            "{sent} {s}, {received} {r}: {}",
            more.out
        );
    }
    assert!(more.out.ends_with("quit:\n"), "{}", more.out);
    wait_fabric_gone(&f);
}

/// libfabric's verbs provider (Debian's 1.17), MSG endpoints: `fi_pingpong -p verbs -e
/// msg`. fi_pingpong's server asks `fi_getinfo` with no node, service or address
/// (util/pingpong.c:1486), and the provider then binds its passive endpoint to
/// "localhost" (prov/verbs/src/fi_verbs.c:120-122, `node = local_node`; line 43:
/// `local_node = "localhost"`): `rdma_bind_addr` on 127.0.0.1 (fi_verbs.c:284) fails with
/// ENODEV, as the kernel's does on RoCE (no GID of the device holds a loopback address:
/// cma.c `cma_acquire_dev_by_src_ip`), so the provider offers no MSG endpoint to the
/// server: the provider's own rule, the same on a real mlx5 or rxe port. The refusal is
/// clean: the server, which accepted the client's control connection first, exits at
/// once with status 61 (ENODATA) and says only `fi_getinfo(): ... ret=-61 (No data
/// available)` on stderr; the client, its control connection closed, exits with status 103
/// (ECONNABORTED); nothing hangs.
#[test]
fn libfabric_msg_endpoints_are_refused_cleanly() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let prog = require("fi_pingpong", "libfabric-bin");
    let prog = prog.to_str().expect("a UTF-8 path");
    let f = fabric("fi-msg");
    let args = [prog, "-p", "verbs", "-e", "msg"];
    let mut server = start(run(&f, "h1", &args), "start the server");
    wait_listening(&mut server, 47592);
    let client = start(
        run(&f, "h2", &[&args[..], &["10.100.0.1"]].concat()),
        "start the client",
    );
    let c = finish_or_kill(client, "the client");
    let s = finish_or_kill(server, "the server");
    assert_eq!(s.status.code(), Some(61), "server: {s:?}\nclient: {c:?}");
    assert_eq!(
        s.err.trim(),
        "fi_getinfo(): util/pingpong.c:1489, ret=-61 (No data available)",
        "{s:?}"
    );
    assert_eq!(c.status.code(), Some(103), "client: {c:?}\nserver: {s:?}");
    assert!(
        c.err
            .contains("ctrl/read: no data or remote connection closed"),
        "{c:?}"
    );
    wait_fabric_gone(&f);
}
