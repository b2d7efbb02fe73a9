//! What a case's two sides must have printed ([`Check`]): exit codes, result lines, the
//! peer's GID, or SPEAD heaps.

use super::addresses::{HOST_IP, VM_IP};
use super::cases::{gid_seen, heap_lines, Case, Check, Server};
use super::runner::Side;
use crate::cmd::common::Error;

/// The failure of `who`'s side, with its output.
fn fail(case: &Case, who: &str, side: &Side, why: &str) -> Error {
    format!(
        "{} ({who}): {why}\n--- stdout:\n{}--- stderr:\n{}",
        case.name, side.stdout, side.stderr
    )
}

/// Checks both sides of `case`: each exited with 0, and what [`Case::check`] asks.
///
/// # Errors
/// The first difference, with the side's output.
pub fn check(case: &Case, host: &Side, vm: &Side) -> Result<(), Error> {
    let sides = [("the emulated host", host), ("rxe in the VM", vm)];
    for (who, side) in sides {
        if side.code != 0 {
            return Err(fail(case, who, side, &format!("exited with {}", side.code)));
        }
    }
    match &case.check {
        Check::Verbs {
            client,
            server,
            gid,
        } => {
            // The host's side saw the VM's GID and the VM's side h1's.
            let (host_lines, vm_lines) = match case.first {
                Server::Emulated => (server, client),
                Server::Vm => (client, server),
            };
            for ((who, side), lines, peer) in
                [(sides[0], host_lines, VM_IP), (sides[1], vm_lines, HOST_IP)]
            {
                for (prefix, suffix) in lines {
                    if !side
                        .stdout
                        .lines()
                        .any(|l| l.starts_with(prefix.as_str()) && l.ends_with(suffix))
                    {
                        return Err(fail(
                            case,
                            who,
                            side,
                            &format!("no line `{prefix}...{suffix}`"),
                        ));
                    }
                }
                if !gid_seen(&side.stdout, *gid, peer) {
                    return Err(fail(
                        case,
                        who,
                        side,
                        &format!("no remote address with the {gid:?} GID of {peer}"),
                    ));
                }
            }
        }
        Check::Lines { client, server } => {
            let (host_lines, vm_lines) = match case.first {
                Server::Emulated => (server, client),
                Server::Vm => (client, server),
            };
            for ((who, side), (prefix, want)) in [(sides[0], host_lines), (sides[1], vm_lines)] {
                let got: Vec<&str> = side
                    .stdout
                    .lines()
                    .filter(|l| l.starts_with(prefix))
                    .collect();
                if got != *want {
                    return Err(fail(
                        case,
                        who,
                        side,
                        &format!("its `{prefix}` lines are {got:?}, not {want:?}"),
                    ));
                }
            }
        }
        Check::Heaps { receiver, want } => {
            let (receiving, _) = by_role(*receiver, sides);
            heaps_equal(case, receiving.0, receiving.1, want)?;
        }
        Check::HeapsAsSent { receiver } => {
            let (receiving, sending) = by_role(*receiver, sides);
            let want = heap_lines(&sending.1.stdout);
            if want.is_empty() {
                return Err(fail(case, sending.0, sending.1, "printed no heap"));
            }
            heaps_equal(case, receiving.0, receiving.1, &want)?;
        }
    }
    Ok(())
}

/// (the receiving side, the sending side) of a SPEAD case whose receiver is `receiver`.
fn by_role<'a>(
    receiver: Server,
    sides: [(&'static str, &'a Side); 2],
) -> ((&'static str, &'a Side), (&'static str, &'a Side)) {
    match receiver {
        Server::Emulated => (sides[0], sides[1]),
        Server::Vm => (sides[1], sides[0]),
    }
}

/// The receiver printed exactly the heap lines `want`, in order.
fn heaps_equal(case: &Case, who: &str, side: &Side, want: &[String]) -> Result<(), Error> {
    let got = heap_lines(&side.stdout);
    if got.len() != want.len() {
        return Err(fail(
            case,
            who,
            side,
            &format!("{} heaps, {} expected", got.len(), want.len()),
        ));
    }
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
        return Err(fail(
            case,
            who,
            side,
            &format!("heap {i} differs: got {}, want {}", got[i], want[i]),
        ));
    }
    Ok(())
}

/// A one-line summary of what the sides printed that the case checks.
pub fn summary(case: &Case, side: &Side) -> String {
    match &case.check {
        Check::Verbs { client, server, .. } => side
            .stdout
            .lines()
            .filter(|l| {
                client
                    .iter()
                    .chain(server)
                    .any(|(p, _)| l.starts_with(p.as_str()))
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Check::Lines { client, server } => {
            let n = side
                .stdout
                .lines()
                .filter(|l| l.starts_with(client.0) || l.starts_with(server.0))
                .count();
            format!("{n} checked lines")
        }
        Check::Heaps { .. } | Check::HeapsAsSent { .. } => {
            format!("{} heaps", heap_lines(&side.stdout).len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::interop::cases::{pingpong, Gid, Ready};

    fn side(code: i32, stdout: &str) -> Side {
        Side {
            code,
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    fn pingpong_out(peer: &str) -> String {
        format!(
            "  local address: ...\n  remote address: LID 0x0000, QPN 0x000011, PSN 0x1, GID ::ffff:{peer}\n\
             819200 bytes in 0.10 seconds = 65.54 Mbit/sec\n100 iters in 0.10 seconds = 1000.00 usec/iter\n"
        )
    }

    #[test]
    fn a_verbs_case_needs_both_exit_codes_result_lines_and_peer_gids() {
        let c = pingpong("ibv_rc_pingpong", Gid::Ipv4, Server::Emulated, 4096);
        let (host, vm) = (
            side(0, &pingpong_out(VM_IP)),
            side(0, &pingpong_out(HOST_IP)),
        );
        assert_eq!(check(&c, &host, &vm), Ok(()));
        // Each side must have seen the other's GID, not its own.
        let e = check(&c, &side(0, &pingpong_out(HOST_IP)), &vm).unwrap_err();
        assert!(e.contains("GID of 10.100.0.20"), "{e}");
        let e = check(&c, &host, &side(1, &pingpong_out(HOST_IP))).unwrap_err();
        assert!(e.contains("(rxe in the VM): exited with 1"), "{e}");
        let short = pingpong_out(HOST_IP).replace("100 iters", "99 iters");
        let e = check(&c, &host, &side(0, &short)).unwrap_err();
        assert!(e.contains("no line `100 iters in ... usec/iter`"), "{e}");
    }

    #[test]
    fn an_rping_case_needs_exactly_its_ping_data_lines() {
        use crate::cmd::interop::cm_cases::{rping, rping_data};
        let c = rping(Gid::Ipv4, Server::Vm);
        let data = rping_data(10);
        let client: String = data.iter().map(|d| format!("ping data: {d}\n")).collect();
        let server: String = data
            .iter()
            .map(|d| format!("server ping data: {d}\n"))
            .collect();
        let (host, vm) = (side(0, &client), side(0, &format!("x\n{server}")));
        assert_eq!(check(&c, &host, &vm), Ok(()));
        assert_eq!(summary(&c, &host), "10 checked lines");
        let nine: String = client.lines().take(9).map(|l| format!("{l}\n")).collect();
        let e = check(&c, &side(0, &nine), &vm).unwrap_err();
        assert!(
            e.contains("(the emulated host): its `ping data: ` lines are"),
            "{e}"
        );
        // The client's lines on the server's side do not count.
        let e = check(&c, &host, &side(0, &client)).unwrap_err();
        assert!(e.contains("`server ping data: ` lines are []"), "{e}");
    }

    fn spead_case(check: Check) -> Case {
        Case {
            name: "s".into(),
            first: Server::Vm,
            ready: Ready::Line("ready".into()),
            emulated: "h2",
            netns_ip: None,
            host: vec!["send".into()],
            vm: "recv".into(),
            vm_cpu: None,
            check,
            vm_frames: 0,
        }
    }

    #[test]
    fn a_spead_case_needs_exactly_the_heaps_sent() {
        let sent = "{\"cnt\": 1, \"items\": []}\n{\"cnt\": 2, \"items\": []}\n";
        let c = spead_case(Check::HeapsAsSent {
            receiver: Server::Vm,
        });
        let got = format!("{{\"ready\": true}}\n{sent}");
        assert_eq!(check(&c, &side(0, sent), &side(0, &got)), Ok(()));
        let e = check(
            &c,
            &side(0, sent),
            &side(0, "{\"cnt\": 1, \"items\": []}\n"),
        )
        .unwrap_err();
        assert!(e.contains("1 heaps, 2 expected"), "{e}");
        let other = sent.replace("\"cnt\": 2", "\"cnt\": 3");
        let e = check(&c, &side(0, sent), &side(0, &other)).unwrap_err();
        assert!(e.contains("heap 1 differs"), "{e}");
        let e = check(&c, &side(0, ""), &side(0, "")).unwrap_err();
        assert!(e.contains("printed no heap"), "{e}");
        let c = spead_case(Check::Heaps {
            receiver: Server::Emulated,
            want: vec!["{\"cnt\": 1, \"items\": []}".into()],
        });
        assert_eq!(
            check(&c, &side(0, "{\"cnt\": 1, \"items\": []}\n"), &side(0, "")),
            Ok(())
        );
    }
}
