//! `verbs-emu`: runs an unmodified program as one host of the emulated RDMA fabric, with
//! what a real host has: the host's IPv4 address on an interface (`eth0`, in a network
//! namespace of its own joined to the other hosts by a bridge), a character device
//! `/dev/infiniband/uverbsN` and the device's sysfs entries, the emulated libibverbs
//! first on `LD_LIBRARY_PATH` and the fabric process to reach the other hosts. Without
//! root it uses an unprivileged user namespace. See `launcher/README.md`.

mod error;
mod holder;
mod overlay;
mod paths;
mod proto;
mod run;
mod sys;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::Error;

#[derive(Debug, Parser)]
#[command(
    name = "verbs-emu",
    version,
    about = "Run unmodified verbs programs as hosts of the emulated RDMA fabric, without root",
    long_about = "Run unmodified verbs programs as hosts of the emulated RDMA fabric, without root.\n\n\
        `verbs-emu run --host h2 -- CMD ARGS...` runs CMD as host h2: in a network namespace \
        whose eth0 holds h2's address (10.100.0.2/24 in the default topology), with \
        /dev/infiniband/uverbs0 and the device's sysfs entries, and the emulated libibverbs \
        first on LD_LIBRARY_PATH. The first `verbs-emu run` of a fabric starts it (the fabric \
        process and a holder of the namespaces, in the background); it stops when the last \
        one exits. Each host reaches every other at its topology address."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run CMD as a host of the emulated fabric; exits with CMD's exit status.
    Run(RunArgs),
    /// (internal) The holder of a fabric's namespaces, started by `run`.
    #[command(hide = true)]
    Holder(HolderArgs),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The host CMD runs as.
    #[arg(long, default_value = "h1")]
    host: String,
    /// The topology file (TOML, as the emulator's); default: hosts h1..h4 at 10.100.0.1..4.
    /// Set by the first `run` of a fabric; later runs give the same or none.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// The seed of the fabric's and the programs' random draws (default 1); set by the first
    /// `run` of a fabric, later runs give the same or none.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Capture the fabric's frames to this pcap file; set by the first `run` of a fabric,
    /// later runs give the same or none.
    #[arg(long, value_name = "OUT")]
    pcap: Option<PathBuf>,
    /// The fabric to join (or start): runs with the same name are hosts of one network.
    #[arg(long, value_name = "NAME", default_value = "default")]
    fabric: String,
    /// The command and its arguments.
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<OsString>,
}

#[derive(Debug, clap::Args)]
struct HolderArgs {
    #[arg(long)]
    state: PathBuf,
    #[arg(long)]
    fabric_bin: PathBuf,
    #[arg(long)]
    topology: Option<PathBuf>,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    pcap: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || matches!(
                    e.kind(),
                    ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                )
            {
                e.exit();
            }
            // One line: clap's first, without its "error: " and usage.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("verbs-emu: {first} (see verbs-emu --help)");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Cmd::Holder(a) => ExitCode::from(holder::main(holder::Config {
            state: a.state,
            fabric_bin: a.fabric_bin,
            topology: a.topology,
            seed: a.seed,
            pcap: a.pcap,
        })),
        Cmd::Run(a) => {
            let o = run::Options {
                host: a.host,
                topology: a.topology,
                seed: a.seed,
                pcap: a.pcap,
                fabric: a.fabric,
                command: a.command,
            };
            match run::run(&o) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("verbs-emu: {e}");
                    ExitCode::from(Error::exit_code(&e))
                }
            }
        }
    }
}
