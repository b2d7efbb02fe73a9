//! Builds the C shim over libibverbs and links libibverbs, only with the `ibverbs` feature,
//! so that the simulator build needs no system package. libmlx5 is not linked: the shim
//! loads it at run time for striding WQs (shim/wq.c).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "ibverbs")]
    shim();
}

#[cfg(feature = "ibverbs")]
fn shim() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-changed=shim/wq.c");
    println!("cargo:rerun-if-changed=shim/shim.h");
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        println!(
            "cargo:warning=infiniband/verbs.h not found in /usr/include: the `ibverbs` feature \
             needs rdma-core's headers (Debian/Ubuntu: apt-get install libibverbs-dev)"
        );
    }
    cc::Build::new()
        .file("shim/shim.c")
        .file("shim/wq.c")
        .include("shim")
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .compile("backend_hw_shim");
    println!("cargo:rustc-link-lib=ibverbs");
}
