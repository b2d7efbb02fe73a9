//! `cargo xtask`: the project's own automation, so that a fresh machine needs nothing but
//! the Rust toolchain and these commands.
//!
//! - `cargo xtask test --backend sim`: every test that runs on the simulator (no system
//!   package needed).
//! - `cargo xtask test --backend hw [--vm]`: the hardware suite (real device, or Soft-RoCE
//!   in a VM).
//! - `cargo xtask ci`: what `.ci/run` calls: format check, clippy with `-D warnings`, docs,
//!   and the test suite of every backend that can run here.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Project automation for the verbs/SPEAD workspace"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which verbs backend a test run targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The deterministic in-process simulator: needs no system package.
    Sim,
    /// libibverbs on a real device, or on Soft-RoCE in a VM with `--vm`.
    Hw,
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
        /// Extra arguments passed to the test binaries (after `--`).
        #[arg(last = true)]
        rest: Vec<String>,
    },
    /// Format check, clippy -D warnings, docs, and the suite of every backend that can run here.
    Ci,
    /// Run the default scenario on the simulator (one sender, four receivers, lossy fabric).
    Demo,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Test {
            backend: Backend::Sim,
            rest,
            ..
        } => cmd::test_sim(&rest),
        Command::Test {
            backend: Backend::Hw,
            vm,
            rest,
        } => cmd::test_hw(vm, &rest),
        Command::Ci => cmd::ci(),
        Command::Demo => cmd::demo(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
