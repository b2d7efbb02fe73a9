//! A sweep of rdma-core's, perftest's and infiniband-diags' programs in the variants a user
//! tries, started as a user starts them (`verbs-emu run`, server on h1, client on h2
//! naming 10.100.0.1), on both personalities (the default topology's mlx5 and a
//! topology of rxe hosts) and both GIDs: the result rows are parsed and counted, every
//! launcher must end (see [`HANG`]), and what a device lacks fails the way it fails on
//! rxe. A representative subset of what was run by hand (launcher/README.md, Tests).

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

/// perftest's and the pingpongs' TCP port.
const PORT: u16 = 18515;

/// A topology file of four rxe hosts (h1 .. h4 at 10.100.0.1 .. 10.100.0.4), written
/// once into the build's temporary folder.
fn rxe_topology() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sweep-rxe.toml");
    let text: String = (1..=4)
        .map(|i| {
            format!("[[host]]\nname = \"h{i}\"\nip = \"10.100.0.{i}\"\npersonality = \"rxe\"\n")
        })
        .collect();
    std::fs::write(&path, text).expect("write the rxe topology");
    path
}

/// The two personalities: (device name, launcher options).
fn personalities() -> [(&'static str, Vec<String>); 2] {
    let rxe = rxe_topology().to_string_lossy().into_owned();
    [
        ("mlx5_0", Vec::new()),
        ("rxe0", vec!["--topology".to_owned(), rxe]),
    ]
}

/// `two_hosts` with launcher options (each run of a fabric gives the same ones).
fn pair(f: &str, options: &[String], server: &[&str], client: &[&str]) -> (Ran, Ran) {
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let mut s = start(run_with(f, "h1", &options, server), "start the server");
    wait_listening(&mut s, PORT);
    let c = start(run_with(f, "h2", &options, client), "start the client");
    let c = finish_or_kill(c, "the client");
    let s = finish_or_kill(s, "the server");
    assert!(c.status.success(), "client: {c:?}\nserver: {s:?}");
    assert!(s.status.success(), "server: {s:?}\nclient: {c:?}");
    (s, c)
}

/// `program -d DEV ARGS` as server on a new fabric's h1 and with h1's address as client
/// on h2 ([`pair`]): the fabric (named `TAG-PROGRAM-DEV`), both runs, and what ran, for
/// the messages.
fn program_pair(
    tag: &str,
    dev: &str,
    options: &[String],
    program: &str,
    args: &[&str],
) -> (String, Ran, Ran, String) {
    let f = fabric(&format!("{tag}-{program}-{dev}"));
    let mut server = vec![program, "-d", dev];
    server.extend_from_slice(args);
    let mut client = server.clone();
    client.push("10.100.0.1");
    let (s, c) = pair(&f, options, &server, &client);
    (f, s, c, format!("{program} {args:?} on {dev}"))
}

#[test]
fn perftest_variants_on_both_personalities_and_gids() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ib_send_bw", "perftest");
    // (program, its options, the client's rows: (#bytes, #iterations)).
    let cases: [(&str, &[&str], (u64, u64)); 6] = [
        // UD, GID 0 (RoCE v1 on mlx5, v2 on rxe), events.
        (
            "ib_send_bw",
            &["-c", "UD", "-x", "0", "-s", "1024", "-e", "-n", "50"],
            (1024, 50),
        ),
        // UC, bidirectional.
        (
            "ib_write_bw",
            &["-c", "UC", "-b", "-x", "1", "-s", "4096", "-n", "50"],
            (4096, 50),
        ),
        // Two QPs of reads, 64 KiB each: 2 x 50 iterations.
        (
            "ib_read_bw",
            &["-q", "2", "-x", "1", "-s", "65536", "-n", "50"],
            (65536, 100),
        ),
        ("ib_atomic_bw", &["-x", "0", "-n", "50"], (8, 50)),
        // Events, inline.
        (
            "ib_send_lat",
            &["-e", "-x", "1", "-I", "64", "-s", "64", "-n", "20"],
            (64, 20),
        ),
        (
            "ib_read_lat",
            &["-x", "0", "-s", "8192", "-n", "20"],
            (8192, 20),
        ),
    ];
    for (dev, options) in personalities() {
        for (program, args, want) in cases {
            let (f, s, c, what) = program_pair("pt", dev, &options, program, args);
            assert_eq!(
                perftest_rows(&c.out),
                [want],
                "{what}: {c:?}\nserver: {s:?}"
            );
            if program.starts_with("ib_read") {
                // perftest keeps max_qp_rd_atom reads outstanding: 16 on ConnectX (1 <<
                // log_max_ra_res_qp), 128 on rxe (rxe_param.h).
                let depth = if dev == "rxe0" { 128 } else { 16 };
                let line = format!("Outstand reads  : {depth}");
                assert!(c.out.lines().any(|l| l.trim() == line), "{what}: {c:?}");
            }
            if program.starts_with("ib_send") {
                // A send's server prints its row too (an RDMA one's has none).
                assert_eq!(perftest_rows(&s.out), [want], "{what} (server): {s:?}");
            }
            wait_fabric_gone(&f);
        }
    }
}

/// A perftest program, its options, and the client's rows: (#bytes, #iterations).
type Case<'a> = (&'a str, &'a [&'a str], Vec<(u64, u64)>);

/// READs of every size up to 8 MiB and on four QPs (issue 22): an 8 MiB READ is 2048
/// responses, which the responder sends as the link takes them; with 16 (mlx5) or 20
/// (rxe, `-n 20` caps perftest's depth) of them outstanding, and on a loaded machine
/// whose processes are not always scheduled, every size completes: a row per size with
/// its iterations, both ends exit 0.
#[test]
fn large_reads_on_both_personalities() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ib_read_bw", "perftest");
    // 2, 4, ..., 8388608 bytes, 20 iterations each.
    let every_size: Vec<(u64, u64)> = (1..=23).map(|k| (1u64 << k, 20)).collect();
    let cases: [Case<'_>; 3] = [
        (
            "ib_read_bw",
            &["-x", "1", "-a", "-n", "20"],
            every_size.clone(),
        ),
        // Four QPs of 64 KiB reads (perftest's default size): 4 x 100 iterations.
        (
            "ib_read_bw",
            &["-x", "1", "-q", "4", "-n", "100"],
            vec![(65536, 400)],
        ),
        ("ib_read_lat", &["-x", "1", "-a", "-n", "20"], every_size),
    ];
    for (dev, options) in personalities() {
        for (program, args, want) in &cases {
            let (f, s, c, what) = program_pair("reads", dev, &options, program, args);
            assert_eq!(&perftest_rows(&c.out), want, "{what}: {c:?}\nserver: {s:?}");
            wait_fabric_gone(&f);
        }
    }
}

/// `ibv_devinfo -v`'s receive-side scaling lines: the emulated mlx5 reports what the
/// kernel's `mlx5_ib_query_device` fills in (docs/divergences.md, row 110), rxe none.
#[test]
fn devinfo_shows_rss_caps_on_mlx5_and_none_on_rxe() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ibv_devinfo", "ibverbs-utils");
    let mlx5: &[&str] = &[
        "rss_caps:",
        "max_rwq_indirection_tables: 524288",
        "max_rwq_indirection_table_size: 2048",
        "rx_hash_function: 0x1",
        "rx_hash_fields_mask: 0x800000FF",
        "supported_qp:",
        "SUPPORT_RAW_PACKET",
        "max_wq_type_rq: 8388608",
    ];
    let rxe: &[&str] = &[
        "rss_caps:",
        "max_rwq_indirection_tables: 0",
        "max_rwq_indirection_table_size: 0",
        "rx_hash_function: 0x0",
        "rx_hash_fields_mask: 0x0",
        "max_wq_type_rq: 0",
    ];
    for ((dev, options), want) in personalities().into_iter().zip([mlx5, rxe]) {
        let f = fabric("devinfo");
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let args = ["ibv_devinfo", "-v", "-d", dev];
        let r = finish_or_kill(start(run_with(&f, "h1", &options, &args), "start"), "it");
        assert!(r.status.success(), "{r:?}");
        let lines: Vec<String> = r
            .out
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .skip_while(|l| l != "rss_caps:")
            .take(want.len())
            .collect();
        assert_eq!(lines, want, "{dev}: {r:?}");
        wait_fabric_gone(&f);
    }
}

/// The `N bytes in S seconds` and `N iters in S seconds` lines of a pingpong: (bytes,
/// iterations).
fn pingpong_totals(out: &str) -> Option<(u64, u64)> {
    let first = |suffix: &str| {
        out.lines().find_map(|l| {
            let (n, rest) = l.split_once(' ')?;
            rest.starts_with(suffix).then(|| n.parse().ok()).flatten()
        })
    };
    Some((first("bytes in ")?, first("iters in ")?))
}

#[test]
fn pingpongs_on_both_personalities() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ibv_uc_pingpong", "ibverbs-utils");
    // (program, options, bytes and iterations each side reports). The byte count is
    // size x iterations x 2 (both directions), as the pingpongs print it.
    let cases: [(&str, &[&str], (u64, u64)); 4] = [
        (
            "ibv_uc_pingpong",
            &["-g", "0", "-e", "-s", "1024", "-n", "20"],
            (40960, 20),
        ),
        (
            "ibv_ud_pingpong",
            &["-g", "1", "-s", "512", "-n", "20"],
            (20480, 20),
        ),
        // Four QPs on one SRQ.
        (
            "ibv_srq_pingpong",
            &["-g", "1", "-q", "4", "-s", "2048", "-n", "10"],
            (40960, 10),
        ),
        // Four pages of a message, contiguous-page registration.
        (
            "ibv_rc_pingpong",
            &["-g", "0", "-c", "-s", "16384", "-n", "10"],
            (327680, 10),
        ),
    ];
    for (dev, options) in personalities() {
        for (program, args, want) in cases {
            let (f, s, c, what) = program_pair("pp", dev, &options, program, args);
            assert_eq!(pingpong_totals(&c.out), Some(want), "{what}: {c:?}");
            assert_eq!(pingpong_totals(&s.out), Some(want), "{what}: {s:?}");
            wait_fabric_gone(&f);
        }
    }
}

#[test]
fn what_rxe_lacks_fails_as_on_rxe() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ibv_xsrq_pingpong", "ibverbs-utils");
    let (_, options) = personalities().into_iter().nth(1).expect("rxe");
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    // rxe has no XRC domain (providers/rxe has no open_xrcd: libibverbs' EOPNOTSUPP), no
    // completion timestamps (no completion_timestamp_mask) and no device memory
    // (max_dm_size 0): each program stops before it connects, with exit status 1.
    let cases: [(&[&str], &str); 3] = [
        (
            &["ibv_xsrq_pingpong", "-d", "rxe0", "-g", "1"],
            "Couldn't Open the XRC Domain 95",
        ),
        (
            &["ibv_rc_pingpong", "-d", "rxe0", "-g", "1", "-t"],
            "The device isn't completion timestamp capable",
        ),
        (
            &["ibv_rc_pingpong", "-d", "rxe0", "-g", "1", "-j"],
            "Device doesn't support dm allocation",
        ),
    ];
    for (args, message) in cases {
        let f = fabric("lacks");
        let r = finish_or_kill(start(run_with(&f, "h1", &options, args), "start"), "it");
        assert_eq!(r.status.code(), Some(1), "{args:?}: {r:?}");
        assert!(r.err.lines().any(|l| l == message), "{args:?}: {r:?}");
        wait_fabric_gone(&f);
    }
}

#[test]
fn ibstat_reads_each_device_from_sysfs() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ibstat", "infiniband-diags");
    // libibumad reads node_type, fw_ver, hw_rev, hca_type, the GUIDs and each port's
    // lid_mask_count, sm_lid, sm_sl, lid, state, phys_state, rate, cap_mask, link_layer,
    // gids/0 and pkeys/ (umad.c: get_ca, get_port); without cap_mask ibstat failed
    // ("stat of IB device 'mlx5_0' failed").
    for ((dev, options), (hca, hw)) in personalities().into_iter().zip([("MT4123", "0"), ("", "")])
    {
        let f = fabric("ibstat");
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let r = finish_or_kill(
            start(run_with(&f, "h2", &options, &["ibstat"]), "ibstat"),
            "ibstat",
        );
        assert!(r.status.success(), "{r:?}");
        let lines: Vec<&str> = r.out.lines().map(str::trim).collect();
        for want in [
            format!("CA '{dev}'"),
            format!("CA type: {hca}"),
            "Number of ports: 1".into(),
            format!("Hardware version: {hw}"),
            "Node GUID: 0x00000afffe640002".into(),
            "State: Active".into(),
            "Physical state: LinkUp".into(),
            "Capability mask: 0x04010000".into(),
            "Port GUID: 0x00000afffe640002".into(),
            "Link layer: Ethernet".into(),
        ] {
            assert!(lines.contains(&want.trim()), "{dev}: no {want:?} in {r:?}");
        }
        let l = finish_or_kill(
            start(run_with(&f, "h2", &options, &["ibstat", "-l"]), "ibstat -l"),
            "ibstat -l",
        );
        assert_eq!(
            (l.status.code(), l.out.as_str()),
            (Some(0), format!("{dev}\n").as_str())
        );
        wait_fabric_gone(&f);
    }
}

#[test]
fn run_infinitely_ends_on_sigterm() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    require("ib_write_bw", "perftest");
    let f = fabric("infinite");
    let args = ["ib_write_bw", "-x", "1", "--run_infinitely", "-D", "1"];
    let mut s = start(run(&f, "h1", &args), "start the server");
    wait_listening(&mut s, PORT);
    let mut client = args.to_vec();
    client.push("10.100.0.1");
    let mut c = start(run(&f, "h2", &client), "start the client");
    // Two result rows (one a second) show the run going on.
    let mut out = BufReader::new(c.stdout.take().expect("the client's stdout"));
    let mut rows = 0;
    let mut line = String::new();
    while rows < 2 {
        line.clear();
        let n = out.read_line(&mut line).expect("read the client's output");
        assert!(n > 0, "the client ended: {}", rest_of_stderr(&mut c));
        // A row: 65536 (ib_write_bw's default size), the iterations of the second ...
        if line.split_whitespace().next() == Some("65536") {
            rows += 1;
        }
    }
    for child in [&c, &s] {
        // SAFETY: kill takes the pid of a launcher this test started and a signal.
        unsafe {
            libc::kill(
                libc::pid_t::try_from(child.id()).expect("a pid"),
                libc::SIGTERM,
            )
        };
    }
    let c = finish_or_kill(c, "the client");
    let s = finish_or_kill(s, "the server");
    // perftest leaves SIGTERM to its default action: 128 + 15.
    assert_eq!(c.status.code(), Some(143), "client: {c:?}");
    assert_eq!(s.status.code(), Some(143), "server: {s:?}");
    wait_fabric_gone(&f);
}
