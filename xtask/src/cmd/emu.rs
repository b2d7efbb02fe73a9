//! `cargo xtask emu`: a command on the emulated libibverbs. By default a thin wrapper
//! over the launcher (`verbs-emu run`, crate `launcher`), release build: the command runs
//! as one host of the fabric with that host's address, device files and sysfs entries.
//! `--no-fabric` and `--fabric-only`, and the emulated hardware suites
//! (`cmd/emu_suite.rs`), start the fabric here instead and run the command with the
//! library first on `LD_LIBRARY_PATH`, without namespaces.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::{cargo, root, run, Error};
use super::fabric::FabricProcess;
use crate::vm;

/// The options of `cargo xtask emu` besides the command.
#[derive(Debug, Clone, Default)]
pub struct EmuArgs {
    /// A topology file (TOML) instead of the default four hosts.
    pub topology: Option<PathBuf>,
    /// The seed of the simulator's random draws.
    pub seed: Option<u64>,
    /// The host the command is (`VERBS_EMU_HOST`; h1 by default).
    pub host: Option<String>,
    /// Report the verbs objects CMD did not destroy, at its exit (`VERBS_EMU_LEAKS`).
    pub leaks: bool,
    /// Capture every frame between hosts into this pcap (the fabric process writes it).
    pub pcap: Option<PathBuf>,
    /// Start only the fabric process, print its socket's path and serve until Ctrl-C.
    pub fabric_only: bool,
    /// Run CMD alone, simulating every host in its own process (no fabric process).
    pub no_fabric: bool,
    /// Use the debug build (the default is the release build).
    pub debug: bool,
    /// Start the fabric here and run CMD with the library on `LD_LIBRARY_PATH`, not
    /// through the launcher (the emulated hardware suites).
    pub direct: bool,
}

impl EmuArgs {
    /// `target/release` or `target/debug`.
    fn profile_dir(&self) -> PathBuf {
        root()
            .join("target")
            .join(if self.debug { "debug" } else { "release" })
    }
}

/// The folder `cargo xtask emu` puts first on `LD_LIBRARY_PATH`: the built emulator as
/// `libibverbs.so.1`, and under the names of the libraries it also stands in for
/// (`librdmacm.so.1`, `libmlx5.so.1`; glibc loads the one file once under every name).
fn emu_lib_dir(args: &EmuArgs) -> Result<PathBuf, Error> {
    super::common::link_emulated_libraries(
        &args.profile_dir().join("libibverbs.so"),
        &root()
            .join("target/emu")
            .join(if args.debug { "lib" } else { "release-lib" }),
    )
}

/// Refuses a file that cannot be read as text: missing, a directory, empty, unreadable or
/// not UTF-8; the error names the option and the file.
fn check_readable(option: &str, p: &Path) -> Result<(), Error> {
    let bytes = std::fs::read(p).map_err(|e| format!("{option} {}: {e}", p.display()))?;
    if bytes.is_empty() {
        return Err(format!("{option} {}: empty file", p.display()));
    }
    std::str::from_utf8(&bytes).map_err(|e| {
        format!(
            "{option} {}: not UTF-8 text (byte {})",
            p.display(),
            e.valid_up_to()
        )
    })?;
    Ok(())
}

/// Refuses an output file whose folder does not exist or is not a folder.
fn check_writable_dir(option: &str, p: &Path) -> Result<(), Error> {
    if p.is_dir() {
        return Err(format!("{option} {}: Is a directory", p.display()));
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "{option} {}: {} is not a directory",
            p.display(),
            dir.display()
        )),
        Err(e) => Err(format!("{option} {}: {}: {e}", p.display(), dir.display())),
    }
}

/// A path made absolute (the fabric and CMD may run elsewhere), or an error naming the option.
fn absolute(option: &str, p: &Path) -> Result<PathBuf, Error> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    std::env::current_dir()
        .map(|d| d.join(p))
        .map_err(|e| format!("{option} {}: {e}", p.display()))
}

/// The options the fabric process and the launcher share: `--topology`, `--seed` and
/// `--pcap` (files made absolute: they may run elsewhere).
fn fabric_options(c: &mut Command, args: &EmuArgs) -> Result<(), Error> {
    if let Some(t) = &args.topology {
        c.arg("--topology").arg(absolute("--topology", t)?);
    }
    if let Some(seed) = args.seed {
        c.args(["--seed", &seed.to_string()]);
    }
    if let Some(p) = &args.pcap {
        c.arg("--pcap").arg(absolute("--pcap", p)?);
    }
    Ok(())
}

/// Starts the fabric process of `cargo xtask emu` with its options.
fn start_fabric(args: &EmuArgs) -> Result<FabricProcess, Error> {
    let mut c = Command::new(args.profile_dir().join("verbs-emu-fabric"));
    fabric_options(&mut c, args)?;
    FabricProcess::start(c).map_err(|e| format!("{e}; its message is above"))
}

/// `cargo xtask emu [--topology FILE] [--seed N] [--host H] [--pcap OUT] [--leaks]
/// [--debug] [--no-fabric | --fabric-only] -- CMD ARGS...`: builds the emulated libibverbs,
/// the fabric process and the launcher (release build unless `--debug`) and runs CMD
/// through `verbs-emu run` as host H; returns CMD's exit code (128 + the signal number
/// when a signal ended it). `--no-fabric` runs CMD alone with the library first on
/// `LD_LIBRARY_PATH` (it simulates every host itself); `--fabric-only` starts the fabric,
/// prints its socket's path (what programs give in `VERBS_EMU_FABRIC`) and serves until
/// Ctrl-C.
pub fn emu(cmd: &[String], args: &EmuArgs) -> Result<i32, Error> {
    let command = cmd.split_first();
    if command.is_none() && !args.fabric_only {
        return Err(
            "cargo xtask emu: no command given (usage: cargo xtask emu -- CMD ARGS...)".into(),
        );
    }
    if args.fabric_only && args.no_fabric {
        return Err("cargo xtask emu: --fabric-only and --no-fabric exclude each other".into());
    }
    if args.no_fabric && args.pcap.is_some() {
        return Err("cargo xtask emu: --pcap needs the fabric (drop --no-fabric)".into());
    }
    // Files first, before anything is installed or built.
    if let Some(t) = &args.topology {
        check_readable("--topology", t)?;
    }
    if let Some(p) = &args.pcap {
        check_writable_dir("--pcap", p)?;
    }
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES])?;
    let launcher = !args.no_fabric && !args.fabric_only && !args.direct;
    let mut build = cargo();
    build.args(["build", "--quiet", "-p", "emulator"]);
    if launcher {
        build.args(["-p", "verbs-emu"]);
    }
    if !args.debug {
        build.arg("--release");
    }
    run(
        build,
        "building the emulated libibverbs, the fabric process and the launcher",
    )?;
    if launcher {
        return through_launcher(cmd, args);
    }
    let lib = emu_lib_dir(args)?;
    let fabric = if args.no_fabric {
        None
    } else {
        Some(start_fabric(args)?)
    };
    let Some((program, program_args)) = command.filter(|_| !args.fabric_only) else {
        let fabric = fabric.ok_or("cargo xtask emu: no fabric")?;
        println!("{}", fabric.socket);
        eprintln!(
            "xtask emu: the fabric serves until Ctrl-C; run programs as hosts with\n  \
             LD_LIBRARY_PATH={} VERBS_EMU_FABRIC={} VERBS_EMU_HOST=h2 PROGRAM ...{}",
            lib.display(),
            fabric.socket,
            args.topology.as_ref().map_or(String::new(), |t| format!(
                " (and VERBS_EMU_TOPOLOGY={})",
                t.display()
            ))
        );
        let status = fabric.serve()?;
        return Ok(status.code().unwrap_or(0));
    };
    let mut path = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut c = Command::new(program);
    c.args(program_args).env("LD_LIBRARY_PATH", path);
    match &fabric {
        Some(f) => c.env("VERBS_EMU_FABRIC", &f.socket),
        None => c.env_remove("VERBS_EMU_FABRIC"),
    };
    if let Some(t) = &args.topology {
        let abs =
            std::fs::canonicalize(t).map_err(|e| format!("--topology {}: {e}", t.display()))?;
        c.env("VERBS_EMU_TOPOLOGY", abs);
    }
    if let Some(seed) = args.seed {
        c.env("VERBS_EMU_SEED", seed.to_string());
    }
    if let Some(host) = &args.host {
        c.env("VERBS_EMU_HOST", host);
    }
    if args.leaks {
        c.env("VERBS_EMU_LEAKS", "1");
    }
    let status = c.status();
    if let Some(f) = fabric {
        let status = f.stop()?;
        if !status.success() {
            return Err(format!("the fabric process failed ({status})"));
        }
    }
    let status = status.map_err(|e| format!("cannot start {program}: {e}"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

/// Runs `verbs-emu run` (beside the built library) with the options it shares with
/// `cargo xtask emu`, and returns its exit status (the command's).
fn through_launcher(cmd: &[String], args: &EmuArgs) -> Result<i32, Error> {
    let bin = args.profile_dir().join("verbs-emu");
    let mut c = Command::new(&bin);
    c.arg("run");
    if let Some(h) = &args.host {
        c.args(["--host", h]);
    }
    fabric_options(&mut c, args)?;
    if args.leaks {
        c.env("VERBS_EMU_LEAKS", "1");
    }
    c.arg("--").args(cmd);
    let status = c
        .status()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}
