//! `cargo xtask`: the project's own automation, so that a fresh machine needs nothing but
//! the Rust toolchain and these commands.
//!
//! - `cargo xtask test --backend sim`: every test that runs on the simulator (no system
//!   package needed).
//! - `cargo xtask test --backend hw`: backend-hw's tests (feature `device-tests`) on the
//!   device named by `RDMA_DEVICE`, or the first one with an active port; with none, it
//!   fails and says how to get one.
//! - `cargo xtask test --backend hw --vm [--timeout SECS] [-- TEST-ARGS]`: builds backend-hw's
//!   tests and examples on the host, then in one Soft-RoCE VM runs every test binary
//!   (`RDMA_DEVICE=rxe0`), `backend-hw/scripts/pingpong-interop.sh` (our pingpong examples
//!   against rdma-core's, both roles) and a leak check (`rdma resource show` before and
//!   after). While backend-hw has no tests it runs the smoke check instead.
//! - `cargo xtask test --backend emu [-- TEST-ARGS]`: the same test binaries, unmodified, on
//!   the emulated libibverbs (one rxe-personality host, `emulator/topologies/`), so each
//!   conformance case runs on the simulator directly, through the C ABI, and on rxe; the
//!   cases of work queues, RSS QPs and striding RQs (`queues::`) run again on a host with
//!   an mlx5 device (`mlx5_0`), through the emulated libmlx5 too; then
//!   (without TEST-ARGS) the split conformance cases with both sides emulated.
//! - `cargo xtask test --wire [-- TEST-ARGS]`: the fabric's ports to real networks alone
//!   (VXLAN with a Linux vxlan peer and a second fabric, QEMU's `-netdev stream`), then
//!   real rxe in the Soft-RoCE VM against the emulated NIC (`--interop`: that step alone;
//!   `--interop --case NAME`...: only the cases named),
//!   then the split conformance cases, one QP on rxe in the VM and one emulated (`--split`:
//!   that step alone).
//! - `cargo xtask vm [--timeout SECS] [-e KEY=VALUE]... [-v] [--keep] -- CMD ARGS...`: boot
//!   Debian's kernel in a QEMU VM (TCG) with Soft-RoCE (`rxe0` on a veth pair), run CMD
//!   inside it in the host's file system view and current directory, print its output and
//!   exit with its exit code. With `--fabric SOCK [--fabric-ip IP] [--forward PORT]...`
//!   rxe0 is on a NIC joining a fabric's QEMU port instead (see the [`vm`] module);
//!   `--cpu MODEL` gives QEMU a CPU model (`max` for numpy).
//!   `cargo xtask vm --smoke` runs the smoke check (ibv_devinfo,
//!   ibv_rc_pingpong, ibv_ud_pingpong and mckey multicast on rxe0). Everything the VM
//!   needs is installed (as root, with apt-get) or downloaded from Debian's packages and
//!   cached under `target/softroce/`; see the [`vm`] module.
//! - `cargo xtask emu [--topology FILE] [--seed N] [--host H] [--pcap OUT] [--leaks]
//!   [--debug] -- CMD ARGS...`: build the emulated libibverbs (crate `emulator`) and the
//!   launcher (release build by default) and run CMD through `verbs-emu run` as host H of
//!   the fabric; exits with CMD's exit code. `--fabric-only` serves a fabric for programs
//!   started by hand; `--no-fabric` runs CMD alone.
//! - `cargo xtask demo`, `cargo xtask scenario run FILE.toml`, `cargo xtask replay
//!   FILE.pcap`: the scenario tool (scenarios crate) on the simulator.
//! - `cargo xtask bench`: the benchmarks (spead vs spead2, the RAW_PACKET path and its
//!   per-frame cost from 10^4 to 10^7 frames, criterion micro-benchmarks, `scenario meerkat`).
//! - `cargo xtask bench emu [--runs N]`: the emulated NIC alone (perftest between two
//!   emulated hosts, through their direct pair and through the fabric process; spead2's
//!   ibverbs sender and reader on two hosts started through the launcher) against kernel
//!   loopback (qperf; the same spead2 programs over kernel UDP) and memcpy, with ratios.
//! - `cargo xtask fuzz [--time S] [--runs N] [--target T]`: the cargo-fuzz targets in
//!   `fuzz/` (nightly); CI runs each for [`cmd::ci::CI_FUZZ_SECONDS`].
//! - `cargo xtask dist [--verify] [--verify-debian]`: the emulated NIC as a tarball in
//!   `target/dist/` (see the `cmd::dist` module); `--verify` runs programs from it alone,
//!   `--verify-debian` in a fresh Debian 12 system.
//! - `cargo xtask miri`: the slot pool's and the simulator's unsafe code under Miri.
//! - `cargo xtask swarm --seeds A..B`: the fault swarm (`scenario swarm`); CI runs a short
//!   form: the `swarm` test binary of scenarios, seeds 0..400 (scenarios/SWARM.md).
//! - `cargo xtask soak [--minutes M]`: the receivers fed faster than they consume and
//!   flooded with malformed packets (`soak` in workspace-tests): memory high-water and
//!   counters; CI runs the short form ([`cmd::ci::CI_SOAK_SECONDS`]).
//! - `cargo xtask ci`: what `.ci/run` calls: format check, clippy with `-D warnings`
//!   (also with the hardware features), docs, the simulator suite, xtask's own tests (its
//!   bad-input table), the emulator's tests (Debian programs on the emulated libibverbs),
//!   the short swarm, soak and fuzz runs, Miri, and the hardware suite on Soft-RoCE in
//!   the VM.

mod cmd;
mod vm;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use cmd::{emu_suite, fuzz, miri};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Project automation for the verbs/SPEAD workspace"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A part of the benchmarks that runs alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BenchWhat {
    /// The emulated NIC between two hosts against kernel loopback and memcpy.
    Emu,
    /// What one fabric process carries: frames per second and per CPU-second, and how
    /// many sending hosts it serves.
    Fabric,
}

/// Which verbs backend a test run targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The deterministic in-process simulator: needs no system package.
    Sim,
    /// libibverbs on a real device, or on Soft-RoCE in a VM with `--vm`.
    Hw,
    /// The hardware suites, unmodified, on the emulated libibverbs (one rxe-personality
    /// host; the conformance cases of work queues, `queues::`, also on an mlx5 host):
    /// needs rdma-core's headers and libclang, which xtask installs.
    Emu,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the test suite for one backend.
    Test {
        /// The backend to test.
        #[arg(long, value_enum, default_value = "sim")]
        backend: Backend,
        /// With `--backend hw`: boot Soft-RoCE in a QEMU VM and run the suite inside it.
        #[arg(long)]
        vm: bool,
        /// Only the fabric's ports to real networks (VXLAN, QEMU's -netdev stream): their
        /// unit tests, emulator/tests/wire.rs and wire_cm.rs (root, for their network
        /// namespaces), then the interop step: real rxe in the Soft-RoCE VM against the
        /// emulated NIC, and the split conformance cases.
        #[arg(long, conflicts_with_all = ["backend", "vm"])]
        wire: bool,
        /// With --wire: only its interop step (real rxe in the Soft-RoCE VM on the fabric's
        /// QEMU port against the emulated NIC: RC and UD pingpong, perftest and rping on
        /// the IPv4 and the link-local GID, SPEAD, a lossy run).
        #[arg(long, requires = "wire")]
        interop: bool,
        /// With --wire: only its split conformance step (each case with one QP on rxe in
        /// the Soft-RoCE VM and one emulated, both ways round, compared with both on rxe;
        /// the lossy cases again under 2% loss).
        #[arg(long, requires = "wire", conflicts_with = "interop")]
        split: bool,
        /// With --interop: only the interop case of this name (repeatable; e.g.
        /// `ud-ll-vm-server`, `rping-ll-emulated-server`, `rc-lossy-emulated-server`); an
        /// unknown name fails with the list of the cases. The capture checks then ask for
        /// the frames of the cases chosen.
        #[arg(long = "case", value_name = "NAME", requires = "interop", value_parser = cmd::interop::case_name)]
        cases: Vec<String>,
        /// With `--vm`: kill the VM and fail after this many seconds (the whole suite runs
        /// in one VM).
        #[arg(long, default_value_t = 600, value_parser = positive)]
        timeout: u64,
        /// Extra arguments passed to the test binaries (after `--`).
        #[arg(last = true)]
        rest: Vec<String>,
    },
    /// Format check, clippy -D warnings, docs, and the suite of every backend that can run here.
    Ci,
    /// Run the default scenario on the simulator (one sender, four receivers, lossy
    /// fabric): a per-receiver table, the fabric's pcap, an SVG plot, and a replay of the
    /// pcap through the unchanged receiver. Arguments go to `scenario demo`.
    Demo {
        /// Arguments for `scenario demo` (e.g. `--seed N --out DIR`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run scenarios: `cargo xtask scenario run FILE.toml [--seed N]` (on the simulator).
    Scenario {
        /// Arguments for the `scenario` tool (e.g. `run FILE.toml --seed 7`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Replay a recorded observation through the simulated verbs receiver:
    /// `cargo xtask replay FILE.pcap [--seed N --loss P ...]`.
    Replay {
        /// The pcap and options for `scenario replay`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run the benchmarks (spead vs spead2 and the memcpy bound, spead's criterion codec
    /// benchmarks, the simulator's packet path and its per-frame cost from 10^4 to 10^7
    /// frames, the harness micro-benchmarks, the MeerKAT scenario).
    Bench {
        /// `emu`: only the emulated NIC against kernel loopback and memcpy (perftest
        /// between two emulated hosts, qperf, spead2's ibverbs pair through the launcher
        /// against the same programs over kernel UDP, a 256 MiB copy), with ratios.
        /// `fabric`: only what one fabric process carries (SPEAD multicast between host
        /// pairs).
        #[arg(value_enum)]
        what: Option<BenchWhat>,
        /// With `emu` or `fabric`: how many runs (interleaved) to take medians over.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
        runs: u32,
        /// With `fabric`: the counts of sender/receiver host pairs to run (1 to 50 each;
        /// a count of 1 is needed for the hosts-per-fabric figure).
        #[arg(long, value_delimiter = ',', default_value = "1,2,4", value_parser = clap::value_parser!(u8).range(1..=50))]
        pairs: Vec<u8>,
    },
    /// Run a program on the emulated NIC: builds the emulated libibverbs (crate
    /// `emulator`) and the launcher (release build unless --debug) and runs CMD through
    /// `verbs-emu run` as one host of the emulated fabric: the host's address on eth0,
    /// /dev/infiniband/uverbs0, the device's sysfs entries and the library first on
    /// LD_LIBRARY_PATH, so an unmodified, dynamically linked verbs program (ibv_devinfo,
    /// perftest, spead2, UCX ...) runs as on a host with an RDMA NIC and reaches the
    /// other hosts at their addresses. Exits with CMD's exit code.
    Emu {
        /// A topology file (TOML: `[[host]]` tables with name, ip, personality); default: hosts h1..h4,
        /// 10.100.0.1..4/24, one mlx5 device each.
        #[arg(long, value_name = "FILE")]
        topology: Option<PathBuf>,
        /// The seed of the simulator's random draws.
        #[arg(long)]
        seed: Option<u64>,
        /// The host CMD runs as (sets VERBS_EMU_HOST; h1 by default).
        #[arg(long, value_parser = host_name)]
        host: Option<String>,
        /// At CMD's exit, name the verbs objects it did not destroy (sets VERBS_EMU_LEAKS).
        #[arg(long)]
        leaks: bool,
        /// Capture every frame between hosts into this pcap file.
        #[arg(long, value_name = "OUT", conflicts_with = "no_fabric")]
        pcap: Option<PathBuf>,
        /// Start only the fabric process: print its socket's path (for VERBS_EMU_FABRIC)
        /// and serve programs started by hand until Ctrl-C.
        #[arg(long, conflicts_with = "no_fabric")]
        fabric_only: bool,
        /// Run CMD without a fabric process: it simulates every host itself and reaches
        /// only its own.
        #[arg(long)]
        no_fabric: bool,
        /// Use the debug build of the emulator (the default is the release build).
        #[arg(long)]
        debug: bool,
        /// The command to run, and its arguments.
        #[arg(
            last = true,
            required_unless_present = "fabric_only",
            value_name = "CMD"
        )]
        cmd: Vec<String>,
    },
    /// Run the tests that exercise our unsafe code outside FFI (slot pools, simulated
    /// DMA) under Miri (nightly; installs the miri component if missing).
    Miri,
    /// Package the emulated NIC as a self-contained tarball in `target/dist/` (the
    /// libraries under their sonames, the launcher, the fabric, the topologies, a README): it needs
    /// nothing of Rust, a compiler or rdma-core's headers where it runs.
    Dist {
        /// Then unpack it into an empty folder and, with the workspace hidden, run
        /// `ibv_devinfo` and an `ibv_rc_pingpong` pair through its launcher alone.
        #[arg(long)]
        verify: bool,
        /// Then (as root) run the same checks in a fresh Debian 12 system: a
        /// `debootstrap --variant=minbase` root with only ibverbs-utils and iproute2 (made
        /// once under `target/dist/debian12/`, downloaded from deb.debian.org), chrooted.
        #[arg(long)]
        verify_debian: bool,
    },
    /// The fault swarm: one random scenario per seed on every core, checked against the
    /// invariants and run twice for the same trace (`scenario swarm`). Shard a long run by
    /// seed range.
    Swarm {
        /// The seeds, as A..B (B excluded): one scenario each.
        #[arg(long, value_parser = seed_range)]
        seeds: std::ops::Range<u64>,
        /// Worker threads (default: every core).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        threads: Option<u32>,
        /// Runs the shrinker may spend on each failing seed (0: do not shrink).
        #[arg(long)]
        shrink: Option<u32>,
        /// Where failing scenarios are written (default target/swarm).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Run every cargo-fuzz target in fuzz/ from its stored corpus (nightly; installs
    /// cargo-fuzz if missing): build them once, run each, print the executions of each.
    Fuzz {
        /// Seconds per target (default 60); with --runs, the most each target may take.
        #[arg(long, value_parser = positive)]
        time: Option<u64>,
        /// Executions per target (stopping early after --time seconds, if given).
        #[arg(long, value_parser = positive)]
        runs: Option<u64>,
        /// Only this target.
        #[arg(long, value_parser = fuzz_target)]
        target: Option<String>,
    },
    /// Soak and overload: the simulated verbs receivers (raw and UD) and the UDP receiver
    /// on loopback fed faster than they consume, with malformed packets among good ones;
    /// prints the memory high-water and every counter, and fails unless every packet sent
    /// is delivered or counted as dropped, the good heaps arrive exact and memory stays
    /// bounded. Without --minutes, a short run.
    Soak {
        /// Minutes to run (the long form: --minutes 10).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1440))]
        minutes: Option<u64>,
    },
    /// Run a command inside a throwaway QEMU VM with Soft-RoCE (device rxe0 on veth0, or on
    /// a NIC on an emulated fabric with --fabric).
    ///
    /// Prepares (and caches under target/softroce/) Debian's kernel, busybox and an
    /// initramfs, installs missing Debian packages when run as root, boots with TCG, sets up
    /// rxe0 and runs CMD chrooted into the host's file system (shared read-only, the
    /// workspace writable) in the current directory. Exits with CMD's exit code.
    Vm {
        /// Kill the VM and fail after this many seconds.
        #[arg(long, default_value_t = 300, value_parser = positive)]
        timeout: u64,
        /// Extra environment for CMD, as KEY=VALUE (repeatable).
        #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = key_value)]
        env: Vec<String>,
        /// Guest memory in MiB (256 to 65536).
        #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(256..=65536))]
        memory: u32,
        /// Print the guest's setup log, the QEMU command and timings.
        #[arg(long, short = 'v')]
        verbose: bool,
        /// Keep the job folder (scripts, console log, outputs) under target/softroce/jobs/.
        #[arg(long)]
        keep: bool,
        /// Join an emulated fabric: the VM's NIC on the fabric's QEMU port at this Unix
        /// socket (`verbs-emu-fabric --qemu-stream SOCK`, started first) with rxe0 on it,
        /// plus a user-mode NIC through which the guest reaches the host's loopback as
        /// 10.0.2.2. The fabric's topology must list the VM as a `remote = true` host.
        #[arg(long, value_name = "SOCK", value_parser = unix_socket)]
        fabric: Option<PathBuf>,
        /// With --fabric: the VM's address on the fabric (/24; its MAC is 02:00 and the
        /// address's four bytes).
        #[arg(
            long,
            value_name = "IP",
            default_value = "10.100.0.20",
            requires = "fabric"
        )]
        fabric_ip: std::net::Ipv4Addr,
        /// With --fabric: forward this TCP port of the host's loopback to the same port in
        /// the VM (repeatable), for a server in the VM.
        #[arg(long, value_name = "PORT", requires = "fabric", value_parser = clap::value_parser!(u16).range(1..))]
        forward: Vec<u16>,
        /// QEMU's CPU model (`-cpu`, e.g. `max`), instead of QEMU's default `qemu64` (which
        /// lacks SSE4.2 and POPCNT: numpy 2, so spead2 in Python, dies there of SIGILL).
        #[arg(long, value_name = "MODEL")]
        cpu: Option<String>,
        /// Instead of CMD, run the built-in smoke check: ibv_devinfo, ibv_rc_pingpong and
        /// ibv_ud_pingpong (server and client) and mckey (UD multicast) on rxe0.
        #[arg(long, conflicts_with = "cmd")]
        smoke: bool,
        /// The command to run in the VM, and its arguments.
        #[arg(last = true, required_unless_present = "smoke", value_name = "CMD")]
        cmd: Vec<String>,
    },
}

/// Parses `A..B` with A < B (as `scenario swarm` does).
fn seed_range(text: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not a seed range A..B"))?;
    let seed = |v: &str| {
        v.parse::<u64>()
            .map_err(|e| format!("`{v}` in `{text}` is not a seed: {e}"))
    };
    let (a, b) = (seed(a)?, seed(b)?);
    if a >= b {
        return Err(format!(
            "the seed range `{text}` is empty (A..B needs A < B)"
        ));
    }
    Ok(a..b)
}

/// An existing Unix socket (a fabric's QEMU stream port).
fn unix_socket(text: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(text).map_err(|e| format!("{text}: {e}"))?;
    if !meta.file_type().is_socket() {
        return Err(format!(
            "{text} is not a Unix socket (start `verbs-emu-fabric --qemu-stream {text}` first)"
        ));
    }
    Ok(PathBuf::from(text))
}

/// A whole number of at least 1.
fn positive(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("0 is not allowed: give at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{text}` is not a whole number: {e}")),
    }
}

/// A fuzz target named in `fuzz/Cargo.toml`.
fn fuzz_target(name: &str) -> Result<String, String> {
    let all = fuzz::targets(&cmd::root())?;
    if all.iter().any(|t| t == name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "no fuzz target `{name}`; the targets: {}",
            all.join(", ")
        ))
    }
}

/// `KEY=VALUE` with a non-empty key that is a name of the environment.
fn key_value(text: &str) -> Result<String, String> {
    let (k, _) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not KEY=VALUE"))?;
    let name_char = |c: char| c == '_' || c.is_ascii_alphanumeric();
    if k.is_empty() || !k.chars().all(name_char) || k.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!(
            "`{k}` in `{text}` is not an environment variable name"
        ));
    }
    Ok(text.to_owned())
}

/// A host name as a topology gives it: letters, digits, `-` and `_`.
fn host_name(text: &str) -> Result<String, String> {
    let ok = |c: char| c == '-' || c == '_' || c.is_ascii_alphanumeric();
    if text.is_empty() || !text.chars().all(ok) {
        return Err(format!(
            "`{text}` is not a host name (letters, digits, - and _; h1 by default)"
        ));
    }
    Ok(text.to_owned())
}

/// Parses the command line: `--help` prints and exits 0; any other error prints as one
/// line, `xtask: error: ...`, and exits 2 (clap's status for a usage error).
fn parse() -> Cli {
    cli_oneline::parse("xtask")
}

/// The exit status of a command xtask ran, as xtask's own.
fn exit_with(code: i32) -> ExitCode {
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Success as an exit status.
fn done(r: Result<(), cmd::Error>) -> Result<ExitCode, cmd::Error> {
    r.map(|()| ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = parse();
    let result: Result<ExitCode, cmd::Error> = match cli.command {
        Command::Test {
            wire: true,
            interop: true,
            cases,
            ..
        } => done(cmd::interop::run(&cases)),
        Command::Test {
            wire: true,
            split: true,
            ..
        } => done(cmd::split::run()),
        Command::Test {
            wire: true, rest, ..
        } => done(cmd::test_wire::test_wire(&rest)),
        Command::Test {
            backend: Backend::Sim,
            rest,
            ..
        } => done(cmd::test_sim(&rest)),
        Command::Test {
            backend: Backend::Hw,
            vm,
            timeout,
            rest,
            ..
        } => done(cmd::test_hw(vm, timeout, &rest)),
        Command::Test {
            backend: Backend::Emu,
            rest,
            ..
        } => done(emu_suite::run(&rest)),
        Command::Ci => done(cmd::ci()),
        // The scenario tool prints its own errors; its exit status is xtask's.
        Command::Demo { args } => {
            cmd::scenario_tool(&[vec!["demo".to_owned()], args].concat()).map(exit_with)
        }
        Command::Scenario { args } => cmd::scenario_tool(&args).map(exit_with),
        Command::Replay { args } => {
            cmd::scenario_tool(&[vec!["replay".to_owned()], args].concat()).map(exit_with)
        }
        Command::Bench { what: None, .. } => done(cmd::bench()),
        Command::Bench {
            what: Some(BenchWhat::Emu),
            runs,
            ..
        } => done(cmd::bench_emu::run(runs)),
        Command::Bench {
            what: Some(BenchWhat::Fabric),
            runs,
            pairs,
        } => done(cmd::bench_fabric::run(
            &pairs.iter().map(|&p| usize::from(p)).collect::<Vec<_>>(),
            runs,
        )),
        Command::Emu {
            topology,
            seed,
            host,
            leaks,
            pcap,
            fabric_only,
            no_fabric,
            debug,
            cmd,
        } => {
            let args = cmd::EmuArgs {
                topology,
                seed,
                host,
                leaks,
                pcap,
                fabric_only,
                no_fabric,
                debug,
                direct: false,
            };
            cmd::emu(&cmd, &args).map(exit_with)
        }
        Command::Fuzz { time, runs, target } => {
            let budget = match (runs, time) {
                (Some(n), Some(s)) => fuzz::Budget::RunsWithin(n, s),
                (Some(n), None) => fuzz::Budget::Runs(n),
                (None, s) => fuzz::Budget::Seconds(s.unwrap_or(60)),
            };
            done(fuzz::run(&cmd::root(), target.as_deref(), budget).map(|_| ()))
        }
        Command::Miri => done(miri::run(&cmd::root())),
        Command::Dist {
            verify,
            verify_debian,
        } => done(cmd::dist::make().and_then(|t| {
            println!("{}", t.display());
            if verify {
                cmd::dist::verify(&t)?;
            }
            if verify_debian {
                cmd::dist::verify_debian(&t)?;
            }
            Ok(())
        })),
        Command::Swarm {
            seeds,
            threads,
            shrink,
            out,
        } => {
            let mut args = vec![
                "swarm".to_owned(),
                "--seeds".to_owned(),
                format!("{}..{}", seeds.start, seeds.end),
            ];
            if let Some(t) = threads {
                args.extend(["--threads".to_owned(), t.to_string()]);
            }
            if let Some(n) = shrink {
                args.extend(["--shrink".to_owned(), n.to_string()]);
            }
            if let Some(dir) = out {
                args.push("--out".to_owned());
                args.push(dir.display().to_string());
            }
            cmd::scenario_tool(&args).map(exit_with)
        }
        Command::Soak { minutes } => {
            let seconds = minutes.map_or(cmd::CI_SOAK_SECONDS, |m| m * 60);
            done(cmd::soak(seconds))
        }
        Command::Vm {
            timeout,
            env,
            memory,
            verbose,
            keep,
            smoke,
            fabric,
            fabric_ip,
            forward,
            cpu,
            cmd,
        } => {
            let cmd = if smoke { cmd::smoke_command() } else { cmd };
            let opts = cmd::VmArgs {
                timeout,
                env,
                memory,
                verbose,
                keep,
                fabric,
                fabric_ip,
                forward,
                cpu,
            };
            cmd::vm(&cmd, &opts).map(exit_with)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
