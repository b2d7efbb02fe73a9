//! `cargo xtask bench emu [--runs N]`: the emulated NIC's data path against the machine's
//! own limits, in one run: perftest's `ib_send_lat`, `ib_write_bw` and `ib_send_bw` (64 KiB
//! messages) between two emulated hosts (h1 the server, h2 the client, joined to a fabric
//! process, release build), kernel loopback measured by qperf (`udp_lat`, `tcp_bw`), and
//! the memcpy bound (256 MiB, out of cache). The hosts' frames go through their direct
//! pair (the emulator's `fabric::direct`, the default); `ib_send_lat` and `ib_write_bw`
//! run again with every frame crossing the fabric process (`verbs-emu-fabric
//! --no-direct`), for comparison. Each is measured `--runs` times, interleaved, and the
//! table gives every run, the medians and the ratios the emulator is judged by: RC latency
//! (typical and average) against kernel UDP latency, the average's tail against the
//! typical, RC bandwidth against kernel TCP bandwidth.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{cargo, root, Error};
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
}

/// Runs the benchmark and prints its table.
///
/// # Errors
/// A tool missing or failing, or output that does not parse, named.
pub fn run(runs: u32) -> Result<(), Error> {
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES, vm::packages::BENCH_PACKAGES])?;
    let mut build = cargo();
    build.args(["build", "--release", "--quiet", "-p", "emulator"]);
    super::common::run(
        build,
        "building the emulated libraries and the fabric (release)",
    )?;
    let release = root().join("target/release");
    let lib = super::common::link_emulated_libraries(
        &release.join("libibverbs.so"),
        &root().join("target/emu/release-lib"),
    )?;
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
        };
        eprintln!("xtask bench emu: {run:?}");
        all.push(run);
    }
    print_table(&all);
    Ok(())
}

/// A figure taken from one run.
type Figure = fn(&Run) -> f64;

fn print_table(all: &[Run]) {
    let med = |f: Figure| median(all.iter().map(f).collect());
    let list = |f: Figure| {
        all.iter()
            .map(|r| format!("{:.2}", f(r)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("| measure | runs | median |");
    println!("| --- | --- | --- |");
    let rows: [(&str, Figure); 10] = [
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
        ("memcpy 256 MiB (Gb/s)", |r| r.memcpy_gbps),
    ];
    for (name, f) in rows {
        println!("| {name} | {} | {:.2} |", list(f), med(f));
    }
    println!();
    println!("| ratio (median of the per-run ratios) | value | aim |");
    println!("| --- | --- | --- |");
    let ratios: [(&str, Figure, &str); 7] = [
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
    ];
    for (name, f, aim) in ratios {
        println!("| {name} | {:.2} | {aim} |", med(f));
    }
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
