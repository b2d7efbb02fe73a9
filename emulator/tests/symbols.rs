//! The library's dynamic symbol table against Debian's `libibverbs.so.1` and the programs
//! linked to it (`objdump`, from binutils).

mod common;

use common::{lib_dir, require, run, stdout};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const DEBIAN_LIB: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";

fn objdump(args: &[&str], file: &Path) -> String {
    let mut c = Command::new(require("objdump", "binutils"));
    c.args(args).arg(file);
    let o = run(c);
    assert!(o.status.success(), "objdump {args:?} {}", file.display());
    stdout(&o)
}

/// `(name, version)` of the dynamic symbols `objdump -T` lists with an IBVERBS version,
/// defined (`defined == true`) or needed.
fn ibverbs_symbols(file: &Path, defined: bool) -> BTreeSet<(String, String)> {
    versioned_symbols(file, "IBVERBS_", defined)
}

/// `(name, version)` of the dynamic symbols whose version starts with `node` (`IBVERBS_`,
/// `RDMACM_`, `MLX5_`), defined or needed; a node's own entry (name == version) is left out.
fn versioned_symbols(file: &Path, node: &str, defined: bool) -> BTreeSet<(String, String)> {
    objdump(&["-T"], file)
        .lines()
        .filter(|l| l.contains(node) && l.contains("*UND*") != defined)
        .filter_map(|l| {
            let mut words = l.split_whitespace().rev();
            let name = words.next()?;
            let version = words.next()?.trim_matches(|c| c == '(' || c == ')');
            Some((name.to_owned(), version.to_owned()))
        })
        .filter(|(name, version)| name != version)
        .collect()
}

fn ours() -> std::path::PathBuf {
    lib_dir().join("libibverbs.so.1")
}

/// The "Version definitions" block of `objdump -p`, without its first line (the file).
fn version_definitions(file: &Path) -> Vec<String> {
    let text = objdump(&["-p"], file);
    text.lines()
        .skip_while(|l| !l.starts_with("Version definitions:"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn soname_and_version_nodes_are_debians() {
    require("ibv_devinfo", "ibverbs-utils");
    assert!(Path::new(DEBIAN_LIB).exists(), "install libibverbs1");
    let p = objdump(&["-p"], &ours());
    assert!(
        p.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["SONAME", "libibverbs.so.1"]),
        "{p}"
    );
    // The nodes, in order. Debian's also name each node's parent (a `\tIBVERBS_1.0` line
    // after IBVERBS_1.1 ...); rust-lld, which links ours, writes no parent entries. The
    // dynamic linker checks only that a needed version exists, never the parents.
    let theirs: Vec<String> = version_definitions(Path::new(DEBIAN_LIB))
        .into_iter()
        .filter(|l| !l.starts_with('\t'))
        .collect();
    assert_eq!(theirs.len(), 13, "{theirs:?}");
    // The library also carries librdmacm's and libmlx5's nodes (tests/rdmacm.rs), after
    // these.
    let ibverbs: Vec<String> = version_definitions(&ours())
        .into_iter()
        .filter(|l| l.contains(" IBVERBS_"))
        .collect();
    assert_eq!(ibverbs, theirs);
}

#[test]
fn the_symbol_table_is_the_exports_table() {
    let got = ibverbs_symbols(&ours(), true);
    let want: BTreeSet<(String, String)> = ibverbs::symbols::libibverbs::EXPORTS
        .iter()
        .chain(ibverbs::verbs::provider::DATA_EXPORTS)
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(got, want);
    // Each is where Debian's library has its default version.
    let debian = ibverbs_symbols(Path::new(DEBIAN_LIB), true);
    for s in &want {
        assert!(debian.contains(s), "Debian's libibverbs has no {s:?}");
    }
}

#[test]
fn programs_find_every_symbol_they_need() {
    let ours = ibverbs_symbols(&ours(), true);
    for program in [
        "ibv_devices",
        "ibv_devinfo",
        "ibv_rc_pingpong",
        "ibv_uc_pingpong",
        "ibv_ud_pingpong",
        "ibv_srq_pingpong",
    ] {
        let needed = ibverbs_symbols(&require(program, "ibverbs-utils"), false);
        assert!(!needed.is_empty(), "{program} links no IBVERBS symbol?");
        let missing: Vec<_> = needed.difference(&ours).collect();
        assert!(missing.is_empty(), "{program} needs {missing:?}");
    }
}

/// `(name, version)` of the symbols Debian's library exports at their default version:
/// every public node's, and the private node's (`ibv_query_gid_type`, which ibv_devinfo
/// uses, and the provider interface that Debian's provider libraries bind to).
fn debian_symbols() -> BTreeSet<(String, String)> {
    objdump(&["-T"], Path::new(DEBIAN_LIB))
        .lines()
        .filter(|l| l.contains(" IBVERBS_") && !l.contains("*UND*"))
        .filter_map(|l| {
            let mut words = l.split_whitespace().rev();
            let name = words.next()?;
            let version = words.next()?;
            Some((name.to_owned(), version.to_owned()))
        })
        .filter(|(name, version)| name != version)
        .collect()
}

#[test]
fn every_symbol_of_debians_library_is_exported() {
    let want = debian_symbols();
    let private = want
        .iter()
        .filter(|(_, v)| v == "IBVERBS_PRIVATE_34")
        .count();
    assert_eq!((want.len(), private), (146, 71), "{want:?}");
    assert_eq!(ibverbs_symbols(&ours(), true), want);
}

/// Runs `program -h` with every symbol bound at start (`LD_BIND_NOW`), so the dynamic
/// linker resolves all of the program's and its libraries' needs (Debian's librdmacm
/// included) against the emulator before main.
fn usage(program: &str, package: &str) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = common::emulated(&require(program, package));
    c.arg0(program).arg("-h").env("LD_BIND_NOW", "1");
    run(c)
}

#[test]
fn rdma_core_programs_start_with_every_symbol_bound() {
    for program in [
        "ibv_rc_pingpong",
        "ibv_uc_pingpong",
        "ibv_ud_pingpong",
        "ibv_srq_pingpong",
    ] {
        let o = usage(program, "ibverbs-utils");
        assert_eq!(o.status.code(), Some(1), "{program}");
        assert_eq!(
            common::stderr(&o),
            format!("{program}: invalid option -- 'h'\n")
        );
        assert!(stdout(&o).starts_with("Usage:\n"), "{program}");
    }
    // rdmacm-utils load librdmacm.so.1: the emulator's, the same library.
    let o = usage("mckey", "rdmacm-utils");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(common::stderr(&o), "mckey: invalid option -- 'h'\n");
    assert!(stdout(&o).starts_with("usage: mckey\n"));
    // perftest links Debian's provider libraries (libmlx5, libefa), which bind to this
    // library's provider interface.
    for program in [
        "ib_send_bw",
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_lat",
        "ib_read_lat",
    ] {
        let o = usage(program, "perftest");
        assert_eq!(o.status.code(), Some(1), "{program}");
        assert_eq!(common::stderr(&o), "", "{program}");
        assert!(
            stdout(&o).starts_with(&format!("Usage:\n  {program} ")),
            "{program}"
        );
    }
    let o = usage("rping", "rdmacm-utils");
    assert_eq!(common::stderr(&o), "");
    assert!(stdout(&o).starts_with("rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n"));
}

const DEBIAN_RDMACM: &str = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";
const DEBIAN_MLX5: &str = "/usr/lib/x86_64-linux-gnu/libmlx5.so.1";

/// The version nodes of `file` named `node...`, as `(hash, name)`.
fn nodes(file: &Path, node: &str) -> Vec<(String, String)> {
    version_definitions(file)
        .into_iter()
        .filter(|l| !l.starts_with('\t'))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 4 && w[3].starts_with(node)).then(|| (w[2].to_owned(), w[3].to_owned()))
        })
        .collect()
}

#[test]
fn librdmacm_and_libmlx5_nodes_are_debians() {
    require("rping", "rdmacm-utils");
    for lib in [DEBIAN_RDMACM, DEBIAN_MLX5] {
        assert!(
            Path::new(lib).exists(),
            "install librdmacm1 and ibverbs-providers"
        );
    }
    let rdmacm = nodes(Path::new(DEBIAN_RDMACM), "RDMACM_");
    assert_eq!(rdmacm.len(), 4, "{rdmacm:?}");
    assert_eq!(nodes(&ours(), "RDMACM_"), rdmacm);
    let mlx5 = nodes(Path::new(DEBIAN_MLX5), "MLX5_");
    assert_eq!(mlx5.len(), 25, "{mlx5:?}");
    assert_eq!(nodes(&ours(), "MLX5_"), mlx5);
}

#[test]
fn every_librdmacm_symbol_is_exported_where_debian_has_it() {
    let debian = versioned_symbols(Path::new(DEBIAN_RDMACM), "RDMACM_", true);
    assert_eq!(debian.len(), 68, "{debian:?}");
    let got = versioned_symbols(&ours(), "RDMACM_", true);
    assert_eq!(got, debian);
    let table: BTreeSet<(String, String)> = ibverbs::symbols::librdmacm::EXPORTS
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(table, got);
}

#[test]
fn every_libmlx5_symbol_is_exported_where_debian_has_it() {
    let got = versioned_symbols(&ours(), "MLX5_", true);
    let debian = versioned_symbols(Path::new(DEBIAN_MLX5), "MLX5_", true);
    // 128 functions at their default versions, and mlx5dv_init_obj's MLX5_1.0 compat one.
    assert_eq!(debian.len(), 129, "{debian:?}");
    assert_eq!(got, debian);
    let table: BTreeSet<(String, String)> = ibverbs::extras::mlx5dv::EXPORTS
        .iter()
        .chain(ibverbs::extras::mlx5dv::COMPAT_EXPORTS)
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(table, got);
    // The compat version is not the default one (objdump puts it in parentheses).
    let listing = objdump(&["-T"], &ours());
    let init_obj: Vec<&str> = listing
        .lines()
        .filter(|l| l.ends_with(" mlx5dv_init_obj"))
        .map(|l| l.split_whitespace().rev().nth(1).unwrap_or(""))
        .collect();
    assert_eq!(init_obj.len(), 2, "{listing}");
    assert!(
        init_obj.contains(&"MLX5_1.2") && init_obj.contains(&"(MLX5_1.0)"),
        "{init_obj:?}"
    );
    for program in [
        "ib_send_bw",
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_lat",
        "ib_read_lat",
    ] {
        let needed = versioned_symbols(&require(program, "perftest"), "MLX5_", false);
        let missing: Vec<_> = needed.difference(&got).collect();
        assert!(missing.is_empty(), "{program} needs {missing:?}");
    }
}

#[test]
fn rdmacm_utils_find_every_librdmacm_symbol_they_need() {
    let ours = versioned_symbols(&ours(), "RDMACM_", true);
    for program in [
        "rping",
        "mckey",
        "udaddy",
        "cmtime",
        "ucmatose",
        "rdma_client",
        "rdma_server",
        "rcopy",
        "riostream",
        "rstream",
    ] {
        let needed = versioned_symbols(&require(program, "rdmacm-utils"), "RDMACM_", false);
        assert!(!needed.is_empty(), "{program} links no RDMACM symbol?");
        let missing: Vec<_> = needed.difference(&ours).collect();
        assert!(missing.is_empty(), "{program} needs {missing:?}");
    }
}
