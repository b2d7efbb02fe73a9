//! Programs of the wider world, unmodified, between two launched hosts (`verbs-emu run`
//! as a user runs it): UCX's perftest over RC and UD on both GIDs, libfabric's verbs provider (RDM over rxd, and SIGTERM
//! in the middle of it), and an Open MPI ping-pong over UCX. Each server runs on h1, its client on h2 naming
//! 10.100.0.1; every launcher must end by itself within [`HANG`], else the test sends it
//! SIGTERM (which it passes to its command), then SIGKILL, and fails.

mod common;

use common::*;
use std::process::Child;

/// The columns of `ucx_perftest`'s `Final:` row.
fn ucx_final(r: &Ran) -> Vec<String> {
    r.out
        .lines()
        .find(|l| l.starts_with("Final:"))
        .unwrap_or_else(|| panic!("no Final row: {r:?}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// UCX 1.13 (Debian's `ucx-utils`) between two launched hosts, with its UD datagram check
/// on (`UCX_UD_VERBS_ETH_DGID_CHECK=y`, its default): UCP `tag_bw` over
/// `rc_verbs,ud_verbs`, UCT `put_bw` over `rc_verbs` and UCT `am_bw` over `ud_verbs` and
/// `rc_verbs`, on GID 0 (RoCE v1) and GID 1 (RoCE v2, IPv4). The check takes the packet's
/// L3 type from the receive completion's `sl` (the mlx5 CQE's RoCE packet type) and
/// compares the destination address in the GRH area with the port's GIDs; each run
/// reports 100 iterations.
#[test]
fn ucx_perftest_on_both_gids_with_the_datagram_check_on() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let perf = require("ucx_perftest", "ucx-utils");
    let perf = perf.to_str().expect("a UTF-8 path");
    let f = fabric("ucx-gids");
    let tests: [&[&str]; 4] = [
        &["-t", "tag_bw"],
        &["-t", "put_bw", "-d", "mlx5_0:1", "-x", "rc_verbs"],
        &["-t", "am_bw", "-d", "mlx5_0:1", "-x", "ud_verbs"],
        &["-t", "am_bw", "-d", "mlx5_0:1", "-x", "rc_verbs"],
    ];
    for gid in ["0", "1"] {
        let gid_env = format!("UCX_IB_GID_INDEX={gid}");
        for t in tests {
            let mut args = vec![
                "env",
                "UCX_TLS=rc_verbs,ud_verbs,self",
                "UCX_NET_DEVICES=mlx5_0:1",
                "UCX_UD_VERBS_ETH_DGID_CHECK=y",
                &gid_env,
                perf,
            ];
            args.extend_from_slice(t);
            args.extend_from_slice(&["-n", "100", "-p", "13338"]);
            let client = [&args[..], &["10.100.0.1"]].concat();
            let (_, c) = two_hosts(&f, 13338, &args, &client);
            let row = ucx_final(&c);
            assert_eq!(row[1], "100", "GID {gid} {t:?}: {row:?}");
            wait_fabric_gone(&f);
        }
    }
}

/// libfabric (Debian's `libfabric-bin`, 1.17): `fi_info -p verbs` lists the device's MSG
/// domain (`mlx5_0`, RC through the connection manager), its datagram domain and the
/// `verbs;ofi_rxd` RDM endpoint over it; `fi_pingpong -p "verbs;ofi_rxd" -e rdm` with
/// every default size (64 B to 1 MiB, 10 iterations each, about 2,600 datagrams per
/// 1 MiB round) between two launched hosts: both sides report every size with all its
/// transfers acknowledged.
#[test]
fn libfabric_lists_the_device_and_runs_rdm_over_rxd() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let info = require("fi_info", "libfabric-bin");
    let prog = require("fi_pingpong", "libfabric-bin");
    let f = fabric("fi-rdm");
    let r = finish_or_kill(
        start(
            run(
                &f,
                "h1",
                &[info.to_str().expect("a UTF-8 path"), "-p", "verbs"],
            ),
            "start fi_info",
        ),
        "fi_info",
    );
    assert!(r.status.success(), "{r:?}");
    let entries: Vec<(String, String, String)> = r
        .out
        .split("provider: ")
        .skip(1)
        .map(|e| {
            let field = |name: &str| {
                e.lines()
                    .find_map(|l| l.trim().strip_prefix(name))
                    .unwrap_or_else(|| panic!("no {name} in {e}"))
                    .trim()
                    .to_owned()
            };
            let prov = e.lines().next().unwrap_or_default().trim().to_owned();
            (prov, field("domain:"), field("type:"))
        })
        .collect();
    let want = [
        ("verbs", "mlx5_0", "FI_EP_MSG"),
        ("verbs", "mlx5_0-dgram", "FI_EP_DGRAM"),
        ("verbs;ofi_rxd", "mlx5_0-dgram", "FI_EP_RDM"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(entries, want, "{}", r.out);
    wait_fabric_gone(&f);

    let prog = prog.to_str().expect("a UTF-8 path");
    let args = [prog, "-p", "verbs;ofi_rxd", "-e", "rdm"];
    let (s, c) = two_hosts(&f, 47592, &args, &[&args[..], &["10.100.0.1"]].concat());
    let sizes = ["64", "256", "1k", "4k", "64k", "1m"];
    for (who, r) in [("server", &s), ("client", &c)] {
        let rows: Vec<Vec<&str>> = r
            .out
            .lines()
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let got: Vec<&str> = rows.iter().map(|r| r[0]).collect();
        assert!(
            sizes.iter().all(|s| got.contains(s)),
            "{who}: sizes {got:?}: {}",
            r.out
        );
        for row in &rows {
            assert_eq!(&row[1..3], ["10", "=10"], "{who}: {row:?}");
        }
    }
    wait_fabric_gone(&f);
}

/// Open MPI (Debian's `openmpi-bin`, `libopenmpi-dev`): a two-rank ping-pong
/// (`tests/c/mpi_pingpong.c`, built here with `mpicc`) with `mpirun -np 2` on h1 and a
/// host file naming 10.100.0.1 and 10.100.0.2, one slot each; mpirun starts its daemon
/// on the second host through `--mca plm_rsh_agent`, a script that runs the command it
/// is given with `verbs-emu run --host h2` (there is no ssh between launched hosts). The
/// ranks talk through UCX (`--mca pml ucx`) over `rc_verbs,ud_verbs` only (no shared
/// memory, which two hosts do not have anyway): rank 0 on h1 and rank 1 on h2 each report
/// 100 round trips of 4 KiB, rank 0 having checked every byte of every answer.
#[test]
fn open_mpi_ping_pong_between_two_launched_hosts() {
    use std::os::unix::fs::PermissionsExt;
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let mpicc = require("mpicc", "libopenmpi-dev");
    let mpirun = require("mpirun", "openmpi-bin");
    let f = fabric("mpi");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&f);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/mpi_pingpong.c");
    let prog = dir.join("mpi_pingpong");
    let out = std::process::Command::new(&mpicc)
        .arg("-o")
        .arg(&prog)
        .arg(&src)
        .output()
        .expect("run mpicc");
    assert!(out.status.success(), "mpicc: {out:?}");
    let agent = dir.join("agent.sh");
    let script = format!(
        "#!/bin/sh\n\
         # Open MPI's rsh agent: [options] HOST COMMAND..., run on that launched host.\n\
         while [ $# -gt 0 ]; do case $1 in -*) shift;; *) break;; esac; done\n\
         case $1 in 10.100.0.1) h=h1;; 10.100.0.2) h=h2;; *) echo \"unknown host $1\" >&2; exit 1;; esac\n\
         shift\n\
         exec {} run --fabric {f} --host $h -- sh -c \"$*\"\n",
        verbs_emu().display()
    );
    std::fs::write(&agent, script).expect("write the agent");
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "10.100.0.1 slots=1\n10.100.0.2 slots=1\n").expect("hosts");
    let path = |p: &std::path::Path| p.to_str().expect("a UTF-8 path").to_owned();
    let (mpirun, hosts, agent, prog) = (path(&mpirun), path(&hosts), path(&agent), path(&prog));
    let args = [
        "env",
        "UCX_TLS=rc_verbs,ud_verbs,self",
        "UCX_NET_DEVICES=mlx5_0:1",
        &mpirun,
        "--allow-run-as-root",
        "-np",
        "2",
        "--hostfile",
        &hosts,
        "--mca",
        "plm_rsh_agent",
        &agent,
        "--mca",
        "pml",
        "ucx",
        "--mca",
        "btl",
        "^openib,uct",
        "-x",
        "UCX_TLS",
        "-x",
        "UCX_NET_DEVICES",
        &prog,
    ];
    let r = finish_or_kill(start(run(&f, "h1", &args), "start mpirun"), "mpirun");
    assert!(r.status.success(), "{r:?}");
    let mut lines: Vec<&str> = r.out.lines().filter(|l| l.starts_with("rank ")).collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "rank 0 of 2 on h1: 100 round trips of 4096 bytes",
            "rank 1 of 2 on h2: 100 round trips of 4096 bytes",
        ],
        "{r:?}"
    );
    std::fs::remove_dir_all(&dir).expect("remove the scratch folder");
    wait_fabric_gone(&f);
}

/// Whether a process under `launcher` runs `program` (its command name).
fn runs(launcher: &Child, program: &str) -> bool {
    descendants(launcher.id()).into_iter().any(|p| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == program)
    })
}

/// SIGTERM ends a `verbs;ofi_rxd` RDM ping-pong in the middle of its transfers (a run of
/// 100,000 rounds of 1 MiB, far longer than the test): both launchers pass it on, and
/// fi_pingpong, which catches SIGTERM (its handler exits: status 1), ends on both hosts;
/// the fabric stops with no process left. (Its exit runs in the handler, on the thread
/// the signal interrupted, possibly inside the emulated library; the library's at-exit
/// drain once waited there for a lock that thread held and the process hung.)
#[test]
fn sigterm_ends_an_rdm_pingpong_over_rxd() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let prog = require("fi_pingpong", "libfabric-bin");
    let prog = prog.to_str().expect("a UTF-8 path");
    let f = fabric("fi-term");
    let args = [
        prog,
        "-p",
        "verbs;ofi_rxd",
        "-e",
        "rdm",
        "-S",
        "1048576",
        "-I",
        "100000",
    ];
    let mut server = start(run(&f, "h1", &args), "start the server");
    wait_listening(&mut server, 47592);
    let client = start(
        run(&f, "h2", &[&args[..], &["10.100.0.1"]].concat()),
        "start the client",
    );
    wait_until("the client runs fi_pingpong", || {
        runs(&client, "fi_pingpong")
    });
    for c in [&client, &server] {
        // SAFETY: kill takes our child's pid (not yet reaped) and a signal.
        unsafe { libc::kill(libc::pid_t::try_from(c.id()).expect("a pid"), libc::SIGTERM) };
    }
    let c = finish_or_kill(client, "the client");
    let s = finish_or_kill(server, "the server");
    assert_eq!(
        (c.status.code(), s.status.code()),
        (Some(1), Some(1)),
        "client: {c:?}\nserver: {s:?}"
    );
    wait_fabric_gone(&f);
}
