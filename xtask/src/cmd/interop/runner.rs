//! Running one case: the host side as an emulated host (its program on the host, the
//! emulated libibverbs first on `LD_LIBRARY_PATH`, or through `verbs-emu run`), the VM
//! side in one boot of the Soft-RoCE VM on the fabric's QEMU port, the side named first
//! started first and waited for.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::addresses::{CASE_TIMEOUT, PORT, VM_IP};
use super::cases::{Case, Ready, Server};
use crate::cmd::common::Error;
use crate::vm::{self, qemu::FabricNic, VmOptions};

/// How the host side's programs become an emulated host: on the host itself, with the
/// emulated libraries first on `LD_LIBRARY_PATH` and the fabric's socket, host and
/// topology in the environment (not through the launcher, so that the out-of-band TCP of
/// the verbs tools is on the host's loopback, which the guest reaches as 10.0.2.2).
#[derive(Debug, Clone)]
pub struct HostRun {
    /// The folder of the emulated libraries.
    pub lib: PathBuf,
    /// The fabric's socket.
    pub socket: String,
    /// The topology file.
    pub topology: PathBuf,
    /// The host (each case's own, `Case::emulated`).
    pub host: &'static str,
    /// Run in a network namespace of its own whose interface `d0` (one end of a veth pair,
    /// the other up too; this machine's kernel has no `dummy` module) holds this address
    /// (/24, the multicast route on it), for programs that look for their host's address
    /// among the interfaces (spead2) and join groups on it; the emulated NIC carries
    /// their traffic, the interface none.
    pub netns_ip: Option<&'static str>,
}

impl HostRun {
    /// The command that runs `argv` as the emulated host.
    pub fn command(&self, argv: &[String]) -> Command {
        let mut c = match self.netns_ip {
            None => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
            Some(ip) => {
                let mut c = Command::new("unshare");
                c.args(["-n", "sh", "-c"])
                    .arg(format!(
                        "set -e; ip link set lo up; ip link add d0 type veth peer name d1; \
                         ip link set d1 up; ip link set d0 up; ip addr add {ip}/24 dev d0; \
                         ip route add 224.0.0.0/4 dev d0; exec \"$@\""
                    ))
                    .arg("sh")
                    .args(argv);
                c
            }
        };
        c.env("LD_LIBRARY_PATH", &self.lib)
            .env("VERBS_EMU_FABRIC", &self.socket)
            .env("VERBS_EMU_HOST", self.host)
            .env("VERBS_EMU_TOPOLOGY", &self.topology);
        c
    }
}

/// The output of one side of a case.
#[derive(Debug, Clone)]
pub struct Side {
    /// Its exit code (128 + the signal's number when a signal ended it).
    pub code: i32,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// The host side of a case, its output into files in `dir`.
fn host_program(case: &Case, run: &HostRun, dir: &Path) -> Result<Child, Error> {
    let file = |ext: &str| {
        let p = dir.join(format!("{}-host.{ext}", case.name));
        std::fs::File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    let mut c = run.command(&case.host);
    c.stdin(Stdio::null())
        .stdout(file("out")?)
        .stderr(file("err")?);
    eprintln!(
        "xtask interop: {}: host (emulated {}): {}",
        case.name,
        run.host,
        case.host.join(" ")
    );
    c.spawn()
        .map_err(|e| format!("cannot start {}: {e}", case.host[0]))
}

fn read_host(case: &Case, dir: &Path, ext: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{}-host.{ext}", case.name))).unwrap_or_default()
}

/// Waits for the host side, killing it after [`CASE_TIMEOUT`].
fn finish_host(case: &Case, mut child: Child, dir: &Path) -> Result<Side, Error> {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            break s;
        }
        if start.elapsed() > CASE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{}: the host's {} did not finish within {} s",
                case.name,
                case.host[0],
                CASE_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt;
    Ok(Side {
        code: status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        stdout: read_host(case, dir, "out"),
        stderr: read_host(case, dir, "err"),
    })
}

/// Whether something listens on TCP `port` of the host (IPv4 or IPv6).
pub fn listening(port: u16) -> bool {
    let want = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3 && format!("{} ", w[1]).ends_with(&want) && w[3] == "0A"
            })
    })
}

/// The shell functions of `backend-hw/scripts/rxe-helpers.sh` (`listening`).
const HELPERS: &str = include_str!("../../../../backend-hw/scripts/rxe-helpers.sh");

/// How long the VM's side started first may take to become ready, in tenths of a second
/// (spead2's import alone took 12 s of a quiet host's time under TCG; the helpers'
/// `wait_until` gives up after 60 s, too soon on a loaded host).
const READY_TENTHS: u32 = 2000;

/// The VM's script when it starts first: the program in the background, its output into
/// files, `ready` created once it is ready, then its exit code and output.
pub fn first_in_vm(cmd: &str, ready: &Ready, ready_file: &Path) -> String {
    let test = match ready {
        Ready::Tcp => format!("listening {PORT}"),
        Ready::Line(l) => format!(
            "grep -qF -e {} /tmp/first.out /tmp/first.err",
            vm::sh_quote(l)
        ),
    };
    format!(
        "{HELPERS}\n: > /tmp/first.out; : > /tmp/first.err\n\
         {cmd} > /tmp/first.out 2> /tmp/first.err & S=$!\n\
         n=0; until {test}; do\n\
         [ $n -lt {READY_TENTHS} ] && kill -0 $S 2> /dev/null || \\\n\
         {{ echo 'never ready'; kill $S; cat /tmp/first.out; cat /tmp/first.err >&2; exit 1; }}\n\
         n=$((n + 1)); sleep 0.1; done\n\
         : > {ready}\nwait $S; C=$?\ncat /tmp/first.out; cat /tmp/first.err >&2\nexit $C\n",
        ready = vm::sh_quote(&ready_file.to_string_lossy()),
    )
}

/// The VM's options: its NIC on the fabric's port `vm_socket`, [`PORT`] forwarded when
/// its program is a TCP server.
fn vm_options(vm_socket: &Path, forward: bool, cpu: Option<&'static str>) -> VmOptions {
    VmOptions {
        timeout: CASE_TIMEOUT,
        echo: false,
        fabric: Some(FabricNic {
            socket: vm_socket.to_path_buf(),
            ip: VM_IP.parse().expect("VM_IP is an address"),
            forward: if forward { vec![PORT] } else { vec![] },
        }),
        cpu: cpu.map(str::to_owned),
        ..VmOptions::default()
    }
}

fn vm_side(out: &vm::VmOutput) -> Side {
    Side {
        code: out.exit_code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether the host side, started first, is ready.
fn host_ready(case: &Case, dir: &Path) -> bool {
    match &case.ready {
        Ready::Tcp => listening(PORT),
        Ready::Line(l) => ["out", "err"]
            .iter()
            .any(|ext| read_host(case, dir, ext).contains(l.as_str())),
    }
}

/// The result of one case: both sides and the VM's boot+setup and total seconds.
pub struct Ran {
    /// The host side.
    pub host: Side,
    /// The VM side.
    pub vm: Side,
    /// The VM's boot and setup, seconds.
    pub boot: f64,
    /// The VM's whole run, seconds.
    pub total: f64,
}

/// Runs one case against the VM on the fabric port `vm_socket`.
pub fn run_case(case: &Case, base: &HostRun, vm_socket: &Path, dir: &Path) -> Result<Ran, Error> {
    let run = &HostRun {
        host: case.emulated,
        netns_ip: case.netns_ip,
        ..base.clone()
    };
    // A server already on the port would take the case's connection (or QEMU's forward).
    if case.ready == Ready::Tcp && listening(PORT) {
        return Err(format!(
            "{}: TCP port {PORT} of this machine is already taken; the interop cases need it",
            case.name
        ));
    }
    let times = |out: &vm::VmOutput| {
        (
            out.boot_time.unwrap_or_default().as_secs_f64(),
            out.total_time.as_secs_f64(),
        )
    };
    match case.first {
        Server::Emulated => {
            let server = host_program(case, run, dir)?;
            let start = Instant::now();
            while !host_ready(case, dir) {
                if start.elapsed() > Duration::from_secs(60) {
                    let side = finish_host(case, server, dir);
                    return Err(format!(
                        "{}: the emulated side never became ready: {}",
                        case.name,
                        side.map(|s| s.stderr).unwrap_or_else(|e| e)
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!("xtask interop: {}: VM: {}", case.name, case.vm);
            let out = vm::run_in_vm(
                &["sh".into(), "-c".into(), case.vm.clone()],
                &vm_options(vm_socket, false, case.vm_cpu),
            );
            let host = finish_host(case, server, dir).map_err(|e| match &out {
                Ok(o) => format!(
                    "{e}\n--- the VM's side (exit {}):\n{}{}",
                    o.exit_code,
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(v) => format!("{e}\n--- the VM: {v}"),
            })?;
            let out = out?;
            let (boot, total) = times(&out);
            Ok(Ran {
                host,
                vm: vm_side(&out),
                boot,
                total,
            })
        }
        Server::Vm => {
            let ready = dir.join(format!("{}.ready", case.name));
            let _ = std::fs::remove_file(&ready);
            let cmd = first_in_vm(&case.vm, &case.ready, &ready);
            eprintln!("xtask interop: {}: VM: {} (first)", case.name, case.vm);
            let opts = vm_options(vm_socket, case.ready == Ready::Tcp, case.vm_cpu);
            let vm_run =
                std::thread::spawn(move || vm::run_in_vm(&["sh".into(), "-c".into(), cmd], &opts));
            let start = Instant::now();
            while !ready.exists() && !vm_run.is_finished() && start.elapsed() < CASE_TIMEOUT {
                std::thread::sleep(Duration::from_millis(50));
            }
            let host = if ready.exists() {
                let client = host_program(case, run, dir)?;
                Some(finish_host(case, client, dir))
            } else {
                None
            };
            let out = vm_run
                .join()
                .map_err(|_| format!("{}: the VM thread panicked", case.name))??;
            let vm = vm_side(&out);
            let Some(host) = host else {
                return Err(format!(
                    "{}: the VM's side never became ready (exit {}): {}{}",
                    case.name, vm.code, vm.stdout, vm.stderr
                ));
            };
            let (boot, total) = times(&out);
            Ok(Ran {
                host: host?,
                vm,
                boot,
                total,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The VM's wrapper is valid shell with the helpers it calls, for both readiness kinds.
    #[test]
    fn the_vms_first_side_script_is_valid_shell() {
        for ready in [Ready::Tcp, Ready::Line("{\"ready\": true}".into())] {
            let s = first_in_vm("prog 'a b'", &ready, Path::new("/x/c.ready"));
            let parsed = Command::new("sh")
                .args(["-n", "-c", &s])
                .status()
                .expect("run sh -n");
            assert!(parsed.success(), "{s}");
            assert!(s.contains(": > '/x/c.ready'"), "{s}");
        }
        let s = first_in_vm("p", &Ready::Line("it's on".into()), Path::new("/r"));
        assert!(s.contains("grep -qF -e 'it'\\''s on'"), "{s}");
    }

    /// Run on the host: the ready file appears once the line is printed, and the script
    /// exits with the program's code and its output; a program that ends unready fails.
    #[test]
    fn the_vms_first_side_script_waits_for_the_line_and_keeps_the_exit_code() {
        let dir = std::env::temp_dir().join(format!("interop-first-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let ready = dir.join("c.ready");
        let line = Ready::Line("up now".into());
        let prog = format!(
            "sh -c 'sleep 0.3; echo up now >&2; while [ ! -e {} ]; do sleep 0.05; done; echo done; exit 3'",
            ready.display()
        );
        let out = Command::new("sh")
            .args(["-c", &first_in_vm(&prog, &line, &ready)])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "up now\n");
        let _ = std::fs::remove_file(&ready);
        let out = Command::new("sh")
            .args(["-c", &first_in_vm("true", &line, &ready)])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "never ready\n");
        assert!(!ready.exists());
        let _ = std::fs::remove_dir_all(&dir);
        // The script's output files (the guest's /tmp is its own tmpfs; here the host's).
        let _ = std::fs::remove_file("/tmp/first.out");
        let _ = std::fs::remove_file("/tmp/first.err");
    }

    #[test]
    fn a_host_of_its_own_namespace_runs_the_program_after_its_interface_is_up() {
        let r = HostRun {
            lib: "/l".into(),
            socket: "/s".into(),
            topology: "/t".into(),
            host: "h2",
            netns_ip: Some("10.100.0.2"),
        };
        let c = r.command(&["python3".into(), "x y.py".into()]);
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(c.get_program(), "unshare");
        assert_eq!(args[..3], ["-n", "sh", "-c"]);
        assert!(
            args[3].contains("ip addr add 10.100.0.2/24 dev d0"),
            "{}",
            args[3]
        );
        assert!(args[3].ends_with("exec \"$@\""), "{}", args[3]);
        assert_eq!(args[4..], ["sh", "python3", "x y.py"]);
        let envs: Vec<_> = c.get_envs().collect();
        assert!(envs.contains(&("VERBS_EMU_HOST".as_ref(), Some("h2".as_ref()))));
    }
}
