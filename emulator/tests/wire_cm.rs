//! The connection manager between the hosts of two fabric processes joined by VXLAN
//! (issue 24): each fabric turns its host's CM message to the other's host into a CM MAD
//! and the MAD arriving for its host into the message
//! (`emulator/src/fabric/ports/cm_bridge.rs`, `cm_sidr.rs`), and resends a lost one as
//! the kernel's CM does (`cm_resend.rs`): `rping` (RC) and `udaddy` (UD, SIDR), lossless
//! and with the ports dropping CM MADs. Root needed, as for `wire.rs`.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::fabric::{assert_udaddy_ran, start, Fabric, DEADLINE};
use common::require;
use common::spead::wait_for;
use common::wire::{count_before, Netns, TwoFabrics};

/// `rping -v -C 10` with its server on fabric A's h1 and its client on fabric B's h2:
/// both succeed and print the 10 pings' data exactly. Returns the fabrics' summaries.
fn rping_across(
    dir: &Path,
    ns: &Netns,
    a: (Fabric, PathBuf),
    b: (Fabric, PathBuf),
) -> (String, String) {
    let rping = require("rping", "rdmacm-utils");
    let stdbuf = require("stdbuf", "coreutils");
    let args = ["-v", "-C", "10", "-a", "10.100.0.1", "-p", "18600"];
    // The server's stdout line-buffered: `-d` prints `rdma_listen` as it listens.
    let mut s = a.0.program(&stdbuf, "h1");
    s.env("VERBS_EMU_TOPOLOGY", &a.1)
        .arg("-oL")
        .arg(&rping)
        .args(["-s", "-d"])
        .args(args);
    let server = start(ns.wrap(&s), dir, "rping-server");
    wait_for(&dir.join("rping-server.out"), "rdma_listen");
    let mut c = b.0.program(&rping, "h2");
    c.env("VERBS_EMU_TOPOLOGY", &b.1).arg("-c").args(args);
    let client = start(ns.wrap(&c), dir, "rping-client").finish();
    let server = server.finish();
    let (sa, sb) = (a.0.stop(), b.0.stop());
    // librdmacm/examples/rping.c: `rdma-ping-N: ` and letters from 'A' + N, 63 bytes.
    let data: Vec<String> = (0..10u8)
        .map(|n| {
            let mut t = format!("rdma-ping-{n}: ");
            let mut ch = b'A' + n;
            while t.len() < 63 {
                t.push(char::from(ch));
                ch = if ch == b'z' { b'A' } else { ch + 1 };
            }
            t
        })
        .collect();
    for (who, r, prefix) in [
        ("server", &server, "server ping data: "),
        ("client", &client, "ping data: "),
    ] {
        assert!(
            r.status.success(),
            "{who} ({}): {}{}",
            r.status,
            r.out,
            r.err
        );
        let got: Vec<&str> = r
            .out
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .collect();
        assert_eq!(got, data, "{who}: {}\n{sa}\n{sb}", r.out);
    }
    // Each fabric forwarded at least the REQ (or REP), the RTU (or REP) and the DREQ
    // its side sent or received as MADs (a DREP may find its client gone: `returned`).
    for s in [&sa, &sb] {
        let forwarded = s
            .split(" CM messages forwarded")
            .next()
            .and_then(|h| h.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok());
        assert!(forwarded.is_some_and(|n| n >= 3), "{s}");
    }
    (sa, sb)
}

/// `rping` between the hosts of two fabrics joined by VXLAN: the connection manager's
/// messages cross the tunnel as CM MADs (each fabric turns its host's message to the
/// other's host into a MAD, and the MAD arriving for its host into the message; see
/// `emulator/src/fabric/ports/cm_bridge.rs`), and 10 pings carry their data each way.
#[test]
fn rping_connects_across_two_fabrics_with_cm_mads() {
    let TwoFabrics { dir, ns, a, b } = TwoFabrics::new("wire-rping", "", "1", "");
    let (sa, sb) = rping_across(&dir, &ns, a, b);
    for s in [&sa, &sb] {
        assert_eq!(count_before(s, " timed out"), 0, "{s}");
    }
}

/// One side of a two-fabric run: the fabric, its topology, its host's name and address.
type Side<'a> = (&'a (Fabric, PathBuf), &'a str, &'a str);

/// `udaddy -C 4` (UD through the RDMA CM: SIDR) with its server on `server`'s host and
/// its client on `client`'s: both print exactly udaddy's lines of a good run. Until the
/// server listens its CM answers IB_SIDR_UNSUPPORTED (udaddy: an UNREACHABLE event of
/// error 1, status 1), and the client is started again. Returns the number of tries.
fn udaddy_across(dir: &Path, ns: &Netns, server: Side<'_>, client: Side<'_>) -> u64 {
    let udaddy = require("udaddy", "rdmacm-utils");
    let mut s = server.0 .0.program(&udaddy, server.1);
    s.env("VERBS_EMU_TOPOLOGY", &server.0 .1)
        .args(["-b", server.2, "-C", "4"]);
    let mut running = start(ns.wrap(&s), dir, "udaddy-server");
    let begin = Instant::now();
    let mut tries = 0;
    let ran = loop {
        tries += 1;
        let mut c = client.0 .0.program(&udaddy, client.1);
        c.env("VERBS_EMU_TOPOLOGY", &client.0 .1)
            .args(["-s", server.2, "-b", client.2, "-C", "4"]);
        let r = start(ns.wrap(&c), dir, &format!("udaddy-client-{tries}")).finish();
        let unsupported = r.status.code() == Some(1)
            && r.out
                .contains("udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1\n");
        if !unsupported {
            break r;
        }
        assert!(
            begin.elapsed() < DEADLINE && !running.exited(),
            "the server never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let server = running.finish();
    assert_udaddy_ran(&ran, &server);
    tries
}

/// The CM MADs a fabric's summary counts: (sent, taken in).
fn mads(s: &str) -> (u64, u64) {
    (count_before(s, " sent, "), count_before(s, " taken in"))
}

/// `udaddy` with its server on fabric A's h1 and its client on fabric B's h2: the SIDR
/// REQ and SIDR REP cross the tunnel as CM MADs (`emulator/src/fabric/ports/cm_sidr.rs`),
/// and four datagrams go each way.
#[test]
fn udaddy_resolves_across_two_fabrics_with_sidr_mads() {
    let TwoFabrics { dir, ns, a, b } = TwoFabrics::new("wire-udaddy", "", "1", "");
    let tries = udaddy_across(
        &dir,
        &ns,
        (&a, "h1", "10.100.0.1"),
        (&b, "h2", "10.100.0.2"),
    );
    let (sa, sb) = (a.0.stop(), b.0.stop());
    // B sent the SIDR REQ of every try as a MAD and A took each in; A answered each with
    // a SIDR REP MAD that B took in (at least one each per try); none was stray, none
    // timed out, and no SIDR state is left.
    let (a_out, a_in) = mads(&sa);
    let (b_out, b_in) = mads(&sb);
    assert!(b_out >= tries && a_out >= tries, "{sa}\n{sb}");
    assert_eq!((a_in, b_in), (b_out, a_out), "{sa}\n{sb}");
    for s in [&sa, &sb] {
        assert!(s.contains("lost: none;"), "{s}");
        assert_eq!(count_before(s, " timed out"), 0, "{s}");
        assert_eq!(count_before(s, " stray"), 0, "{s}");
        assert!(s.contains("CM connections live: 0;"), "{s}");
    }
}

/// `udaddy` with its client on fabric A's h1, whose port drops the first CM MAD it would
/// send (`drop_cm_mads = 1`): the SIDR REQ is lost on the tunnel, A sends it again after
/// cma.c's SIDR timeout (4096 ms, `cm_sidr.rs`), and the run completes as without loss.
#[test]
fn udaddy_completes_when_the_sidr_req_is_lost() {
    let TwoFabrics { dir, ns, a, b } =
        TwoFabrics::new("wire-udaddy-lost", "", "1", "drop_cm_mads = 1");
    let tries = udaddy_across(
        &dir,
        &ns,
        (&b, "h2", "10.100.0.2"),
        (&a, "h1", "10.100.0.1"),
    );
    let (sa, sb) = (a.0.stop(), b.0.stop());
    assert_eq!(count_before(&sa, " CM MADs dropped"), 1, "{sa}");
    let resent = count_before(&sa, " resent");
    assert!(resent >= 1, "{sa}");
    let (a_out, a_in) = mads(&sa);
    let (b_out, b_in) = mads(&sb);
    // A's MADs and resends less the one its port dropped reached B.
    assert_eq!((b_in, a_in), (a_out + resent - 1, b_out), "{sa}\n{sb}");
    assert!(b_out >= tries, "{sb}");
    for s in [&sa, &sb] {
        assert_eq!(count_before(s, " timed out"), 0, "{s}");
        assert_eq!(count_before(s, " stray"), 0, "{s}");
        assert!(s.contains("CM connections live: 0;"), "{s}");
    }
}

/// `udaddy`'s SIDR REQ to fabric A's h1, where no process runs: A answers as the kernel's
/// CM of a host without the listener (a SIDR REP of IB_SIDR_UNSUPPORTED,
/// `remote_cm.rs` `answer_remote`) and the client ends at once with udaddy's UNREACHABLE
/// line of error 1, its SIDR REQ never sent again.
#[test]
fn a_sidr_req_for_a_host_without_a_process_gets_sidr_unsupported() {
    let TwoFabrics { dir, ns, a, b } = TwoFabrics::new("wire-udaddy-nobody", "", "1", "");
    let udaddy = require("udaddy", "rdmacm-utils");
    let mut c = b.0.program(&udaddy, "h2");
    c.env("VERBS_EMU_TOPOLOGY", &b.1)
        .args(["-s", "10.100.0.1", "-b", "10.100.0.2", "-C", "1"]);
    let r = start(ns.wrap(&c), &dir, "udaddy-client").finish();
    let (sa, sb) = (a.0.stop(), b.0.stop());
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    assert_eq!(
        r.out,
        "udaddy: starting client\nudaddy: connecting\n\
         udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1\ntest complete\n\
         return status 1\n"
    );
    // A took the SIDR REQ in, returned it (no process) and sent the SIDR REP; B sent
    // the one SIDR REQ and took the SIDR REP in.
    assert_eq!(mads(&sa), (1, 1), "{sa}");
    assert_eq!(mads(&sb), (1, 1), "{sb}");
    assert_eq!(count_before(&sa, " returned"), 1, "{sa}");
    for s in [&sa, &sb] {
        assert_eq!(count_before(s, " resent"), 0, "{s}");
        assert_eq!(count_before(s, " timed out"), 0, "{s}");
        assert!(s.contains("CM connections live: 0;"), "{s}");
    }
}

/// The same `rping` over ports that each drop the first CM MAD they would send (the
/// ports' `drop_cm_mads = 1`): B's REQ and A's REP are lost on the tunnel, each fabric
/// sends its MAD again after the kernel CM's timeout for it (`cm_resend.rs`: 6.1 s for
/// the REQ, 4.1 s for the REP), and the pings complete exactly as without loss.
#[test]
fn rping_completes_when_the_ports_lose_cm_mads() {
    let TwoFabrics { dir, ns, a, b } =
        TwoFabrics::new("wire-rping-lost", "drop_cm_mads = 1", "1", "");
    let (sa, sb) = rping_across(&dir, &ns, a, b);
    for s in [&sa, &sb] {
        assert_eq!(count_before(s, " CM MADs dropped"), 1, "{s}");
        // Only the resend of the lost MAD reaches the other side.
        assert!(count_before(s, " resent") >= 1, "{s}");
        assert_eq!(count_before(s, " timed out"), 0, "{s}");
    }
}
