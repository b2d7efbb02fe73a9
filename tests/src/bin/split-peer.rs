//! `split-peer`: one side of the split conformance cases
//! (`workspace_tests::conformance::split`) on real verbs (backend-hw): on rxe in the
//! Soft-RoCE VM, or, with the emulated libibverbs first on `LD_LIBRARY_PATH`, on an
//! emulated fabric host. Two of them, joined by TCP, run each case between their devices.
//!
//! ```text
//! split-peer --sides passive,active --listen 127.0.0.1:18610 --out way3.txt
//! split-peer --sides active,passive --connect 10.0.2.2:18610 --out way2.txt
//! ```
//!
//! For each side named by `--sides`, in order, it takes one control connection (accepts
//! one on `--listen`, or connects to `--connect`, retrying while nothing listens) and
//! runs every case (or those whose name starts with one of the `--cases` prefixes) as that
//! side. The active side writes the outcomes (`case NAME`, lines, `end NAME`) to `--out`.
//! Exit 0 when every case ran (their outcomes are compared by `cargo xtask test --wire`),
//! 1 when one could not run (a panic names it), 2 on bad arguments.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;

use backend_hw::HwVerbs;
use clap::Parser;
use workspace_tests::conformance::rig::{open, Env};
use workspace_tests::conformance::split::{self, Ctl, Side};

/// One side of the split conformance cases.
#[derive(Debug, Parser)]
#[command(name = "split-peer")]
struct Args {
    /// The sides to play, one control connection each, in order (`active`, `passive`).
    #[arg(long, value_delimiter = ',', required = true)]
    sides: Vec<String>,
    /// Listen for the peer's connections here.
    #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
    listen: Option<SocketAddr>,
    /// Connect to the peer here.
    #[arg(long)]
    connect: Option<SocketAddr>,
    /// Only the cases whose name starts with one of these (all when none).
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// The RDMA device (default: `RDMA_DEVICE`, else rxe0).
    #[arg(long)]
    device: Option<String>,
    /// Where the active side writes the outcomes.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the names of the cases and exit.
    #[arg(long)]
    list: bool,
}

fn names(prefixes: &[String]) -> Vec<&'static str> {
    split::cases::all::<<HwVerbs as verbs_api::Verbs>::Context>()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| prefixes.is_empty() || prefixes.iter().any(|p| n.starts_with(p.as_str())))
        .collect()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let names = names(&args.cases);
    if args.list {
        for n in &names {
            println!("{n}");
        }
        return ExitCode::SUCCESS;
    }
    let sides: Result<Vec<Side>, String> = args.sides.iter().map(|s| Side::parse(s)).collect();
    let sides = match sides {
        Ok(s) if s.iter().filter(|s| **s == Side::Active).count() <= 1 => s,
        Ok(_) => {
            eprintln!("split-peer: at most one active side (it writes --out)");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("split-peer: {e}");
            return ExitCode::from(2);
        }
    };
    if names.is_empty() {
        eprintln!("split-peer: no case matches {:?}", args.cases);
        return ExitCode::from(2);
    }
    match run(&args, &sides, &names) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("split-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args, sides: &[Side], names: &[&str]) -> Result<(), String> {
    let device = args
        .device
        .clone()
        .or_else(|| std::env::var("RDMA_DEVICE").ok())
        .unwrap_or_else(|| "rxe0".into());
    let env = Env {
        verbs: HwVerbs::new(),
        device,
        port: 1,
        lossy: None,
    };
    let listener = match args.listen {
        Some(a) => Some(TcpListener::bind(a).map_err(|e| format!("listen on {a}: {e}"))?),
        None => None,
    };
    for &side in sides {
        let mut ctl = match (&listener, args.connect) {
            (Some(l), _) => {
                let mut c = Ctl::accept(l)?;
                c.greet()?;
                c
            }
            (None, Some(a)) => Ctl::connect(a)?,
            (None, None) => unreachable!("clap requires --listen or --connect"),
        };
        eprintln!(
            "split-peer: {} side of {} cases on {}",
            side.name(),
            names.len(),
            env.device
        );
        let outcomes = split::run_cases(side, &mut ctl, names, || open(&env))?;
        if side == Side::Active {
            let text = {
                let mut v = Vec::new();
                split::write_outcome(&mut v, &outcomes).map_err(|e| e.to_string())?;
                v
            };
            match &args.out {
                Some(p) => std::fs::write(p, &text)
                    .map_err(|e| format!("cannot write {}: {e}", p.display()))?,
                None => std::io::stdout()
                    .write_all(&text)
                    .map_err(|e| e.to_string())?,
            }
        }
    }
    Ok(())
}
