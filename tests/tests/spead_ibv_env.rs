//! `SPEAD2_IBV_INTERFACE` read from the process environment, as spead2 reads it: once,
//! by the first UDP reader made. This binary holds one test so that nothing else reads
//! the environment before it is set.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use backend_sim::{Personality, Sim};
use spead::recv::{Stream, StreamConfig};
use spead::transport::UdpRecvConfig;
use spead::verbs::{EnvOverride, IbvConfig, Sender, UdpReader, VerbsError};
use workspace_tests::spead_verbs::{Mode, Plan};

#[test]
fn plain_udp_readers_are_rerouted_to_ibverbs() {
    let (tx_ip, rx_ip) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    // The variable names the sender's address: readers on the receiver host find their
    // device only when given their interface explicitly (which wins).
    std::env::set_var("SPEAD2_IBV_INTERFACE", tx_ip.to_string());
    std::env::set_var("SPEAD2_IBV_COMP_VECTOR", "not-a-number");
    let sim = Sim::new(41);
    let tx = sim.add_host("tx", tx_ip, Personality::Mlx5).unwrap();
    let rx = sim.add_host("rx", rx_ip, Personality::Mlx5).unwrap();
    let (tv, rv) = (sim.verbs(tx), sim.verbs(rx));
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 77, 5, 1), 7200);
    let mut udp = UdpRecvConfig::new(SocketAddr::V4(group));
    udp.max_packet_size = 1472;
    udp.buffer_size = 64 * 1472;
    udp.read_timeout = Some(Duration::from_millis(1));
    let e = UdpReader::open(&rv, &udp).unwrap_err();
    assert!(
        matches!(e, VerbsError::NoInterface { iface, .. } if iface == tx_ip),
        "the variable's interface is used when none is given: {e}"
    );
    let env = EnvOverride::from_env();
    assert_eq!((env.interface, env.comp_vector), (Some(tx_ip), 0));
    assert_eq!(
        env.warnings,
        ["SPEAD2_IBV_COMP_VECTOR is not a valid integer, ignoring"]
    );
    udp.interface = Some(rx_ip);
    let mut reader = UdpReader::open(&rv, &udp).unwrap();
    assert!(reader.is_ibv());

    let mut cfg = IbvConfig::new(vec![group], tx_ip);
    cfg.max_size = 1472;
    let mut sender = Sender::raw(&tv, &cfg, [0x02, 0x00, 10, 0, 0, 1]).unwrap();
    let plan = Plan::new(Mode::Raw, 1, 3, 4000);
    for cnt in [1, 2, 3] {
        for p in plan.packets_of(cnt) {
            sender.send(&p).unwrap();
        }
    }
    sender.drain().unwrap();
    sim.run_until_idle();
    let mut stream = Stream::new(StreamConfig::default());
    while reader.pump(&mut stream).unwrap() > 0 {}
    stream.flush();
    let mut cnts = Vec::new();
    while let Some(h) = stream.pop_heap() {
        assert!(h.complete);
        cnts.push(h.cnt);
    }
    assert_eq!(cnts, [1, 2, 3]);
}
