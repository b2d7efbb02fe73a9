//! A verbs receiver joins its multicast groups on the host (IGMP, as spead2's ibverbs
//! reader does) only for a backend whose devices sit on the host's network
//! (`Verbs::joins_host_multicast`): never from a simulated run. Checked against the
//! kernel's own list of memberships, /proc/net/igmp, with a simulated host that has a
//! real address of this machine (127.0.0.1), where a join would succeed.

use std::net::{Ipv4Addr, SocketAddrV4};

use backend_sim::{Personality, Sim, SimVerbs};
use spead::verbs::{IbvConfig, Receiver, VerbsError};
use verbs_api::Verbs;

/// The groups this machine has joined, from /proc/net/igmp (every interface).
fn host_groups() -> Vec<Ipv4Addr> {
    let text = std::fs::read_to_string("/proc/net/igmp").expect("read /proc/net/igmp");
    text.lines()
        .filter(|l| l.starts_with('\t'))
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|hex| u32::from_str_radix(hex, 16).ok())
        // The kernel prints the address's bytes as a native-endian integer.
        .map(|v| Ipv4Addr::from(v.to_ne_bytes()))
        .collect()
}

/// The simulator, told to behave as a real device would: join on the host.
struct JoiningSim(SimVerbs);

impl Verbs for JoiningSim {
    type Context = <SimVerbs as Verbs>::Context;

    fn devices(&self) -> verbs_api::Result<Vec<verbs_api::DeviceInfo>> {
        self.0.devices()
    }

    fn open(&self, name: &str) -> verbs_api::Result<Self::Context> {
        self.0.open(name)
    }

    fn joins_host_multicast(&self) -> bool {
        true
    }
}

fn config(group: Ipv4Addr, iface: Ipv4Addr) -> IbvConfig {
    let mut cfg = IbvConfig::new(vec![SocketAddrV4::new(group, 7148)], iface);
    cfg.max_size = 1472;
    cfg.buffer_size = 16 * 1600;
    cfg
}

#[test]
fn a_simulated_receiver_never_joins_on_the_host() {
    let lo = Ipv4Addr::LOCALHOST;
    let sim = Sim::new(1);
    let h = sim.add_host("h0", lo, Personality::Mlx5).unwrap();
    let verbs = sim.verbs(h);
    assert!(!verbs.joins_host_multicast());
    let (raw, ud) = (Ipv4Addr::new(239, 77, 9, 1), Ipv4Addr::new(239, 77, 9, 2));
    let r = Receiver::raw(&verbs, &config(raw, lo)).expect("raw receiver");
    let u = Receiver::ud(&verbs, &config(ud, lo)).expect("UD receiver");
    let groups = host_groups();
    assert!(!groups.contains(&raw), "{groups:?}");
    assert!(!groups.contains(&ud), "{groups:?}");
    drop((r, u));
}

#[test]
fn a_receiver_on_the_host_network_joins_for_its_life() {
    let lo = Ipv4Addr::LOCALHOST;
    let sim = Sim::new(1);
    let h = sim.add_host("h0", lo, Personality::Mlx5).unwrap();
    let verbs = JoiningSim(sim.verbs(h));
    let group = Ipv4Addr::new(239, 77, 9, 3);
    assert!(!host_groups().contains(&group));
    let r = Receiver::raw(&verbs, &config(group, lo)).expect("raw receiver");
    assert!(host_groups().contains(&group));
    drop(r);
    assert!(!host_groups().contains(&group));
}

#[test]
fn a_host_join_the_kernel_refuses_is_an_error_naming_group_and_interface() {
    // 10.77.0.2 is no address of this machine: the kernel has no such interface.
    let iface = Ipv4Addr::new(10, 77, 0, 2);
    let sim = Sim::new(1);
    let h = sim.add_host("h0", iface, Personality::Mlx5).unwrap();
    let verbs = JoiningSim(sim.verbs(h));
    let group = Ipv4Addr::new(239, 77, 9, 4);
    let err = Receiver::raw(&verbs, &config(group, iface)).unwrap_err();
    assert!(
        matches!(err, VerbsError::HostJoin { group: g, iface: i, .. } if g == group && i == iface),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .starts_with("joining multicast group 239.77.9.4 on interface 10.77.0.2: "));
}
