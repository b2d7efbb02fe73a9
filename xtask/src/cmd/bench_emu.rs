//! `cargo xtask bench emu [--runs N]`: the emulated NIC's data path against the machine's
//! own limits, in one run: perftest's `ib_send_lat`, `ib_write_bw` and `ib_send_bw` (64 KiB
//! messages) between two emulated hosts (h1 the server, h2 the client, joined to a fabric
//! process, release build), kernel loopback measured by qperf (`udp_lat`, `tcp_bw`), and
//! the memcpy bound (256 MiB, out of cache). The hosts' frames go through their direct
//! pair (the emulator's `fabric::direct`, the default); `ib_send_lat` and `ib_write_bw`
//! run again with every frame crossing the fabric process (`verbs-emu-fabric
//! --no-direct`), for comparison. The spead2 pair (`bench_spead2`): spead2's ibverbs
//! sender on h2 and ibverbs reader on h1, each started through the launcher (`verbs-emu
//! run`), multicast, against the same two programs over kernel UDP loopback. Each is
//! measured `--runs` times, interleaved, and the table gives every run, the medians and
//! the ratios the emulator is judged by: RC latency (typical and average) against kernel
//! UDP latency, the average's tail against the typical, RC bandwidth against kernel TCP
//! bandwidth, spead2's receiver through the emulator against the same over kernel UDP.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::bench_spead2::{self, PairRun, Spead2};
use super::common::{root, Error};
use super::fabric::FabricProcess;
use crate::vm;

/// One run's figures.
#[derive(Debug, Default, Clone, Copy)]
struct Run {
    /// `ib_send_lat` 2-byte messages: typical and average, microseconds.
    lat_typical_us: f64,
    lat_avg_us: f64,
    /// `ib_write_bw` and `ib_send_bw`, 64 KiB messages, Gb/s (10^9 bits).
    write_gbps: f64,
    send_gbps: f64,
    /// The same through the fabric process (`--no-direct`): typical and average latency,
    /// write bandwidth.
    fabric_lat_typical_us: f64,
    fabric_lat_avg_us: f64,
    fabric_write_gbps: f64,
    /// qperf on loopback: UDP latency (us), TCP bandwidth (Gb/s).
    udp_lat_us: f64,
    tcp_gbps: f64,
    /// memcpy of 256 MiB, Gb/s.
    memcpy_gbps: f64,
    /// The spead2 pair between two emulated hosts (ibverbs sender and reader).
    spead2_emu: PairRun,
    /// The same programs over kernel UDP loopback.
    spead2_udp: PairRun,
}

/// Runs the benchmark and prints its table.
///
/// # Errors
/// A tool missing or failing, or output that does not parse, named.
pub fn run(runs: u32) -> Result<(), Error> {
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES, vm::packages::BENCH_PACKAGES])?;
    let spead2 = Spead2::new()?;
    super::common::build_release(
        &["-p", "emulator", "-p", "verbs-emu"],
        "the emulated libraries, the fabric and the launcher",
    )?;
    let release = root().join("target/release");
    let lib = super::common::link_emulated_libraries(
        &release.join("libibverbs.so"),
        &root().join("target/emu/release-lib"),
    )?;
    // The launcher's state folder (XDG_RUNTIME_DIR) and fabric, the bench's own.
    let runtime = bench_spead2::Runtime::new()?;
    let spead2_fabric = "spead2";
    let mut all = Vec::new();
    for r in 1..=runs {
        eprintln!("xtask bench emu: run {r} of {runs}");
        let memcpy_gbps = memcpy_gbps();
        let (udp_lat_us, tcp_gbps) = qperf()?;
        let fabric = |extra: &[&str]| {
            let mut c = Command::new(release.join("verbs-emu-fabric"));
            c.args(extra).stderr(Stdio::null());
            FabricProcess::start(c)
        };
        let direct = fabric(&[])?;
        let lat = perftest(&direct, &lib, "ib_send_lat", &["-n", "5000"])?;
        let write = perftest(
            &direct,
            &lib,
            "ib_write_bw",
            &["-s", "65536", "-n", "5000", "--report_gbits"],
        )?;
        let send = perftest(
            &direct,
            &lib,
            "ib_send_bw",
            &["-s", "65536", "-n", "5000", "--report_gbits"],
        )?;
        drop(direct);
        let through = fabric(&["--no-direct"])?;
        let fabric_lat = perftest(&through, &lib, "ib_send_lat", &["-n", "5000"])?;
        let fabric_write = perftest(
            &through,
            &lib,
            "ib_write_bw",
            &["-s", "65536", "-n", "5000", "--report_gbits"],
        )?;
        drop(through);
        let spead2_emu =
            spead2.emulated(&release.join("verbs-emu"), runtime.path(), spead2_fabric)?;
        let spead2_udp = spead2.kernel()?;
        let run = Run {
            lat_typical_us: col(&lat, 4, "ib_send_lat t_typical")?,
            lat_avg_us: col(&lat, 5, "ib_send_lat t_avg")?,
            write_gbps: col(&write, 3, "ib_write_bw BW average")?,
            send_gbps: col(&send, 3, "ib_send_bw BW average")?,
            fabric_lat_typical_us: col(&fabric_lat, 4, "ib_send_lat t_typical")?,
            fabric_lat_avg_us: col(&fabric_lat, 5, "ib_send_lat t_avg")?,
            fabric_write_gbps: col(&fabric_write, 3, "ib_write_bw BW average")?,
            udp_lat_us,
            tcp_gbps,
            memcpy_gbps,
            spead2_emu,
            spead2_udp,
        };
        eprintln!("xtask bench emu: {run:?}");
        all.push(run);
    }
    drop(runtime);
    print!("{}", table(&all));
    Ok(())
}

/// A figure taken from one run.
type Figure = fn(&Run) -> f64;

/// The table of every run, the medians and the ratios (Markdown, as the README shows it).
fn table(all: &[Run]) -> String {
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    let med = |f: Figure| median(all.iter().map(f).collect());
    let list = |f: Figure| {
        all.iter()
            .map(|r| format!("{:.2}", f(r)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    line("| measure | runs | median |".into());
    line("| --- | --- | --- |".into());
    let rows: [(&str, Figure); 12] = [
        ("emulator ib_send_lat typical (us)", |r| r.lat_typical_us),
        ("emulator ib_send_lat average (us)", |r| r.lat_avg_us),
        ("through the fabric process: typical (us)", |r| {
            r.fabric_lat_typical_us
        }),
        ("through the fabric process: average (us)", |r| {
            r.fabric_lat_avg_us
        }),
        ("kernel UDP latency, qperf udp_lat (us)", |r| r.udp_lat_us),
        ("emulator ib_write_bw 64 KiB (Gb/s)", |r| r.write_gbps),
        ("through the fabric process (Gb/s)", |r| r.fabric_write_gbps),
        ("emulator ib_send_bw 64 KiB (Gb/s)", |r| r.send_gbps),
        ("kernel TCP bandwidth, qperf tcp_bw (Gb/s)", |r| r.tcp_gbps),
        ("spead2 ibverbs pair, emulator, receiver (Gb/s)", |r| {
            r.spead2_emu.gbps
        }),
        ("spead2 UDP pair, kernel loopback, receiver (Gb/s)", |r| {
            r.spead2_udp.gbps
        }),
        ("memcpy 256 MiB (Gb/s)", |r| r.memcpy_gbps),
    ];
    for (name, f) in rows {
        line(format!("| {name} | {} | {:.2} |", list(f), med(f)));
    }
    line(String::new());
    let heaps = |p: fn(&Run) -> PairRun| {
        let each = all
            .iter()
            .map(|r| p(r).heaps())
            .collect::<Vec<_>>()
            .join("; ");
        let lossless = all.iter().filter(|r| p(r).lossless()).count();
        format!("lossless in {lossless} of {} runs: {each}", all.len())
    };
    line(format!(
        "spead2 heaps complete of those sent ({} MiB in 1 MiB heaps per pair per run), \
         emulator {}; kernel UDP {}",
        bench_spead2::MIB,
        heaps(|r| r.spead2_emu),
        heaps(|r| r.spead2_udp)
    ));
    line(String::new());
    line("| ratio (median of the per-run ratios) | value | aim |".into());
    line("| --- | --- | --- |".into());
    let ratios: [(&str, Figure, &str); 9] = [
        (
            "RC latency typical / kernel UDP latency",
            |r| r.lat_typical_us / r.udp_lat_us,
            "<= 1",
        ),
        (
            "RC latency average / kernel UDP latency",
            |r| r.lat_avg_us / r.udp_lat_us,
            "<= 1",
        ),
        (
            "RC latency average / typical",
            |r| r.lat_avg_us / r.lat_typical_us,
            "<= 2",
        ),
        (
            "RC write bandwidth / kernel TCP bandwidth",
            |r| r.write_gbps / r.tcp_gbps,
            ">= 1",
        ),
        (
            "RC write bandwidth / memcpy",
            |r| r.write_gbps / r.memcpy_gbps,
            "(the bound)",
        ),
        (
            "RC latency typical, fabric process / direct",
            |r| r.fabric_lat_typical_us / r.lat_typical_us,
            "",
        ),
        (
            "RC write bandwidth, direct / fabric process",
            |r| r.write_gbps / r.fabric_write_gbps,
            "",
        ),
        (
            "spead2 receiver, emulator / kernel UDP",
            |r| r.spead2_emu.gbps / r.spead2_udp.gbps,
            "",
        ),
        (
            "spead2 receiver, emulator / memcpy",
            |r| r.spead2_emu.gbps / r.memcpy_gbps,
            "(the bound)",
        ),
    ];
    for (name, f, aim) in ratios {
        line(format!("| {name} | {:.2} | {aim} |", med(f)));
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Copies 256 MiB once to warm up, then three times, and gives the best rate.
fn memcpy_gbps() -> f64 {
    const LEN: usize = 256 << 20;
    let src = vec![0x5au8; LEN];
    let mut dst = vec![0u8; LEN];
    dst.copy_from_slice(&src);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    LEN as f64 * 8.0 / best / 1e9
}

/// qperf on loopback: UDP latency (us) and TCP bandwidth (Gb/s).
fn qperf() -> Result<(f64, f64), Error> {
    let mut server = Command::new("qperf")
        .args(["--listen_port", "19766"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start qperf: {e}"))?;
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("qperf")
        .args([
            "--listen_port",
            "19766",
            "-t",
            "3",
            "127.0.0.1",
            "udp_lat",
            "tcp_bw",
        ])
        .output()
        .map_err(|e| format!("cannot run qperf: {e}"));
    let _ = server.kill();
    let _ = server.wait();
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = |key: &str| -> Result<(f64, String), Error> {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .ok_or_else(|| format!("qperf printed no {key}: {text}"))?;
        let mut words = line.split('=').nth(1).unwrap_or("").split_whitespace();
        let v: f64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| format!("qperf: cannot read {line:?}"))?;
        Ok((v, words.next().unwrap_or("").to_owned()))
    };
    let (lat, unit) = value("latency")?;
    let lat_us = match unit.as_str() {
        "us" => lat,
        "ns" => lat / 1000.0,
        "ms" => lat * 1000.0,
        u => return Err(format!("qperf latency in unknown unit {u}")),
    };
    let (bw, unit) = value("bw")?;
    let gbps = match unit.as_str() {
        "GB/sec" => bw * 8.0,
        "MB/sec" => bw * 8.0 / 1000.0,
        u => return Err(format!("qperf bandwidth in unknown unit {u}")),
    };
    Ok((lat_us, gbps))
}

/// Runs perftest's `tool` as server (h1) and client (h2), and returns the client's result
/// row, split into words.
fn perftest(
    fabric: &FabricProcess,
    lib: &Path,
    tool: &str,
    args: &[&str],
) -> Result<Vec<String>, Error> {
    let port = "18777";
    let host = |h: &str| {
        let mut c = Command::new(tool);
        c.args(["-d", "mlx5_0", "-x", "1", "-p", port])
            .args(args)
            .env("LD_LIBRARY_PATH", lib)
            .env("VERBS_EMU_FABRIC", &fabric.socket)
            .env("VERBS_EMU_HOST", h)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let server = host("h1")
        .spawn()
        .map_err(|e| format!("cannot start {tool} (perftest): {e}"))?;
    std::thread::sleep(Duration::from_millis(500));
    let client = host("h2")
        .arg("127.0.0.1")
        .output()
        .map_err(|e| format!("cannot start {tool}: {e}"))?;
    let server = server
        .wait_with_output()
        .map_err(|e| format!("{tool} server: {e}"))?;
    let text = String::from_utf8_lossy(&client.stdout).into_owned();
    if !client.status.success() || !server.status.success() {
        return Err(format!(
            "{tool}: client {}, server {}: {}{}",
            client.status,
            server.status,
            text,
            String::from_utf8_lossy(&client.stderr)
        ));
    }
    // The result row is the one line starting with the message size.
    text.lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .find(|w| w.len() >= 4 && w[0].parse::<u64>().is_ok() && w[1].parse::<u64>().is_ok())
        .ok_or_else(|| format!("{tool}: no result row in {text}"))
}

fn col(row: &[String], i: usize, what: &str) -> Result<f64, Error> {
    row.get(i)
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| format!("{what}: no number in column {i} of {row:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(complete: u64, incomplete: u64, gbps: f64) -> PairRun {
        PairRun {
            sent: 512,
            complete,
            incomplete,
            bad: 0,
            gbps,
            packets: 129 * complete,
            delivered: None,
        }
    }

    fn run(emu: f64, udp: f64, memcpy: f64) -> Run {
        Run {
            lat_typical_us: 4.0,
            lat_avg_us: 6.0,
            udp_lat_us: 8.0,
            write_gbps: 20.0,
            tcp_gbps: 40.0,
            fabric_write_gbps: 10.0,
            fabric_lat_typical_us: 16.0,
            memcpy_gbps: memcpy,
            spead2_emu: pair(512, 0, emu),
            spead2_udp: pair(505, 3, udp),
            ..Run::default()
        }
    }

    /// The line of `table` that starts with `| name |`.
    fn row<'a>(table: &'a str, name: &str) -> &'a str {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row {name:?} in\n{table}"))
    }

    #[test]
    fn the_spead2_pair_has_its_rows_and_ratios() {
        // Per-run ratios emulator/kernel UDP: 2, 3, 0.5; their median 2 (the medians'
        // ratio would be 25 / 10 = 2.5). Per-run emulator/memcpy: 0.2, 0.25, 0.1.
        let t = table(&[
            run(20.0, 10.0, 100.0),
            run(30.0, 10.0, 120.0),
            run(25.0, 50.0, 250.0),
        ]);
        assert_eq!(
            row(&t, "spead2 ibverbs pair, emulator, receiver (Gb/s)"),
            "| spead2 ibverbs pair, emulator, receiver (Gb/s) | 20.00, 30.00, 25.00 | 25.00 |"
        );
        assert_eq!(
            row(&t, "spead2 UDP pair, kernel loopback, receiver (Gb/s)"),
            "| spead2 UDP pair, kernel loopback, receiver (Gb/s) | 10.00, 10.00, 50.00 | 10.00 |"
        );
        assert_eq!(
            row(&t, "spead2 receiver, emulator / kernel UDP"),
            "| spead2 receiver, emulator / kernel UDP | 2.00 |  |"
        );
        assert_eq!(
            row(&t, "spead2 receiver, emulator / memcpy"),
            "| spead2 receiver, emulator / memcpy | 0.20 | (the bound) |"
        );
        assert!(
            t.contains(
                "emulator lossless in 3 of 3 runs: 512/512; 512/512; 512/512; kernel UDP \
                 lossless in 0 of 3 runs: 505/512 (3 incomplete, 4 missing); 505/512 \
                 (3 incomplete, 4 missing); 505/512 (3 incomplete, 4 missing)"
            ),
            "{t}"
        );
        // The RC rows are unchanged: 4 / 8 and 20 / 40.
        assert_eq!(
            row(&t, "RC latency typical / kernel UDP latency"),
            "| RC latency typical / kernel UDP latency | 0.50 | <= 1 |"
        );
        assert_eq!(
            row(&t, "RC write bandwidth / kernel TCP bandwidth"),
            "| RC write bandwidth / kernel TCP bandwidth | 0.50 | >= 1 |"
        );
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
