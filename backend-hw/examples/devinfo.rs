//! What `ibv_devinfo` prints (devices, their attributes, ports and GIDs), through
//! verbs-api on the libibverbs backend.
//!
//! ```text
//! cargo run -p backend-hw --features ibverbs --example devinfo [-- -d rxe0] [-- -v]
//! ```

use std::io::Write;
use std::process::ExitCode;

/// `println!` that ends the program quietly when stdout is closed (`devinfo | head`).
macro_rules! out {
    ($($t:tt)*) => {
        if writeln!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit(0);
        }
    };
}

use backend_hw::{HwContext, HwVerbs};
use verbs_api::{Context, Gid, Result, Verbs};

fn guid(g: u64) -> String {
    // The GUID is a big-endian value: print its bytes in memory order, as ibv_devinfo does.
    let b = g.to_ne_bytes();
    format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

fn print_device(ctx: &HwContext, verbose: bool) -> Result<()> {
    let info = ctx.device();
    let attr = ctx.query_device()?;
    out!("hca_id:\t{}", info.name);
    out!(
        "\ttransport:\t\t\t{} ({})",
        info.transport_type,
        info.transport_type.as_raw()
    );
    out!("\tfw_ver:\t\t\t\t{}", attr.fw_ver);
    out!("\tnode_guid:\t\t\t{}", guid(attr.node_guid));
    out!("\tsys_image_guid:\t\t\t{}", guid(attr.sys_image_guid));
    out!("\tvendor_id:\t\t\t0x{:04x}", attr.vendor_id);
    out!("\tvendor_part_id:\t\t\t{}", attr.vendor_part_id);
    out!("\thw_ver:\t\t\t\t0x{:X}", attr.hw_ver);
    out!("\tphys_port_cnt:\t\t\t{}", attr.phys_port_cnt);
    if verbose {
        out!("\tmax_mr_size:\t\t\t0x{:x}", attr.max_mr_size);
        out!("\tpage_size_cap:\t\t\t0x{:x}", attr.page_size_cap);
        out!("\tmax_qp:\t\t\t\t{}", attr.max_qp);
        out!("\tmax_qp_wr:\t\t\t{}", attr.max_qp_wr);
        out!(
            "\tdevice_cap_flags:\t\t0x{:08x}",
            attr.device_cap_flags.bits()
        );
        out!("\tmax_sge:\t\t\t{}", attr.max_sge);
        out!("\tmax_cq:\t\t\t\t{}", attr.max_cq);
        out!("\tmax_cqe:\t\t\t{}", attr.max_cqe);
        out!("\tmax_mr:\t\t\t\t{}", attr.max_mr);
        out!("\tmax_pd:\t\t\t\t{}", attr.max_pd);
        out!(
            "\tatomic_cap:\t\t\t{} ({})",
            attr.atomic_cap,
            attr.atomic_cap.as_raw()
        );
        out!("\tmax_raw_ethy_qp:\t\t{}", attr.max_raw_ethy_qp);
        out!("\tmax_mcast_grp:\t\t\t{}", attr.max_mcast_grp);
        out!("\tmax_mcast_qp_attach:\t\t{}", attr.max_mcast_qp_attach);
        out!("\tmax_srq:\t\t\t{}", attr.max_srq);
        out!("\tmax_srq_wr:\t\t\t{}", attr.max_srq_wr);
        out!("\tmax_inline_data (probed):\t{}", attr.max_inline_data);
        out!("\tnum_comp_vectors:\t\t{}", attr.num_comp_vectors);
    }
    for port in 1..=attr.phys_port_cnt {
        let p = ctx.query_port(port)?;
        out!("\t\tport:\t{port}");
        out!(
            "\t\t\tstate:\t\t\tPORT_{} ({})",
            p.state.as_str().to_uppercase(),
            p.state.as_raw()
        );
        out!("\t\t\tmax_mtu:\t\t{} ({})", p.max_mtu, p.max_mtu.as_raw());
        out!(
            "\t\t\tactive_mtu:\t\t{} ({})",
            p.active_mtu,
            p.active_mtu.as_raw()
        );
        out!("\t\t\tsm_lid:\t\t\t{}", p.sm_lid);
        out!("\t\t\tport_lid:\t\t{}", p.lid);
        out!("\t\t\tport_lmc:\t\t0x{:02x}", p.lmc);
        out!("\t\t\tlink_layer:\t\t{}", p.link_layer);
        if verbose {
            out!("\t\t\tmax_msg_sz:\t\t0x{:x}", p.max_msg_sz);
            out!("\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len);
            out!("\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len);
        }
        for index in 0..p.gid_tbl_len {
            let Ok(gid) = ctx.query_gid(port, index) else {
                continue;
            };
            if gid == Gid::ZERO {
                continue;
            }
            let kind = ctx.query_gid_type(port, index).unwrap_or("unknown");
            match gid.to_ipv4() {
                Some(v4) => out!("\t\t\tGID[{index:>3}]:\t\t{gid}, {kind} ({v4})"),
                None => out!("\t\t\tGID[{index:>3}]:\t\t{gid}, {kind}"),
            }
        }
        out!();
    }
    Ok(())
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "-v" || a == "--verbose");
    let wanted = args
        .iter()
        .position(|a| a == "-d" || a == "--ib-dev")
        .and_then(|i| args.get(i + 1).cloned());
    let verbs = HwVerbs::new();
    let names: Vec<String> = match wanted {
        Some(name) => vec![name],
        None => verbs.devices()?.into_iter().map(|d| d.name).collect(),
    };
    for name in names {
        let ctx = verbs.open(&name)?;
        print_device(&ctx, verbose)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("devinfo: {e}");
            ExitCode::FAILURE
        }
    }
}
