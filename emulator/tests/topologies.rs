//! The topology files shipped in `emulator/topologies/` (and in `cargo xtask dist`'s
//! tarball) parse, and `default.toml` is exactly the topology used when none is named.

use ibverbs::topology::Topology;

fn shipped(name: &str) -> Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topologies")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    Topology::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn default_toml_is_the_default_topology() {
    assert_eq!(shipped("default.toml"), Topology::default());
}

#[test]
fn every_shipped_topology_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".toml") {
            shipped(&name);
            n += 1;
        }
    }
    assert!(n >= 3, "{n} topology files");
}
