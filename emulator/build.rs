//! Generates the verbs and connection-manager struct layouts from rdma-core's headers with
//! bindgen, and links the cdylib as `libibverbs.so.1` with the symbol version nodes of
//! rdma-core's libibverbs, librdmacm and libmlx5 (the same file serves all three names).

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let map = manifest.join("libibverbs.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!("cargo:rerun-if-changed=wrapper.h");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");

    for header in [
        "/usr/include/infiniband/verbs.h",
        "/usr/include/rdma/rdma_cma.h",
        "/usr/include/infiniband/mlx5dv.h",
    ] {
        if !std::path::Path::new(header).exists() {
            panic!(
                "{header} is missing: the emulator takes its struct layouts from rdma-core's \
                 headers. Install them (as root) with `apt-get install libibverbs-dev \
                 librdmacm-dev libclang-dev`, or run `cargo xtask emu`, which installs them."
            );
        }
    }
    let bindings = bindgen::Builder::default()
        .header(manifest.join("wrapper.h").display().to_string())
        .allowlist_type("ibv_.*|verbs_.*|ib_uverbs_access_flags|ib_uverbs_qp_attr|ib_uverbs_ah_attr|ib_user_path_rec")
        .allowlist_type("rdma_.*")
        .allowlist_type("mlx5dv_context|mlx5dv_context_attr|mlx5dv_obj|mlx5dv_wq_init_attr|mlx5_mprq_wqe|mlx5_wqe_srq_next_seg|mlx5_wqe_data_seg")
        .allowlist_type("mlx5dv_context_flags|mlx5dv_context_comp_mask|mlx5dv_obj_type|mlx5dv_wq_init_attr_mask")
        .allowlist_var("MLX5DV_.*")
        .allowlist_var("IBV_.*|IB_UVERBS_ACCESS_.*|RDMA_.*|RAI_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("bindgen cannot read rdma-core's headers (is libclang-dev installed?)");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    bindings
        .write_to_file(out.join("verbs.rs"))
        .expect("cannot write the generated bindings");
}
