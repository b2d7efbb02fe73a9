//! The Soft-RoCE VM: a real kernel verbs stack (the `rdma_rxe` driver) on a machine whose
//! own kernel has no RDMA support, in a throwaway QEMU VM (see `shared/SOFT-ROCE.md`).
//!
//! `cargo xtask vm [--timeout SECS] -- CMD ARGS...` runs CMD inside the VM and returns its
//! exit code, printing its stdout and stderr on the host. [`run_in_vm`] is the same as a
//! function (used by `cargo xtask test --backend hw --vm`).
//!
//! How it works:
//! - [`packages`]: the host needs qemu-system-x86, kmod, iproute2, rdma-core,
//!   ibverbs-providers, ibverbs-utils, libibverbs-dev, rdmacm-utils and perftest; missing
//!   ones are installed with apt-get when running as root (and the exact command is
//!   printed otherwise). Debian's kernel (`linux-image-6.1.0-*-amd64`, whatever
//!   `linux-image-amd64` points at) and `busybox-static` are downloaded with
//!   `apt-get download` and unpacked with `dpkg -x` under `target/softroce/` (never
//!   installed); `depmod -b` indexes the modules. All of it is cached there (about
//!   550 MB; delete `target/softroce/` to start over). The uncompressed kernel is
//!   extracted from the bzImage once (with `xz`) and booted through its PVH entry, which
//!   saves the seconds TCG spends decompressing it (the bzImage is the fallback).
//! - [`initramfs`]: a tiny newc archive with busybox, the virtio and 9p modules and a
//!   generic `/init` that mounts the per-run job share and runs its `stage1.sh`.
//! - [`qemu`]: `qemu-system-x86_64 -accel tcg` (never KVM: a KVM guest hangs on our
//!   machines, and `-cpu host` aborts), 2 vCPUs and 2 GiB, no disk and no network
//!   device; the host root is shared read-only over virtio-9p (page-cached in the guest:
//!   it must not change under a run), the job folder and the
//!   workspace (plus the current directory when it is under `/tmp` or `/run`, which the
//!   guest covers with tmpfs) writable, mounted at the same absolute paths.
//! - In the guest, `stage1.sh` (busybox) mounts the host root, proc, sys, devtmpfs, tmpfs
//!   on /tmp and /run and the shares, then chroots into the host's view to run
//!   `stage2.sh`, which loads the modules with the host's modprobe (`-d` the unpacked
//!   kernel), makes veth0/veth1 (10.77.0.1/24 on veth0, route 224.0.0.0/4 for multicast),
//!   loads `crc32_generic` and runs `rdma link add rxe0 type rxe netdev veth0`, then runs
//!   CMD in the current directory with its output in files on the job share, which the
//!   host streams while the VM runs. Nothing leaves the VM: it has no network device.
//! - With [`VmOptions::fabric`] (`cargo xtask vm --fabric SOCK`) the VM joins an emulated
//!   fabric instead: a virtio-net NIC on the fabric's QEMU port (`verbs-emu-fabric
//!   --qemu-stream SOCK`) with MAC `02:00` + the four bytes of its address (10.100.0.20 by
//!   default, which the topology must list as a `remote = true` host), and a user-mode NIC
//!   (10.0.2.15; the host's loopback is 10.0.2.2, and the forwarded ports of the host's
//!   loopback reach the guest) for the out-of-band TCP of verbs programs. stage2 loads
//!   `virtio_net`, finds the fabric NIC by its MAC, gives it the address (/24) and the
//!   multicast route, puts rxe0 on it (no veth pair) and waits until the NIC's link-local
//!   address has passed duplicate address detection (a link-local GID's neighbour
//!   resolution needs it).
//!   CMD's environment is a few of the host's variables (PATH, HOME, TERM, LANG, RUST_LOG,
//!   RUST_BACKTRACE, ...), `RDMA_DEVICE=rxe0`, and what `-e KEY=VALUE` adds.
//! - A timeout (default 300 s) kills QEMU and fails with the end of the console log.
//! - Timing (2 cores, TCG): about 5 s to the kernel's init, 2-3 s of setup, so a trivial
//!   command (or boot + one `ibv_rc_pingpong` pair) takes 10-15 s, and
//!   `cargo xtask vm --smoke` (ibv_devinfo, RC and UD pingpong, mckey multicast, which
//!   alone spends about 8 s joining) 20-35 s, depending on the machine's load. `-v` prints
//!   the guest's timed setup log.
//! - `--keep` (or any failure) keeps the job folder under `target/softroce/jobs/`:
//!   `stage1.sh`, `stage2.sh`, `setup.log`, `console.log` (serial), `qemu.log`, `stdout`,
//!   `stderr`, `exit-code`. Folders older than a day are removed.

mod assets;
pub mod initramfs;
pub mod packages;
mod paths;
pub mod qemu;

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use assets::{prepare, Assets};
use paths::io_err;
pub use paths::{cache_dir, workspace_root};

/// The name of the rxe device the guest creates.
pub const RXE_DEVICE: &str = "rxe0";

/// Options of one VM run.
#[derive(Debug, Clone)]
pub struct VmOptions {
    /// Kill QEMU and fail after this long.
    pub timeout: Duration,
    /// The working directory of CMD inside the guest (same absolute path as on the host).
    pub cwd: PathBuf,
    /// Extra environment of CMD (on top of PATH, HOME, TERM, LANG, RUST_BACKTRACE, ...
    /// from the host, and `RDMA_DEVICE=rxe0`).
    pub env: Vec<(String, String)>,
    /// Host folders shared writable into the guest at the same absolute path, on top of
    /// the workspace (and the current directory when the guest's tmpfs would hide it).
    pub shares: Vec<PathBuf>,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Guest CPUs.
    pub cpus: u32,
    /// Print CMD's stdout/stderr on the host while it runs.
    pub echo: bool,
    /// Print the VM's setup log and timings.
    pub verbose: bool,
    /// Keep the job folder (scripts, logs, outputs) under `target/softroce/jobs/`.
    pub keep_job: bool,
    /// Join an emulated fabric: rxe0 on a NIC on its QEMU port, plus a user-mode NIC.
    pub fabric: Option<qemu::FabricNic>,
    /// QEMU's CPU model (`-cpu`); `None` leaves QEMU's default (`qemu64`, without
    /// SSE4.2 and POPCNT, which numpy 2's wheels need: it dies of SIGILL there).
    pub cpu: Option<String>,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            timeout: Duration::from_secs(300),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            env: Vec::new(),
            shares: Vec::new(),
            memory_mib: 2048,
            cpus: 2,
            echo: true,
            verbose: false,
            keep_job: false,
            fabric: None,
            cpu: None,
        }
    }
}

/// What a VM run produced.
#[derive(Debug, Clone)]
// A library-style result: not every caller in xtask reads every field.
#[allow(dead_code)]
pub struct VmOutput {
    /// CMD's exit code (128 + N when killed by signal N, as the shell reports it).
    pub exit_code: i32,
    /// CMD's standard output.
    pub stdout: Vec<u8>,
    /// CMD's standard error.
    pub stderr: Vec<u8>,
    /// The log of the guest's setup (modules, veth, rxe0).
    pub setup_log: String,
    /// From starting QEMU until CMD started (boot and setup).
    pub boot_time: Option<Duration>,
    /// From starting QEMU until it exited.
    pub total_time: Duration,
}

impl VmOutput {
    /// Whether CMD exited with 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }
}

/// Single-quotes `s` for sh.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Whether the guest's tmpfs mounts hide `p`.
fn hidden_in_guest(p: &Path) -> bool {
    p.starts_with("/tmp") || p.starts_with("/run") || p.starts_with("/dev/shm")
}

/// The writable shares: (tag, path), outermost first, none inside another.
fn shares(opts: &VmOptions, cmd0: &str) -> Vec<(String, PathBuf)> {
    let mut want: Vec<PathBuf> = vec![workspace_root(), cache_dir()];
    want.extend(opts.shares.iter().cloned());
    for p in [
        Some(opts.cwd.clone()),
        Path::new(cmd0).parent().map(Path::to_path_buf),
    ]
    .into_iter()
    .flatten()
    {
        if p.is_absolute() && hidden_in_guest(&p) {
            want.push(p);
        }
    }
    let mut want: Vec<PathBuf> = want
        .into_iter()
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| p.is_dir() && p != Path::new("/"))
        .collect();
    want.sort();
    want.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in want {
        if !out.iter().any(|o| p.starts_with(o)) {
            out.push(p);
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, p)| (format!("xtask_share{i}"), p))
        .collect()
}

/// The guest-side path of the job share (inside the chroot).
const GUEST_JOB: &str = "/run/xtask-job";

fn stage1(shares: &[(String, PathBuf)]) -> String {
    let mut s = String::from(
        r#"# Generated by cargo xtask vm: runs in the initramfs (busybox sh).
R=/mnt/root
O=trans=virtio,version=9p2000.L,msize=262144
echo "stage1 start: uptime $(cat /proc/uptime)" > /job/times
mount -t 9p -o $O,ro,cache=loose hostroot $R || { echo "xtask-vm: cannot mount the host root"; return; }
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mount -t tmpfs tmpfs $R/tmp
mount -t tmpfs tmpfs $R/run
mkdir -p $R/run/xtask-job
mount -o bind /job $R/run/xtask-job
"#,
    );
    for (tag, path) in shares {
        let p = sh_quote(&path.to_string_lossy());
        s.push_str(&format!(
            "mkdir -p $R{p} 2>/dev/null\nmount -t 9p -o $O {tag} $R{p} || echo \"xtask-vm: cannot mount {tag}\"\n"
        ));
    }
    s.push_str(
        r#"# The kernel's own module requests (request_module) run from the initramfs root.
printf '#!/bin/busybox sh\nexec /bin/busybox chroot /mnt/root /bin/sh /run/xtask-job/modprobe "$@"\n' > /bin/modprobe-chroot
chmod 755 /bin/modprobe-chroot
echo /bin/modprobe-chroot > /proc/sys/kernel/modprobe
echo "stage1 mounted: uptime $(cat /proc/uptime)" >> /job/times
chroot $R /bin/sh /run/xtask-job/stage2.sh
echo "stage2 done: uptime $(cat /proc/uptime)" >> /job/times
"#,
    );
    s
}

/// The environment CMD gets: a few of the host's variables, then `opts.env`.
fn guest_env(opts: &VmOptions) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let path = std::env::var("PATH").unwrap_or_default();
    let mut path: Vec<&str> = path.split(':').filter(|p| !p.is_empty()).collect();
    for p in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        if !path.contains(&p) {
            path.push(p);
        }
    }
    env.push(("PATH".into(), path.join(":")));
    for k in [
        "HOME",
        "USER",
        "TERM",
        "LANG",
        "RUST_BACKTRACE",
        "RUST_LOG",
        "RUST_TEST_THREADS",
        "CARGO_HOME",
        "RUSTUP_HOME",
    ] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    // The VM's one RDMA device, for the tools and tests that read it.
    env.push(("RDMA_DEVICE".into(), RXE_DEVICE.into()));
    for (k, v) in &opts.env {
        env.retain(|(k2, _)| k2 != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// The network set-up of stage2: rxe0 on veth0 (a veth pair in the VM), or on the NIC
/// joining the emulated fabric (found by its MAC) with the user-mode NIC up too.
fn net_setup(opts: &VmOptions) -> String {
    match &opts.fabric {
        None => format!(
            r#"    ip link add veth0 type veth peer name veth1
    ip addr add 10.77.0.1/24 dev veth0
    ip link set veth0 up
    ip link set veth1 up
    ip route add 224.0.0.0/4 dev veth0
    rdma link add {RXE_DEVICE} type rxe netdev veth0
"#
        ),
        Some(f) => {
            let (fab_mac, user_mac, ip) = (f.mac(), qemu::USER_MAC, f.ip);
            let user_ip = qemu::USER_GUEST_IP;
            format!(
                r#"    F= U=
    for d in /sys/class/net/*; do
        case "$(cat $d/address)" in
            {fab_mac}) F=${{d##*/}} ;;
            {user_mac}) U=${{d##*/}} ;;
        esac
    done
    test -n "$F" && test -n "$U"
    ip addr add {ip}/24 dev $F
    ip link set $F up
    ip route add 224.0.0.0/4 dev $F
    ip addr add {user_ip}/24 dev $U
    ip link set $U up
    rdma link add {RXE_DEVICE} type rxe netdev $F
    # rxe resolves a link-local GID's MAC by neighbour discovery, which cannot start
    # before the address's duplicate address detection ends (under load a program's
    # RTR, whose resolution gives up after 1 s, came first): wait for it, 10 s at most.
    n=0
    until ip -6 addr show dev $F scope link | grep -q inet6 &&
        ! ip -6 addr show dev $F tentative | grep -q inet6; do
        [ $n -lt 100 ]
        n=$((n + 1))
        sleep 0.1
    done
    ip addr show
"#
            )
        }
    }
}

fn stage2(cmd: &[String], opts: &VmOptions, assets: &Assets) -> String {
    let base = sh_quote(&assets.module_base.to_string_lossy());
    let net = net_setup(opts);
    let modules = if opts.fabric.is_some() {
        "virtio_net crc32_generic rdma_rxe ib_uverbs rdma_ucm"
    } else {
        "veth crc32_generic rdma_rxe ib_uverbs rdma_ucm"
    };
    let mut s = format!(
        r#"# Generated by cargo xtask vm: runs in the guest, chrooted into the host's file system.
J={GUEST_JOB}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
if ! (
    PS4='+ [$(cut -d" " -f1 /proc/uptime)] '
    set -ex
    echo "stage2 start: uptime $(cat /proc/uptime)" >> $J/times
    modprobe -d {base} -a {modules}
    ip link set lo up
{net}    rdma link show
    echo "stage2 setup done: uptime $(cat /proc/uptime)" >> $J/times
) > $J/setup.log 2>&1; then
    echo failed > $J/setup-failed
    exit 0
fi
"#
    );
    let cwd = sh_quote(&opts.cwd.to_string_lossy());
    s.push_str(&format!(
        "cd {cwd} || {{ echo \"cannot cd to \"{cwd} >> $J/setup.log; echo failed > $J/setup-failed; exit 0; }}\n"
    ));
    s.push_str(": > $J/started\nenv -i");
    for (k, v) in guest_env(opts) {
        s.push_str(&format!(" {}", sh_quote(&format!("{k}={v}"))));
    }
    for a in cmd {
        s.push(' ');
        s.push_str(&sh_quote(a));
    }
    s.push_str(" > $J/stdout 2> $J/stderr < /dev/null\necho $? > $J/exit-code\nsync\n");
    s
}

/// Copies whatever `path` gained since `*pos` to `out` (when echoing) and `acc`.
fn pump(path: &Path, pos: &mut u64, acc: &mut Vec<u8>, out: Option<&mut dyn Write>) {
    let Ok(mut f) = std::fs::File::open(path) else {
        return;
    };
    if f.seek(SeekFrom::Start(*pos)).is_err() {
        return;
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_ok() && !buf.is_empty() {
        *pos += buf.len() as u64;
        if let Some(out) = out {
            let _ = out.write_all(&buf);
            let _ = out.flush();
        }
        acc.extend_from_slice(&buf);
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Boots the Soft-RoCE VM, runs `cmd` in it (see the module docs) and returns its exit
/// code and output. `Err` means the VM itself failed (packages, boot, setup, timeout),
/// not CMD: CMD's failure is a non-zero [`VmOutput::exit_code`].
pub fn run_in_vm(cmd: &[String], opts: &VmOptions) -> Result<VmOutput, String> {
    if cmd.is_empty() {
        return Err("no command to run in the VM".into());
    }
    let assets = prepare()?;
    let jobs = cache_dir().join("jobs");
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // Job folders kept by failed runs (or --keep) go after a day.
    if let Ok(entries) = std::fs::read_dir(&jobs) {
        for e in entries.flatten() {
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Duration::from_secs(24 * 3600));
            if old {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let job = jobs.join(format!("job-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&job).map_err(|e| io_err("cannot create", &job, e))?;
    let result = run_job(cmd, opts, &assets, &job);
    if !opts.keep_job && result.is_ok() {
        let _ = std::fs::remove_dir_all(&job);
    } else {
        eprintln!("xtask vm: job folder kept: {}", job.display());
    }
    result
}

fn run_job(
    cmd: &[String],
    opts: &VmOptions,
    assets: &Assets,
    job: &Path,
) -> Result<VmOutput, String> {
    let shares = shares(opts, &cmd[0]);
    let write = |name: &str, text: String| {
        let p = job.join(name);
        std::fs::write(&p, text).map_err(|e| io_err("cannot write", &p, e))
    };
    write("stage1.sh", stage1(&shares))?;
    write("stage2.sh", stage2(cmd, opts, assets))?;
    // For the kernel's own module requests (see stage1): the host's modprobe on the
    // unpacked guest kernel.
    write(
        "modprobe",
        format!(
            "#!/bin/sh\nexec modprobe -d {} \"$@\"\n",
            sh_quote(&assets.module_base.to_string_lossy())
        ),
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        let p = job.join("modprobe");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| io_err("cannot chmod", &p, e))?;
    }

    let cfg = qemu::QemuConfig {
        kernel: &assets.kernel,
        initrd: &assets.initramfs,
        job_dir: job,
        shares: &shares,
        memory_mib: opts.memory_mib,
        cpus: opts.cpus,
        fabric: opts.fabric.as_ref(),
        cpu: opts.cpu.as_deref(),
    };
    if opts.verbose {
        eprintln!(
            "xtask vm: booting {} (TCG): {:?}",
            assets.version,
            qemu::command(&cfg)
        );
    } else {
        eprintln!(
            "xtask vm: booting the Soft-RoCE VM ({}, TCG, timeout {} s)",
            assets.version,
            opts.timeout.as_secs()
        );
    }
    let start = Instant::now();
    let mut child = qemu::spawn(&cfg)?;
    let (mut out_pos, mut err_pos) = (0u64, 0u64);
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut boot_time = None;
    let status = loop {
        let exited = child
            .try_wait()
            .map_err(|e| format!("cannot wait for qemu: {e}"))?;
        if boot_time.is_none() && job.join("started").exists() {
            boot_time = Some(start.elapsed());
        }
        let mut so = std::io::stdout();
        let mut se = std::io::stderr();
        pump(
            &job.join("stdout"),
            &mut out_pos,
            &mut stdout,
            opts.echo.then_some(&mut so as &mut dyn Write),
        );
        pump(
            &job.join("stderr"),
            &mut err_pos,
            &mut stderr,
            opts.echo.then_some(&mut se as &mut dyn Write),
        );
        if let Some(status) = exited {
            break status;
        }
        if start.elapsed() > opts.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the VM did not finish within {} s and was killed (--timeout SECS raises the \
                 limit). {}. Last console lines:\n{}",
                opts.timeout.as_secs(),
                if boot_time.is_some() {
                    "The command had started"
                } else {
                    "The command had not started yet (boot or setup hung)"
                },
                tail(&job.join("console.log"), 30)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let total_time = start.elapsed();
    let setup_log = std::fs::read_to_string(job.join("setup.log")).unwrap_or_default();
    if opts.verbose {
        let times = std::fs::read_to_string(job.join("times")).unwrap_or_default();
        eprintln!("xtask vm: guest setup log:\n{setup_log}\nxtask vm: guest times:\n{times}");
    }
    if job.join("setup-failed").exists() {
        return Err(format!(
            "setting up Soft-RoCE in the VM failed; its log:\n{setup_log}\nLast console lines:\n{}",
            tail(&job.join("console.log"), 20)
        ));
    }
    let code = std::fs::read_to_string(job.join("exit-code")).ok();
    let Some(exit_code) = code.and_then(|c| c.trim().parse::<i32>().ok()) else {
        return Err(format!(
            "the VM stopped ({status}) without running the command to its end. QEMU said:\n{}\n\
             Last console lines:\n{}\nSetup log:\n{setup_log}",
            tail(&job.join("qemu.log"), 10),
            tail(&job.join("console.log"), 30)
        ));
    };
    if opts.verbose {
        eprintln!(
            "xtask vm: boot+setup {:.1} s, total {:.1} s, exit code {exit_code}",
            boot_time.unwrap_or_default().as_secs_f64(),
            total_time.as_secs_f64()
        );
    }
    Ok(VmOutput {
        exit_code,
        stdout,
        stderr,
        setup_log,
        boot_time,
        total_time,
    })
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn sh_quote_survives_the_shell() {
        let nasty = "it's a \"test\" $HOME `x` \\ ;|&";
        let out = Command::new("sh")
            .args(["-c", &format!("printf %s {}", sh_quote(nasty))])
            .output()
            .expect("sh");
        assert_eq!(String::from_utf8_lossy(&out.stdout), nasty);
    }

    #[test]
    fn shares_are_outermost_and_include_hidden_cwd() {
        let tmp = std::env::temp_dir().join(format!("xtask-share-test-{}", std::process::id()));
        let inner = tmp.join("inner");
        std::fs::create_dir_all(&inner).unwrap();
        let opts = VmOptions {
            cwd: inner.clone(),
            shares: vec![tmp.clone(), inner.clone()],
            ..VmOptions::default()
        };
        let got = shares(&opts, "true");
        let paths: Vec<&PathBuf> = got.iter().map(|(_, p)| p).collect();
        let tmp_c = tmp.canonicalize().unwrap();
        assert!(paths.contains(&&tmp_c), "{paths:?}");
        assert!(!paths.iter().any(|p| **p == inner.canonicalize().unwrap()));
        for (i, a) in paths.iter().enumerate() {
            for b in &paths[i + 1..] {
                assert!(!b.starts_with(a) && !a.starts_with(b), "{a:?} {b:?}");
            }
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn stage2_runs_the_command_in_cwd_with_rdma_device() {
        let assets = Assets {
            version: "6.1.0-0-amd64".into(),
            kernel: "/k".into(),
            initramfs: "/i".into(),
            module_base: "/m".into(),
        };
        let opts = VmOptions {
            cwd: "/work/x y".into(),
            env: vec![("FOO".into(), "bar baz".into())],
            ..VmOptions::default()
        };
        let s = stage2(&["echo".into(), "a'b".into()], &opts, &assets);
        assert!(s.contains("cd '/work/x y'"), "{s}");
        assert!(s.contains("'RDMA_DEVICE=rxe0'"), "{s}");
        assert!(s.contains("'FOO=bar baz'"), "{s}");
        assert!(s.contains(r"'echo' 'a'\''b' > $J/stdout"), "{s}");
        assert!(
            s.contains("rdma link add rxe0 type rxe netdev veth0"),
            "{s}"
        );
        assert!(s.contains("crc32_generic rdma_rxe"), "{s}");
        assert!(!s.contains("virtio_net"), "{s}");
    }

    #[test]
    fn stage2_on_a_fabric_puts_rxe0_on_the_nic_with_the_fabric_mac() {
        let assets = Assets {
            version: "6.1.0-0-amd64".into(),
            kernel: "/k".into(),
            initramfs: "/i".into(),
            module_base: "/m".into(),
        };
        let opts = VmOptions {
            cwd: "/w".into(),
            fabric: Some(qemu::FabricNic {
                socket: "/s".into(),
                ip: "10.100.0.20".parse().unwrap(),
                forward: vec![],
            }),
            ..VmOptions::default()
        };
        let s = stage2(&["true".into()], &opts, &assets);
        assert!(s.contains("-a virtio_net crc32_generic rdma_rxe"), "{s}");
        assert!(s.contains("02:00:0a:64:00:14) F=${d##*/} ;;"), "{s}");
        assert!(s.contains("52:54:00:12:34:56) U=${d##*/} ;;"), "{s}");
        assert!(s.contains("ip addr add 10.100.0.20/24 dev $F"), "{s}");
        assert!(s.contains("ip route add 224.0.0.0/4 dev $F"), "{s}");
        assert!(s.contains("ip addr add 10.0.2.15/24 dev $U"), "{s}");
        assert!(s.contains("rdma link add rxe0 type rxe netdev $F"), "{s}");
        assert!(!s.contains("veth"), "{s}");
        assert!(s.contains("'RDMA_DEVICE=rxe0'"), "{s}");
        // The generated script is valid shell.
        let parsed = Command::new("sh").args(["-n", "-c", &s]).status().unwrap();
        assert!(parsed.success(), "{s}");
    }
}
