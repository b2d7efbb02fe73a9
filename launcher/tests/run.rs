//! `verbs-emu run` as a user runs it: one host's address on an interface, the device's
//! files, two hosts from two commands (rdma-core's pingpong, perftest, spead2), bad input,
//! and SIGTERM.
//!
//! One file of about 800 lines on purpose: every test starts the launcher binary as a
//! user would and shares the fabric lock, the state-folder clean-up and the two-host
//! helpers above; the programs of the wider world (UCX, libfabric, MPI) are in
//! `programs.rs`, those that connect through the connection manager (perftest `-R`,
//! qperf `-cm1`, libfabric MSG) in `cm_programs.rs`.

mod common;

use common::*;

/// The host's address is on an interface of its own network namespace.
#[test]
fn a_host_has_its_address_on_an_interface() {
    let _pair = one_test_at_a_time();
    let f = fabric("addr");
    let r = ran(&mut run(&f, "h2", &["ip", "-4", "-o", "addr", "show"]));
    assert!(r.status.success(), "{r:?}");
    let lines: Vec<Vec<&str>> = r
        .out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let addrs: Vec<(&str, &str)> = lines
        .iter()
        .filter(|w| w.len() > 3 && w[2] == "inet")
        .map(|w| (w[1], w[3]))
        .collect();
    assert_eq!(
        addrs,
        [("lo", "127.0.0.1/8"), ("eth0", "10.100.0.2/24")],
        "{}",
        r.out
    );
    wait_fabric_gone(&f);
}

/// The text of the `==> NAME` section of a script's output (each section up to the next).
fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let start = out
        .find(&format!("==> {name}\n"))
        .unwrap_or_else(|| panic!("no section {name} in:\n{out}"));
    let rest = &out[start + name.len() + 5..];
    rest.find("==> ")
        .map_or(rest, |end| &rest[..end])
        .trim_end()
}

const DEVICE_SCRIPT: &str = r#"
for f in ibdev abi_version dev; do echo "==> uverbs0/$f"; cat /sys/class/infiniband_verbs/uverbs0/$f; done
for f in node_type node_guid board_id ports/1/state ports/1/link_layer ports/1/rate ports/1/gids/0 ports/1/gids/1 \
         ports/1/gid_attrs/types/0 ports/1/gid_attrs/types/1 ports/1/gid_attrs/ndevs/1 device/numa_node; do
  echo "==> mlx5_0/$f"; cat /sys/class/infiniband/mlx5_0/$f
done
echo "==> stat"; stat -c '%F' /dev/infiniband/uverbs0 /dev/infiniband/rdma_cm
echo "==> net"; ls /sys/class/net
echo "==> ibv_devinfo"; ibv_devinfo
"#;

/// `/dev/infiniband/uverbs0` is a character device, the sysfs entries describe the
/// host's device, and `ibv_devinfo` finds it.
fn check_device_files(r: &Ran) {
    assert!(r.status.success(), "{r:?}");
    let out = &r.out;
    let want = [
        ("uverbs0/ibdev", "mlx5_0"),
        ("uverbs0/abi_version", "1"),
        ("uverbs0/dev", "231:192"),
        ("mlx5_0/node_type", "1: CA"),
        ("mlx5_0/node_guid", "0000:0aff:fe64:0002"),
        ("mlx5_0/board_id", "VERBS_EMU_H2"),
        ("mlx5_0/ports/1/state", "4: ACTIVE"),
        ("mlx5_0/ports/1/link_layer", "Ethernet"),
        ("mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)"),
        (
            "mlx5_0/ports/1/gids/0",
            "fe80:0000:0000:0000:0000:0aff:fe64:0002",
        ),
        (
            "mlx5_0/ports/1/gids/1",
            "0000:0000:0000:0000:0000:ffff:0a64:0002",
        ),
        ("mlx5_0/ports/1/gid_attrs/types/0", "IB/RoCE v1"),
        ("mlx5_0/ports/1/gid_attrs/types/1", "RoCE v2"),
        ("mlx5_0/ports/1/gid_attrs/ndevs/1", "eth0"),
        ("mlx5_0/device/numa_node", "-1"),
        ("stat", "character special file\ncharacter special file"),
        ("net", "eth0\nlo"),
    ];
    for (name, text) in want {
        assert_eq!(section(out, name), text, "{name}");
    }
    let info = section(out, "ibv_devinfo");
    for line in [
        "hca_id:\tmlx5_0",
        "node_guid:\t\t\t0000:0aff:fe64:0002",
        "board_id:\t\t\tVERBS_EMU_H2",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
    ] {
        assert!(info.contains(line), "ibv_devinfo lacks {line:?}:\n{info}");
    }
}

#[test]
fn the_device_has_a_character_device_and_sysfs_entries() {
    let _pair = one_test_at_a_time();
    require("ibv_devinfo", "ibverbs-utils");
    let f = fabric("dev");
    check_device_files(&ran(&mut run(&f, "h2", &["sh", "-c", DEVICE_SCRIPT])));
    wait_fabric_gone(&f);
}

/// The folder of the copies of the launcher, the fabric process and the library that
/// uid 65534 runs: the build's folder may be where it cannot reach (under /root).
fn binaries_for_everyone() -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("verbs-emu-test-bin-{}", std::process::id()));
    let bin = verbs_emu();
    let from = bin.parent().expect("the binary's folder");
    std::fs::create_dir_all(&dir).expect("make the folder of copies");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for f in ["verbs-emu", "verbs-emu-fabric", "libibverbs.so"] {
        let to = dir.join(f);
        if !to.exists() {
            std::fs::copy(from.join(f), &to).expect("copy the binary");
        }
    }
    dir
}

/// Runs `c` (a `verbs-emu` command) as uid 65534 (through setpriv, with copies of the
/// binaries it can reach) when the tests run as root; as it is otherwise.
fn unprivileged(c: std::process::Command) -> std::process::Command {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return c;
    }
    let setpriv = require("setpriv", "util-linux");
    let mut w = std::process::Command::new(setpriv);
    w.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(binaries_for_everyone().join("verbs-emu"))
        .args(c.get_args())
        .current_dir("/")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    w
}

/// As an unprivileged user (uid 65534 through setpriv when the tests run as root, the
/// tests' user otherwise): the same device files, the command running as that user, and
/// an RC pingpong between two hosts.
#[test]
fn an_unprivileged_user_gets_the_same_hosts() {
    let _pair = one_test_at_a_time();
    require("ibv_devinfo", "ibverbs-utils");
    let f = fabric("nobody");
    check_device_files(&ran(&mut unprivileged(run(
        &f,
        "h2",
        &["sh", "-c", DEVICE_SCRIPT],
    ))));
    // The command runs as the user, as on a real host.
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let want = if me == 0 { 65534 } else { me };
    let r = ran(&mut unprivileged(run(&f, "h2", &["id", "-u"])));
    assert_eq!(r.out, format!("{want}\n"), "{r:?}");
    rc_pingpong_pair(&f, unprivileged);
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let dir = std::env::temp_dir().join("verbs-emu-65534").join(&f);
        let needle = dir.to_string_lossy().into_owned();
        wait_until("the unprivileged fabric stops", || {
            processes_naming(&needle).is_empty()
        });
        std::fs::remove_dir_all(&dir).expect("remove the fabric's state directory");
        std::fs::remove_dir_all(binaries_for_everyone()).expect("remove the copies");
    } else {
        wait_fabric_gone(&f);
    }
}

/// The number before " bytes in " on a pingpong's result line.
fn pingpong_bytes(out: &str) -> Option<u64> {
    out.lines()
        .find_map(|l| {
            l.split(" bytes in ")
                .next()
                .filter(|_| l.contains(" bytes in "))
        })
        .and_then(|n| n.trim().parse().ok())
}

/// `ibv_rc_pingpong -g 1` as server on h1 and client on h2, each launcher command made
/// by `wrap`, the client giving the server's address: their out-of-band TCP crosses from
/// h2's namespace to h1's.
fn rc_pingpong_pair(f: &str, wrap: impl Fn(std::process::Command) -> std::process::Command) {
    let prog = require("ibv_rc_pingpong", "ibverbs-utils");
    let prog = prog.to_str().expect("a UTF-8 path");
    let args = ["-g", "1", "-n", "100", "-p", "18515"];
    let mut server = wrap(run(f, "h1", &[&[prog][..], &args].concat()))
        .spawn()
        .expect("start the server");
    wait_listening(&mut server, 18515);
    let client = ran(&mut wrap(run(
        f,
        "h2",
        &[&[prog][..], &args, &["10.100.0.1"]].concat(),
    )));
    let server = finish(server);
    for (who, r) in [("client", &client), ("server", &server)] {
        assert!(
            r.status.success(),
            "{who}: {r:?}\nclient: {client:?}\nserver: {server:?}"
        );
        // 100 round trips of 4096 bytes: 2 * 100 * 4096 bytes each way counted.
        assert_eq!(pingpong_bytes(&r.out), Some(819_200), "{who}: {}", r.out);
        assert!(r.out.contains("GID ::ffff:10.100.0.1"), "{who}: {}", r.out);
        assert!(r.out.contains("GID ::ffff:10.100.0.2"), "{who}: {}", r.out);
    }
}

#[test]
fn rc_pingpong_between_two_launched_hosts() {
    let _pair = one_test_at_a_time();
    let f = fabric("rc");
    rc_pingpong_pair(&f, |c| c);
    wait_fabric_gone(&f);
}

/// The result row after perftest's `#bytes` header.
fn perftest_row(out: &str) -> Option<Vec<String>> {
    let mut lines = out.lines();
    lines.find(|l| l.trim_start().starts_with("#bytes"))?;
    Some(
        lines
            .next()?
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// perftest's `ib_send_bw` the same way.
#[test]
fn perftest_send_bw_between_two_launched_hosts() {
    let _pair = one_test_at_a_time();
    let prog = require("ib_send_bw", "perftest");
    let prog = prog.to_str().expect("a UTF-8 path");
    let f = fabric("bw");
    let args = ["-d", "mlx5_0", "-x", "1", "-n", "100", "-p", "18516"];
    // The first launcher captures the fabric's frames.
    let pcap = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{f}.pcap"));
    let pcap_arg = pcap.to_str().expect("a UTF-8 path");
    let mut server = run_with(
        &f,
        "h1",
        &["--pcap", pcap_arg],
        &[&[prog][..], &args].concat(),
    )
    .spawn()
    .expect("start the server");
    wait_listening(&mut server, 18516);
    let client = ran(&mut run(
        &f,
        "h2",
        &[&[prog][..], &args, &["10.100.0.1"]].concat(),
    ));
    let server = finish(server);
    for (who, r) in [("client", &client), ("server", &server)] {
        assert!(r.status.success(), "{who}: {r:?}");
        let row = perftest_row(&r.out).unwrap_or_else(|| panic!("{who}: no row in {}", r.out));
        assert_eq!(&row[..2], ["65536", "100"], "{who}: {}", r.out);
    }
    wait_fabric_gone(&f);
    // A pcap header (24 bytes) and the frames: at least 100 messages of 64 KiB.
    let len = std::fs::metadata(&pcap).expect("the capture").len();
    assert!(len > 100 * 65536, "{} has {len} bytes", pcap.display());
    std::fs::remove_file(&pcap).expect("remove the capture");
}

/// One line on stderr naming the problem, a failure status, nothing started.
fn one_line_error(r: &Ran, names: &[&str]) {
    assert!(!r.status.success(), "{r:?}");
    assert_eq!(r.err.lines().count(), 1, "{:?}", r.err);
    for n in names {
        assert!(r.err.contains(n), "{:?} does not name {n:?}", r.err);
    }
    assert!(r.err.starts_with("verbs-emu: "), "{:?}", r.err);
}

#[test]
fn bad_input_is_one_line_naming_the_problem() {
    let _pair = one_test_at_a_time();
    let f = fabric("bad");
    // A host the default topology does not have.
    let r = ran(&mut run(&f, "h9", &["true"]));
    one_line_error(&r, &["h9", "no such host", "h1, h2, h3, h4"]);
    // A topology file that does not parse.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&f);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[host]]\nname = \"a\"\n").expect("write the topology");
    let mut c = std::process::Command::new(verbs_emu());
    c.args(["run", "--fabric", &f, "--topology"])
        .arg(&bad)
        .args(["--", "true"]);
    let r = ran(&mut c);
    one_line_error(&r, &["bad.toml", "bad topology", "ip"]);
    // A host with more devices than a fabric process carries.
    let two = dir.join("two-devices.toml");
    std::fs::write(
        &two,
        "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\nextra_devices = [\"10.1.0.11\"]\n",
    )
    .expect("write the topology");
    let mut c = std::process::Command::new(verbs_emu());
    c.env_remove("XDG_RUNTIME_DIR")
        .args(["run", "--fabric", &f, "--host", "a", "--topology"])
        .arg(&two)
        .args(["--", "true"]);
    one_line_error(&ran(&mut c), &["--host a", "extra_devices (10.1.0.11)"]);
    // A topology file that is not there.
    let mut c = std::process::Command::new(verbs_emu());
    c.args(["run", "--topology", "/nonexistent/t.toml", "--", "true"]);
    one_line_error(&ran(&mut c), &["/nonexistent/t.toml", "No such file"]);
    // No command.
    let mut c = std::process::Command::new(verbs_emu());
    c.args(["run", "--fabric", &f, "--host", "h2"]);
    one_line_error(&ran(&mut c), &["no command"]);
    // An option the launcher does not have.
    let mut c = std::process::Command::new(verbs_emu());
    c.args(["run", "--bogus", "--", "true"]);
    one_line_error(&ran(&mut c), &["--bogus"]);
    // A command that does not exist: the shell's status for it.
    let r = ran(&mut run(&f, "h1", &["/nonexistent/program"]));
    assert_eq!(r.status.code(), Some(127), "{r:?}");
    one_line_error(&r, &["/nonexistent/program", "not found"]);
    wait_fabric_gone(&f);
}

/// A launcher whose command (a perftest server waiting for its client) runs on is ended
/// by SIGTERM: the command gets it, the launcher exits with 128 + 15, and no process of
/// the run is left (the command, the holder, the fabric).
#[test]
fn sigterm_ends_every_process() {
    let _pair = one_test_at_a_time();
    let prog = require("ib_send_bw", "perftest");
    let prog = prog.to_str().expect("a UTF-8 path");
    let f = fabric("term");
    let mut server = run(&f, "h1", &[prog, "-d", "mlx5_0", "-x", "1", "-p", "18517"])
        .spawn()
        .expect("start the server");
    wait_listening(&mut server, 18517);
    let started = descendants(server.id());
    assert!(!started.is_empty());
    // SAFETY: kill takes numbers only.
    let rc = unsafe { libc::kill(i32::try_from(server.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(rc, 0);
    let r = finish(server);
    assert_eq!(r.status.code(), Some(128 + 15), "{r:?}");
    wait_fabric_gone(&f);
    for pid in started {
        wait_until(&format!("process {pid} of the run ends"), || !alive(pid));
    }
}

/// spead2 as a user writes it: `add_udp_ibv_reader` on 10.100.0.1 under `--host h1`, a
/// `UdpIbvStream` sender on 10.100.0.2 under `--host h2`, a multicast group between
/// them; spead2's kernel sockets join and bind on the hosts' interfaces. The heaps h1
/// receives are those h2 sent.
#[test]
fn spead2_reader_and_sender_on_two_launched_hosts() {
    let _pair = one_test_at_a_time();
    use std::io::BufRead;
    let python = workspace_tests::spead2::python();
    let python = python.to_str().expect("a UTF-8 path");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/spead2_two_hosts.py");
    let script = script.to_str().expect("a UTF-8 path");
    let f = fabric("spead2");
    let heaps = "20";
    let mut reader = run(
        &f,
        "h1",
        &[
            python,
            script,
            "recv",
            "239.10.0.1",
            "7148",
            "10.100.0.1",
            heaps,
        ],
    )
    .spawn()
    .expect("start the reader");
    let mut lines =
        std::io::BufReader::new(reader.stdout.take().expect("the reader's stdout")).lines();
    match lines.next() {
        Some(Ok(l)) if l == r#"{"ready": true}"# => {}
        other => panic!(
            "the reader is not ready ({other:?}): {}",
            rest_of_stderr(&mut reader)
        ),
    }
    let sender = ran(&mut run(
        &f,
        "h2",
        &[
            python,
            script,
            "send",
            "239.10.0.1",
            "7148",
            "10.100.0.2",
            heaps,
        ],
    ));
    assert!(sender.status.success(), "sender: {sender:?}");
    let received: Vec<String> = lines.map(|l| l.expect("the reader's output")).collect();
    let status = reader.wait().expect("wait for the reader");
    assert!(
        status.success(),
        "reader ({status}): {}",
        rest_of_stderr(&mut reader)
    );
    let sent: Vec<&str> = sender.out.lines().collect();
    assert_eq!(sent.len(), 20, "{}", sender.out);
    assert_eq!(received, sent);
    wait_fabric_gone(&f);
}

/// UCX (Debian's `ucx-utils`) sees the emulated device, which it skips unless
/// `/dev/infiniband/uverbs0` is a character device, and runs `ucx_perftest` between two
/// launched hosts over it (RC, with UD for its wire-up, on GID 0).
#[test]
fn ucx_lists_the_device_and_runs_between_two_launched_hosts() {
    let _pair = one_test_at_a_time();
    let info = require("ucx_info", "ucx-utils");
    let perf = require("ucx_perftest", "ucx-utils");
    let perf = perf.to_str().expect("a UTF-8 path");
    let f = fabric("ucx");
    let r = ran(&mut run(
        &f,
        "h1",
        &[info.to_str().expect("a UTF-8 path"), "-d"],
    ));
    assert!(r.status.success(), "{r:?}");
    let md = r
        .out
        .split("# Memory domain: ")
        .find(|s| s.starts_with("mlx5_0\n"))
        .unwrap_or_else(|| panic!("no mlx5_0 memory domain:\n{}", r.out));
    for t in ["rc_verbs", "ud_verbs"] {
        assert!(
            md.contains(&format!(
                "#      Transport: {t}\n#         Device: mlx5_0:1\n"
            )),
            "no {t} on mlx5_0:1:\n{md}"
        );
    }
    wait_fabric_gone(&f);

    let env = [
        "env",
        "UCX_TLS=rc_verbs,ud_verbs,self",
        "UCX_NET_DEVICES=mlx5_0:1",
        "UCX_IB_GID_INDEX=0",
        perf,
        "-t",
        "tag_bw",
        "-n",
        "100",
        "-p",
        "13338",
    ];
    let mut server = run(&f, "h1", &env).spawn().expect("start the server");
    wait_listening(&mut server, 13338);
    let client = ran(&mut run(&f, "h2", &[&env[..], &["10.100.0.1"]].concat()));
    let server = finish(server);
    assert!(server.status.success(), "server: {server:?}");
    assert!(client.status.success(), "client: {client:?}");
    let last = client
        .out
        .lines()
        .find(|l| l.starts_with("Final:"))
        .unwrap_or_else(|| panic!("no final row: {}", client.out));
    assert_eq!(last.split_whitespace().nth(1), Some("100"), "{last}");
    wait_fabric_gone(&f);
}

/// libfabric's verbs provider (Debian's `libfabric-bin`): `fi_pingpong` over a datagram
/// endpoint between two launched hosts, its control connection to 10.100.0.1's port
/// 47592; both sides report 100 transfers of 1 KiB acknowledged.
#[test]
fn libfabric_pingpong_between_two_launched_hosts() {
    let _pair = one_test_at_a_time();
    let prog = require("fi_pingpong", "libfabric-bin");
    let prog = prog.to_str().expect("a UTF-8 path");
    let f = fabric("fi");
    let args = [
        prog,
        "-p",
        "verbs",
        "-e",
        "dgram",
        "-d",
        "mlx5_0-dgram",
        "-I",
        "100",
        "-S",
        "1024",
    ];
    let mut server = run(&f, "h1", &args).spawn().expect("start the server");
    wait_listening(&mut server, 47592);
    let client = ran(&mut run(&f, "h2", &[&args[..], &["10.100.0.1"]].concat()));
    let server = finish(server);
    for (who, r) in [("client", &client), ("server", &server)] {
        assert!(r.status.success(), "{who}: {r:?}");
        let row = r
            .out
            .lines()
            .find(|l| l.starts_with("1k "))
            .unwrap_or_else(|| panic!("{who}: no result row: {}", r.out));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cols[..3], ["1k", "100", "=100"], "{who}: {row}");
    }
    wait_fabric_gone(&f);
}

/// Four launchers started at once, one per host of the default topology: each joins (or
/// starts) the one fabric and finds its own host's address.
#[test]
fn launchers_started_at_once_each_get_their_host() {
    let _pair = one_test_at_a_time();
    let f = fabric("race");
    let children: Vec<_> = (1..=4)
        .map(|i| {
            let host = format!("h{i}");
            let c = run(&f, &host, &["ip", "-4", "-o", "addr", "show", "eth0"])
                .spawn()
                .expect("start verbs-emu");
            (i, c)
        })
        .collect();
    for (i, c) in children {
        let r = finish(c);
        assert!(r.status.success(), "h{i}: {r:?}");
        assert!(
            r.out.contains(&format!(" inet 10.100.0.{i}/24 ")),
            "h{i}: {}",
            r.out
        );
    }
    wait_fabric_gone(&f);
}

/// A later launcher of a running fabric may not change its seed (the first one's), and
/// one naming the same seed, or none, joins it; once the fabric has no launcher, one with
/// another seed gets a fabric with that seed.
#[test]
fn a_later_launcher_keeps_the_fabrics_settings() {
    let _pair = one_test_at_a_time();
    use std::io::Write;
    let f = fabric("seed");
    let mut first = std::process::Command::new(verbs_emu());
    first
        .env_remove("XDG_RUNTIME_DIR")
        .args([
            "run",
            "--fabric",
            &f,
            "--seed",
            "3",
            "--",
            "sh",
            "-c",
            "echo up; read x",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut first = first.spawn().expect("start verbs-emu");
    let mut up = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(first.stdout.as_mut().expect("stdout")),
        &mut up,
    )
    .expect("read the first command's line");
    assert_eq!(up, "up\n", "{}", rest_of_stderr(&mut first));
    let mut other = std::process::Command::new(verbs_emu());
    other.env_remove("XDG_RUNTIME_DIR").args([
        "run", "--fabric", &f, "--host", "h2", "--seed", "4", "--", "true",
    ]);
    let r = ran(&mut other);
    one_line_error(&r, &["seed 3", "--seed"]);
    assert_eq!(r.status.code(), Some(2));
    let mut same = std::process::Command::new(verbs_emu());
    same.env_remove("XDG_RUNTIME_DIR").args([
        "run",
        "--fabric",
        &f,
        "--host",
        "h2",
        "--seed",
        "3",
        "--",
        "sh",
        "-c",
        "echo $VERBS_EMU_SEED",
    ]);
    let r = ran(&mut same);
    assert!(r.status.success(), "{r:?}");
    assert_eq!(r.out, "3\n");
    let r = ran(&mut run(&f, "h3", &["sh", "-c", "echo $VERBS_EMU_SEED"]));
    assert_eq!(r.out, "3\n", "{r:?}");
    first
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"done\n")
        .expect("end the first command");
    let status = first.wait().expect("wait for the first launcher");
    assert!(status.success(), "{status}");
    // Once no launcher uses it, a launcher with other settings gets a fabric with them
    // (the old one, if still there, makes way).
    let mut next = std::process::Command::new(verbs_emu());
    next.env_remove("XDG_RUNTIME_DIR").args([
        "run",
        "--fabric",
        &f,
        "--seed",
        "5",
        "--",
        "sh",
        "-c",
        "echo $VERBS_EMU_SEED",
    ]);
    let r = ran(&mut next);
    assert!(r.status.success(), "{r:?}");
    assert_eq!(r.out, "5\n");
    wait_fabric_gone(&f);
}

/// A kernel that refuses an unprivileged user namespace: one line naming what is missing
/// and the command that allows it, status 125. The test makes such a kernel's view for
/// uid 65534: a user namespace (uids 0-65535 mapped to themselves) whose
/// `user.max_user_namespaces` is 0, in which setpriv runs the launcher as uid 65534. That
/// needs root, as CI and these machines have.
#[test]
fn a_refused_user_namespace_is_one_line_naming_the_fix() {
    use std::io::Write;
    let _pair = one_test_at_a_time();
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "this test makes a user namespace with max_user_namespaces 0: run it as root"
    );
    let unshare = require("unshare", "util-linux");
    let f = fabric("nouserns");
    let launcher = binaries_for_everyone().join("verbs-emu");
    let inner = format!(
        "echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --reuid=65534 \
         --regid=65534 --clear-groups {} run --fabric {f} -- true",
        launcher.display()
    );
    let mut c = std::process::Command::new(unshare);
    c.args(["--user", "sh", "-c", "read x && exec sh -c \"$0\""])
        .arg(&inner)
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().expect("start unshare");
    // unshare makes the namespace and then runs sh: map it once it is made.
    let pid = child.id();
    let mine = std::fs::read_link("/proc/self/ns/user").expect("my user namespace");
    wait_until("unshare makes its user namespace", || {
        std::fs::read_link(format!("/proc/{pid}/ns/user")).is_ok_and(|ns| ns != mine)
    });
    for map in ["uid_map", "gid_map"] {
        std::fs::write(format!("/proc/{pid}/{map}"), "0 0 65536\n").expect("write the map");
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("let it go on");
    let r = finish(child);
    assert_eq!(r.status.code(), Some(125), "{r:?}");
    one_line_error(
        &r,
        &[
            "cannot make a user namespace",
            "sudo sysctl -w user.max_user_namespaces=",
        ],
    );
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join("verbs-emu-65534").join(&f));
    std::fs::remove_dir_all(binaries_for_everyone()).expect("remove the copies");
}

/// A topology file: the host's address and its device's personality (rxe) come from it,
/// and the command reads the same file (`VERBS_EMU_TOPOLOGY`).
#[test]
fn a_topology_file_names_the_hosts_addresses_and_devices() {
    let _pair = one_test_at_a_time();
    require("ibv_devices", "ibverbs-utils");
    let f = fabric("topo");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&f);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let topo = dir.join("two.toml");
    let text = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\npersonality = \"rxe\"\n\n\
                [[host]]\nname = \"b\"\nip = \"10.1.0.2\"\n";
    std::fs::write(&topo, text).expect("write the topology");
    let topo_arg = topo.to_str().expect("a UTF-8 path");
    let script = "ip -4 -o addr show eth0; cat /sys/class/infiniband_verbs/uverbs0/ibdev; \
                  cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1; \
                  cat \"$VERBS_EMU_TOPOLOGY\"; ibv_devices";
    let r = ran(&mut run_with(
        &f,
        "a",
        &["--topology", topo_arg],
        &["sh", "-c", script],
    ));
    assert!(r.status.success(), "{r:?}");
    assert!(r.out.contains(" inet 10.1.0.1/24 "), "{}", r.out);
    assert!(r.out.contains("\nrxe0\nRoCE v2\n"), "{}", r.out);
    assert!(r.out.contains(text), "{}", r.out);
    assert!(r.out.contains("    rxe0  "), "{}", r.out);
    std::fs::remove_dir_all(&dir).expect("remove the scratch folder");
    wait_fabric_gone(&f);
}

/// qperf (Debian's `qperf`): its server on h1, its client on h2 giving 10.100.0.1, RC
/// bandwidth through the connection manager (`-cm1`) and TCP latency between the hosts'
/// interfaces; `quit` ends the server.
#[test]
fn qperf_between_two_launched_hosts() {
    let _pair = one_test_at_a_time();
    let prog = require("qperf", "qperf");
    let prog = prog.to_str().expect("a UTF-8 path");
    let f = fabric("qperf");
    let mut server = run(&f, "h1", &[prog]).spawn().expect("start the server");
    wait_listening(&mut server, 19765);
    let client = qperf_client(
        &f,
        &[
            prog,
            "10.100.0.1",
            "-cm1",
            "-t",
            "1",
            "rc_bw",
            "tcp_lat",
            "quit",
        ],
        "the qperf client",
    );
    let server = finish(server);
    assert!(client.status.success(), "client: {client:?}");
    assert!(server.status.success(), "server: {server:?}");
    let lines: Vec<&str> = client.out.lines().map(str::trim).collect();
    assert_eq!(lines[0], "rc_bw:", "{}", client.out);
    assert!(lines[1].starts_with("bw  =  "), "{}", client.out);
    assert_eq!(lines[2], "tcp_lat:", "{}", client.out);
    assert!(lines[3].starts_with("latency  =  "), "{}", client.out);
    assert_eq!(lines[4..], ["quit:"], "{}", client.out);
    wait_fabric_gone(&f);
}

/// The launcher exits with its command's status, 128 + N when signal N ended it; the
/// command may follow the options without `--`.
#[test]
fn the_launcher_exits_with_the_commands_status() {
    let _pair = one_test_at_a_time();
    let f = fabric("status");
    let r = ran(&mut run(
        &f,
        "h1",
        &["sh", "-c", "echo out; echo err >&2; exit 7"],
    ));
    assert_eq!(
        (r.status.code(), r.out.as_str(), r.err.as_str()),
        (Some(7), "out\n", "err\n")
    );
    let r = ran(&mut run(&f, "h1", &["sh", "-c", "kill -KILL $$"]));
    assert_eq!(r.status.code(), Some(128 + 9), "{r:?}");
    let mut c = std::process::Command::new(verbs_emu());
    c.env_remove("XDG_RUNTIME_DIR").args([
        "run", "--fabric", &f, "--host", "h3", "ip", "-4", "-o", "addr", "show", "eth0",
    ]);
    let r = ran(&mut c);
    assert!(r.status.success(), "{r:?}");
    assert!(r.out.contains(" inet 10.100.0.3/24 "), "{}", r.out);
    wait_fabric_gone(&f);
}
