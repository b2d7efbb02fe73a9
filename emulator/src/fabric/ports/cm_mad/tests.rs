//! Round trips of the CM MADs and the refusals of what this module does not read.

use super::*;

#[test]
fn every_message_survives_the_round_trip() {
    let rep = Rep {
        local_comm_id: 7,
        remote_comm_id: 0xbac9_7c30,
        local_qkey: 0,
        local_qpn: 0x123456,
        starting_psn: 0xabcdef,
        responder_resources: 16,
        initiator_depth: 4,
        target_ack_delay: 15,
        failover_accepted: 0,
        flow_control: true,
        rnr_retry_count: 6,
        srq: true,
        local_ca_guid: 0x0000_0aff_fe64_0001,
        private_data: (0..private::REP as u8).collect(),
    };
    let rej = Rej {
        local_comm_id: 3,
        remote_comm_id: 9,
        message_rejected: 2,
        reason: 28,
        ari: vec![1, 2, 3, 4, 5, 6, 7, 8],
        private_data: vec![0xee; private::REJ],
    };
    for msg in [
        Msg::Rep(rep),
        Msg::Rej(rej),
        Msg::Mra(1, 2, 1, 23),
        Msg::Rtu(5, 6),
        Msg::Dreq(8, 9, 0x11),
        Msg::Drep(10, 11),
    ] {
        let mad = Mad { tid: 42, msg };
        let b = mad.encode();
        assert_eq!(&b[..4], &[1, 0x07, 2, 3]);
        assert_eq!(Mad::decode(&b).unwrap(), mad);
    }
    let rtu = Mad {
        tid: 1,
        msg: Msg::Rtu(0x0102_0304, 0x0506_0708),
    }
    .encode();
    assert_eq!(&rtu[16..18], &[0x00, 0x14]);
    assert_eq!(&rtu[24..32], &[1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn other_mads_and_headers_are_refused() {
    assert!(Mad::decode(&[0u8; 100]).is_err());
    let mut b = Mad {
        tid: 0,
        msg: Msg::Rtu(1, 2),
    }
    .encode();
    b[1] = 0x81;
    assert!(Mad::decode(&b).is_err());
    b[1] = CLASS_CM;
    b[16..18].copy_from_slice(&0x0019u16.to_be_bytes());
    assert_eq!(Mad::decode(&b).unwrap_err(), "a CM MAD of attribute 0x0019");
}
