//! `soak --seconds S` (what `cargo xtask soak [--minutes M]` runs): the UDP receiver on
//! loopback and the verbs receivers (raw and UD) on the simulator, each fed faster than
//! it consumes and then flooded with malformed datagrams among good ones, for S seconds
//! in all (see `workspace_tests::soak`). Each of the six phases runs a short warm-up, then
//! the rest of its share; it prints every counter and the memory high-water (VmHWM)
//! after the warm-up and after the phase, and fails (exit 1) when the counts do not add
//! up, a complete heap has wrong bytes, a flood loses a good heap, or the high-water grew
//! by more than [`GROWTH_KIB`] over the long part of a phase. Exit 2 on bad arguments.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use workspace_tests::soak::{self, Options};
use workspace_tests::spead_verbs::Mode;

/// The most the memory high-water may grow over the long part of a phase.
const GROWTH_KIB: u64 = 16 * 1024;

fn usage(message: &str) -> ExitCode {
    eprintln!("soak: error: {message} (usage: soak --seconds S, S from 6 to 86400)");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds = match args.as_slice() {
        [flag, v] if flag == "--seconds" => match v.parse::<u64>() {
            Ok(s) if (6..=86_400).contains(&s) => s,
            Ok(s) => return usage(&format!("--seconds {s} is outside 6..=86400")),
            Err(e) => return usage(&format!("--seconds {v}: {e}")),
        },
        _ => return usage(&format!("unexpected arguments {args:?}")),
    };
    let share = Duration::from_secs(seconds) / 6;
    let phases: [(&str, Option<Mode>, bool); 6] = [
        ("udp overload", None, true),
        ("udp malformed flood", None, false),
        ("verbs raw overload", Some(Mode::Raw), true),
        ("verbs raw malformed flood", Some(Mode::Raw), false),
        ("verbs ud overload", Some(Mode::Ud), true),
        ("verbs ud malformed flood", Some(Mode::Ud), false),
    ];
    println!(
        "soak: {seconds} s: six phases of {:.1} s (a tenth of each a warm-up)",
        share.as_secs_f64()
    );
    let started = Instant::now();
    let mut failures = Vec::new();
    for (name, mode, overload) in phases {
        let run = |d: Duration| {
            let opts = Options {
                duration: Some(d),
                ..Options::new(u64::MAX, overload)
            };
            match mode {
                None => soak::udp(&opts),
                Some(m) => soak::verbs(m, &opts),
            }
        };
        let _ = run(share / 10);
        let warm = soak::peak_rss_kib().unwrap_or(0);
        let phase_start = Instant::now();
        let r = run(share - share / 10);
        let wall = phase_start.elapsed().as_secs_f64();
        let end = soak::peak_rss_kib().unwrap_or(0);
        println!("{name} ({wall:.1} s): {}", r.line());
        println!(
            "  memory high-water: {:.1} MiB after the warm-up, {:.1} MiB after the phase (now {:.1} MiB resident)",
            warm as f64 / 1024.0,
            end as f64 / 1024.0,
            soak::rss_kib().unwrap_or(0) as f64 / 1024.0
        );
        let mut problems = Vec::new();
        if let Err(e) = r.check() {
            problems.push(e);
        }
        if !overload {
            if r.dropped_below() != 0 {
                problems.push(format!("{} dropped below the receiver", r.dropped_below()));
            }
            if r.complete != r.heaps_sent || r.incomplete != 0 {
                problems.push(format!(
                    "{} of {} heaps complete, {} incomplete",
                    r.complete, r.heaps_sent, r.incomplete
                ));
            }
            if r.malformed_counted != r.malformed {
                problems.push(format!(
                    "{} malformed sent, {} counted",
                    r.malformed, r.malformed_counted
                ));
            }
        }
        if end > warm + GROWTH_KIB {
            problems.push(format!("the memory high-water grew by {} KiB", end - warm));
        }
        for p in &problems {
            println!("  FAILED: {p}");
        }
        failures.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
    }
    println!(
        "soak: {:.1} s; {}",
        started.elapsed().as_secs_f64(),
        if failures.is_empty() {
            "every datagram received or counted as dropped, every complete heap exact, every flood heap delivered, memory bounded".to_string()
        } else {
            format!("{} failures", failures.len())
        }
    );
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
