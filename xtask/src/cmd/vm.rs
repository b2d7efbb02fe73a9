//! `cargo xtask vm`: a command in the Soft-RoCE VM, and the smoke check (`--smoke`).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use super::common::Error;
use crate::vm::{self, VmOptions};

/// The options of `cargo xtask vm` besides the command.
#[derive(Debug, Clone)]
pub struct VmArgs {
    /// Seconds before the VM is killed.
    pub timeout: u64,
    /// `KEY=VALUE` pairs for the command's environment.
    pub env: Vec<String>,
    /// Guest memory in MiB.
    pub memory: u32,
    /// Print setup log and timings.
    pub verbose: bool,
    /// Keep the job folder.
    pub keep: bool,
    /// The QEMU stream socket of an emulated fabric to join.
    pub fabric: Option<PathBuf>,
    /// The VM's address on that fabric.
    pub fabric_ip: Ipv4Addr,
    /// Ports of the host's loopback forwarded into the VM (with a fabric).
    pub forward: Vec<u16>,
    /// QEMU's CPU model, if not its default.
    pub cpu: Option<String>,
}

/// `cargo xtask vm -- CMD ARGS...`: runs CMD in the Soft-RoCE VM; returns its exit code.
pub fn vm(cmd: &[String], args: &VmArgs) -> Result<i32, Error> {
    let mut env = Vec::new();
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--env {kv}: expected KEY=VALUE"))?;
        env.push((k.to_owned(), v.to_owned()));
    }
    let opts = VmOptions {
        timeout: Duration::from_secs(args.timeout),
        env,
        memory_mib: args.memory,
        verbose: args.verbose,
        keep_job: args.keep,
        fabric: args.fabric.as_ref().map(|socket| vm::qemu::FabricNic {
            socket: socket.clone(),
            ip: args.fabric_ip,
            forward: args.forward.clone(),
        }),
        cpu: args.cpu.clone(),
        ..VmOptions::default()
    };
    let out = vm::run_in_vm(cmd, &opts)?;
    if args.verbose || out.exit_code != 0 {
        let mut what = cmd.join(" ");
        if what.chars().count() > 80 {
            what = what.chars().take(77).collect::<String>() + "...";
        }
        eprintln!(
            "xtask vm: `{}` exited with {} (boot+setup {:.1} s, total {:.1} s)",
            what.replace('\n', " "),
            out.exit_code,
            out.boot_time.unwrap_or_default().as_secs_f64(),
            out.total_time.as_secs_f64()
        );
    }
    Ok(out.exit_code)
}

/// The smoke check (`cargo xtask vm --smoke`, and `test --backend hw --vm` while backend-hw
/// has no tests): rdma-core's own tools on rxe0: device query, RC and UD pingpong over
/// loopback on the IPv4-mapped GID, and librdmacm UD multicast (mckey). The shell functions
/// it uses are those of `backend-hw/scripts/rxe-helpers.sh` (also pingpong-interop.sh's).
const SMOKE_SCRIPT: &str = concat!(
    include_str!("../../../backend-hw/scripts/rxe-helpers.sh"),
    r#"set -e
D=rxe0
echo "== ibv_devinfo -d $D"
ibv_devinfo -d $D
ibv_devinfo -d $D | grep -q 'state:.*PORT_ACTIVE'
echo "== rdma link"
rdma link show
# The GID index of the IPv4-mapped GID (::ffff:10.77.0.1) of port 1.
G=$(ipv4_gid_index $D)
echo "== GID index $G: $(cat /sys/class/infiniband/$D/ports/1/gids/$G)"
echo "== ibv_rc_pingpong (RC send/recv, 4096 B x 1000)"
ibv_rc_pingpong -d $D -g $G -p 18515 -s 4096 -n 1000 & S=$!
wait_port 18515
ibv_rc_pingpong -d $D -g $G -p 18515 -s 4096 -n 1000 127.0.0.1
wait $S
echo "== ibv_ud_pingpong (UD send/recv, 1000 B x 1000)"
ibv_ud_pingpong -d $D -g $G -p 18516 -s 1000 -n 1000 & S=$!
wait_port 18516
ibv_ud_pingpong -d $D -g $G -p 18516 -s 1000 -n 1000 127.0.0.1
wait $S
echo "== mckey (librdmacm UD multicast to 239.1.2.3, receiver and sender on $D)"
stdbuf -oL mckey -m 239.1.2.3 -b 10.77.0.1 -C 10 > /tmp/mckey-recv.log 2>&1 & S=$!
wait_until "the mckey receiver" grep -q 'receiving data transfers' /tmp/mckey-recv.log ||
    { cat /tmp/mckey-recv.log; exit 1; }
mckey -m 239.1.2.3 -b 10.77.0.1 -C 10 -s
wait $S || { echo "mckey receiver failed:"; cat /tmp/mckey-recv.log; exit 1; }
cat /tmp/mckey-recv.log
echo "== smoke check passed"
"#
);

/// The command of the smoke check (`cargo xtask vm --smoke`).
pub fn smoke_command() -> Vec<String> {
    vec!["sh".into(), "-c".into(), SMOKE_SCRIPT.into()]
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// The smoke check is rxe-helpers.sh followed by its own lines: valid shell, which
    /// calls the helpers it embeds.
    #[test]
    fn smoke_script_is_valid_shell_with_the_shared_helpers() {
        // sh -n reads without running; what it finds wrong goes to the test's stderr.
        let parsed = Command::new("sh")
            .args(["-n", "-c", super::SMOKE_SCRIPT])
            .status()
            .expect("run sh -n");
        assert!(parsed.success(), "sh -n rejects the smoke script");
        for f in ["ipv4_gid_index() {", "wait_port() {"] {
            assert!(super::SMOKE_SCRIPT.contains(f), "{f} missing");
        }
        assert!(super::SMOKE_SCRIPT.contains("G=$(ipv4_gid_index $D)"));
    }
}
