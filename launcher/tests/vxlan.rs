//! Two launched fabrics joined by VXLAN, as two machines would be (issue 24's "two
//! machines, shown on one", through the launcher): each fabric's topology has the other's
//! host as `remote = true` and a `[[port]]` VXLAN tunnel to the other fabric, here on
//! 127.0.0.1 (on two machines, their addresses). The fabric process runs in the caller's
//! network namespace, so its port reaches the other fabric; spead2's multicast sent by a
//! host of one fabric reaches spead2's ibverbs reader on a host of the other.

mod common;

use std::io::BufRead;
use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

use common::*;

/// How long the reader may wait for the heaps.
const DEADLINE: Duration = Duration::from_secs(120);

/// A topology where `here` is this fabric's host and `there` the other's, with a VXLAN
/// port from 127.0.0.1:`local` to 127.0.0.1:`remote`.
fn half(here: (&str, &str), there: (&str, &str), local: u16, remote: u16) -> String {
    format!(
        "[[host]]\nname = \"{}\"\nip = \"{}\"\npersonality = \"mlx5\"\n\n\
         [[host]]\nname = \"{}\"\nip = \"{}\"\npersonality = \"mlx5\"\nremote = true\n\n\
         [[port]]\nkind = \"vxlan\"\nlocal = \"127.0.0.1:{local}\"\n\
         remote = \"127.0.0.1:{remote}\"\nvni = 42\n",
        here.0, here.1, there.0, there.1
    )
}

/// Two UDP ports free on 127.0.0.1 now.
fn two_free_ports() -> (u16, u16) {
    let a = UdpSocket::bind("127.0.0.1:0").expect("a UDP port");
    let b = UdpSocket::bind("127.0.0.1:0").expect("a UDP port");
    let port = |s: &UdpSocket| s.local_addr().expect("its address").port();
    (port(&a), port(&b))
}

/// spead2's `UdpIbvStream` on h2 of fabric B sends 20 heaps to a multicast group; spead2's
/// `add_udp_ibv_reader` on h1 of fabric A receives exactly them, across the tunnel.
#[test]
fn spead2_multicast_crosses_two_launched_fabrics_joined_by_vxlan() {
    let _pair = one_test_at_a_time();
    let python = workspace_tests::spead2::python();
    let python = python.to_str().expect("a UTF-8 path");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/spead2_two_hosts.py");
    let script = script.to_str().expect("a UTF-8 path");
    let dir = std::env::temp_dir().join(format!("verbs-emu-vxlan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let (pa, pb) = two_free_ports();
    let h1 = ("h1", "10.100.0.1");
    let h2 = ("h2", "10.100.0.2");
    let (ta, tb) = (dir.join("a.toml"), dir.join("b.toml"));
    std::fs::write(&ta, half(h1, h2, pa, pb)).expect("write a.toml");
    std::fs::write(&tb, half(h2, h1, pb, pa)).expect("write b.toml");
    let (fa, fb) = (fabric("vxlan-a"), fabric("vxlan-b"));
    let heaps = "20";

    let topology = |t: &Path| ["--topology".to_owned(), t.display().to_string()];
    let opts_a = topology(&ta);
    let opts_a: Vec<&str> = opts_a.iter().map(String::as_str).collect();
    let mut reader = run_with(
        &fa,
        "h1",
        &opts_a,
        &[
            python,
            script,
            "recv",
            "239.10.0.1",
            "7148",
            "10.100.0.1",
            heaps,
        ],
    )
    .spawn()
    .expect("start the reader");
    // A reader that gets nothing would wait for ever: past the deadline it is sent
    // SIGTERM (which the launcher passes on), and the test fails on what it printed.
    let pid = libc::pid_t::try_from(reader.id()).expect("a pid");
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if watchdog.recv_timeout(DEADLINE).is_err() {
            // SAFETY: kill takes no pointers; the pid is the test's own child, reaped
            // only after this thread has been joined.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    });
    let mut lines =
        std::io::BufReader::new(reader.stdout.take().expect("the reader's stdout")).lines();
    match lines.next() {
        Some(Ok(l)) if l == r#"{"ready": true}"# => {}
        other => panic!(
            "the reader is not ready ({other:?}): {}",
            rest_of_stderr(&mut reader)
        ),
    }
    let opts_b = topology(&tb);
    let opts_b: Vec<&str> = opts_b.iter().map(String::as_str).collect();
    let sender = ran(&mut run_with(
        &fb,
        "h2",
        &opts_b,
        &[
            python,
            script,
            "send",
            "239.10.0.1",
            "7148",
            "10.100.0.2",
            heaps,
        ],
    ));
    assert!(sender.status.success(), "sender: {sender:?}");
    let received: Vec<String> = lines.map(|l| l.expect("the reader's output")).collect();
    let _ = done.send(());
    watchdog.join().expect("the watchdog");
    let status = reader.wait().expect("wait for the reader");
    assert!(
        status.success(),
        "reader ({status}): {}",
        rest_of_stderr(&mut reader)
    );
    let sent: Vec<&str> = sender.out.lines().collect();
    assert_eq!(sent.len(), 20, "{}", sender.out);
    assert_eq!(received, sent);
    wait_fabric_gone(&fb);
    wait_fabric_gone(&fa);
    let _ = std::fs::remove_dir_all(&dir);
}
