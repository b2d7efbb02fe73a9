//! What the wire tests share (`wire.rs`, `wire_cm.rs`): network namespaces of their own,
//! held by a `sleep` that `unshare -n` started (so the tunnels' fixed UDP ports and the
//! veth and vxlan interfaces touch nothing of the machine's; root needed, as CI runs),
//! and two fabric processes joined by VXLAN over loopback, as two machines would be.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::fabric::{Fabric, DEADLINE};
use super::{require, run, stderr};

/// Fails with the reason unless the test runs as root.
pub fn need_root() {
    // SAFETY: geteuid takes nothing and cannot fail.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "the wire tests make network namespaces, veth and vxlan interfaces: run them as root \
         (CI does)"
    );
}

/// A network namespace of this test, held by a `sleep` that `unshare -n` started in it;
/// loopback is up. Dropping it ends the holder (and the namespace with the last process
/// in it).
pub struct Netns {
    holder: Child,
    pub pid: String,
}

impl Netns {
    pub fn new() -> Netns {
        let unshare = require("unshare", "util-linux");
        require("nsenter", "util-linux");
        require("ip", "iproute2");
        let holder = Command::new(unshare)
            .args(["-n", "sleep", "3600"])
            .stdin(Stdio::null())
            .spawn()
            .expect("start unshare -n sleep");
        let pid = holder.id().to_string();
        let mine = std::fs::read_link("/proc/self/ns/net").expect("our network namespace");
        let theirs = Path::new("/proc").join(&pid).join("ns/net");
        let begin = Instant::now();
        // The holder is in a namespace of its own once unshare has made it.
        while std::fs::read_link(&theirs).map_or(true, |l| l == mine) {
            assert!(begin.elapsed() < DEADLINE, "unshare -n made no namespace");
            std::thread::sleep(Duration::from_millis(5));
        }
        let ns = Netns { holder, pid };
        ns.ip("link set lo up");
        ns
    }

    /// `nsenter` into this namespace, then the rest.
    pub fn prefix(&self) -> [&str; 5] {
        ["nsenter", "-t", &self.pid, "-n", "--"]
    }

    /// `c` (program, arguments and environment) run in this namespace.
    pub fn wrap(&self, c: &Command) -> Command {
        let mut w = Command::new("nsenter");
        w.args(["-t", &self.pid, "-n", "--"])
            .arg(c.get_program())
            .args(c.get_args());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => w.env(k, v),
                None => w.env_remove(k),
            };
        }
        w
    }

    /// Runs `ip ARGS` here; fails the test if it fails.
    pub fn ip(&self, args: &str) {
        self.sh(&format!("ip {args}"));
    }

    /// Runs a bash command here; fails the test if it fails. Returns its stdout.
    pub fn sh(&self, script: &str) -> String {
        let mut c = Command::new("nsenter");
        c.args(["-t", &self.pid, "-n", "--", "bash", "-c", script]);
        let o = run(c);
        assert!(o.status.success(), "{script}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A topology of hosts h1 and h2 on 10.100.0.0/24 where `here` is this fabric's and the
/// other is `remote`, and a VXLAN port from `local` to `remote` (both `127.0.0.1:PORT`)
/// with `faults`, plus `extra` (more `[[port]]` tables).
pub fn half(dir: &Path, here: &str, local: u16, remote: u16, faults: &str, extra: &str) -> PathBuf {
    let host = |name: &str, ip: &str| {
        let remote = if name == here { "" } else { "remote = true\n" };
        format!("[[host]]\nname = \"{name}\"\nip = \"{ip}\"\n{remote}\n")
    };
    let text = format!(
        "{}{}[[port]]\nkind = \"vxlan\"\nlocal = \"127.0.0.1:{local}\"\n\
         remote = \"127.0.0.1:{remote}\"\nvni = 42\n{faults}\n{extra}",
        host("h1", "10.100.0.1"),
        host("h2", "10.100.0.2"),
    );
    let path = dir.join(format!("{here}.toml"));
    std::fs::write(&path, text).expect("write the topology");
    path
}

/// Two fabric processes in namespace `ns`, as two machines: A has h1, B has h2, joined
/// by VXLAN over loopback (A at 4789, B at 4790), with `faults` on both ports and
/// `seed`; A's topology has `extra_a` too.
pub fn two_fabrics(
    dir: &Path,
    ns: &Netns,
    faults: &str,
    seed: &str,
    extra_a: &str,
) -> ((Fabric, PathBuf), (Fabric, PathBuf)) {
    let ta = half(dir, "h1", 4789, 4790, faults, extra_a);
    let tb = half(dir, "h2", 4790, 4789, faults, "");
    let start_one = |name: &str, t: &Path| {
        let t = t.to_str().expect("a UTF-8 path");
        Fabric::start_named(dir, name, &ns.prefix(), &["--topology", t, "--seed", seed])
    };
    let a = start_one("-a", &ta);
    let b = start_one("-b", &tb);
    ((a, ta), (b, tb))
}

/// A wire test's set-up (after checking it runs as root): its scratch folder `test`, a
/// namespace of its own and [`two_fabrics`] in it with `faults`, `seed` and `extra_a`.
/// Bind it as `let TwoFabrics { dir, ns, a, b } = ...` so that the fabrics drop before
/// the namespace, as bindings drop in the reverse of their order.
pub struct TwoFabrics {
    pub a: (Fabric, PathBuf),
    pub b: (Fabric, PathBuf),
    pub ns: Netns,
    pub dir: PathBuf,
}

impl TwoFabrics {
    pub fn new(test: &str, faults: &str, seed: &str, extra_a: &str) -> TwoFabrics {
        need_root();
        let dir = super::fabric::scratch(test);
        let ns = Netns::new();
        let (a, b) = two_fabrics(&dir, &ns, faults, seed, extra_a);
        TwoFabrics { a, b, ns, dir }
    }
}

/// The number before `what` in a summary.
pub fn count_before(summary: &str, what: &str) -> u64 {
    summary
        .find(what)
        .and_then(|at| summary[..at].rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {what:?} in {summary}"))
}
