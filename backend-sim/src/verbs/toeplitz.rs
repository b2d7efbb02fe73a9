//! The Toeplitz RX hash of an RSS QP, sans-IO: which header bytes a hash covers (the
//! `IBV_RX_HASH_*` fields of `struct ibv_rx_hash_conf`, rdma-core `libibverbs/verbs.h`),
//! what the kernel's mlx5 driver accepts (`create_rss_raw_qp_tir`,
//! drivers/infiniband/hw/mlx5/qp.c), and the hash itself (Microsoft's "Receive Side
//! Scaling" specification, "RSS hashing functions": for each set bit of the input, XOR
//! the 32 key bits that start at that bit's position).

use verbs_api::{ErrorKind, RxHashConf, RxHashFields, RX_HASH_FUNC_TOEPLITZ};

/// The Toeplitz key length mlx5 takes: the TIR's `rx_hash_toeplitz_key` field, ten
/// 32-bit words (`create_rss_raw_qp_tir` refuses any other `rx_key_len` with EINVAL).
pub(crate) const KEY_LEN: usize = 40;

/// Checks a hash configuration as `create_rss_raw_qp_tir` does: Toeplitz only (another
/// function is EOPNOTSUPP), a 40-byte key (EINVAL), only the defined fields
/// (EOPNOTSUPP), `INNER` only with tunnel offloads, which the model lacks (EOPNOTSUPP),
/// and not IPv4 with IPv6 addresses nor TCP with UDP ports (EINVAL).
pub(crate) fn check(conf: &RxHashConf) -> Result<(), (ErrorKind, &'static str)> {
    if conf.function != RX_HASH_FUNC_TOEPLITZ {
        return Err((ErrorKind::Unsupported, "only the Toeplitz RX hash"));
    }
    if conf.key.len() != KEY_LEN {
        return Err((ErrorKind::InvalidArgument, "the Toeplitz key is 40 bytes"));
    }
    let f = conf.fields;
    if RxHashFields::from_bits(f.bits()).is_none() {
        return Err((ErrorKind::Unsupported, "unknown RX hash fields"));
    }
    if f.contains(RxHashFields::INNER) {
        return Err((ErrorKind::Unsupported, "inner RSS needs tunnel offloads"));
    }
    let v4 = RxHashFields::SRC_IPV4 | RxHashFields::DST_IPV4;
    let v6 = RxHashFields::SRC_IPV6 | RxHashFields::DST_IPV6;
    let tcp = RxHashFields::SRC_PORT_TCP | RxHashFields::DST_PORT_TCP;
    let udp = RxHashFields::SRC_PORT_UDP | RxHashFields::DST_PORT_UDP;
    if f.intersects(v4) && f.intersects(v6) {
        return Err((ErrorKind::InvalidArgument, "IPv4 and IPv6 fields together"));
    }
    if f.intersects(tcp) && f.intersects(udp) {
        return Err((ErrorKind::InvalidArgument, "TCP and UDP ports together"));
    }
    Ok(())
}

/// The Toeplitz hash of `input` under `key` (which must be at least 4 bytes longer than
/// `input`, as the 40-byte key is for the at most 36 bytes an IPv6 4-tuple has).
pub(crate) fn hash(key: &[u8], input: &[u8]) -> u32 {
    let mut result = 0u32;
    // The 32 key bits starting at the current input bit, and the key bits after them.
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, &byte) in input.iter().enumerate() {
        let next = key.get(i + 4).copied().unwrap_or(0);
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
        }
    }
    result
}

/// The hash input of an IPv4 frame (`frame` from its Ethernet header on): the fields
/// `fields` selects, in the order of the RSS specification (source address, destination
/// address, source port, destination port). Ports count only for their own protocol;
/// a frame that is not IPv4 has no IPv4 fields.
pub(crate) fn input(frame: &[u8], fields: RxHashFields, out: &mut Vec<u8>) {
    out.clear();
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return;
    }
    let ip = &frame[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if fields.contains(RxHashFields::SRC_IPV4) {
        out.extend_from_slice(&ip[12..16]);
    }
    if fields.contains(RxHashFields::DST_IPV4) {
        out.extend_from_slice(&ip[16..20]);
    }
    let (src, dst) = match ip[9] {
        6 => (RxHashFields::SRC_PORT_TCP, RxHashFields::DST_PORT_TCP),
        17 => (RxHashFields::SRC_PORT_UDP, RxHashFields::DST_PORT_UDP),
        _ => return,
    };
    let Some(l4) = ip.get(ihl..ihl + 4) else {
        return;
    };
    if fields.contains(src) {
        out.extend_from_slice(&l4[0..2]);
    }
    if fields.contains(dst) {
        out.extend_from_slice(&l4[2..4]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of the RSS specification's verification suite.
    const MS_KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    fn udp_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn the_rss_specification_verification_vectors() {
        // IPv4 rows of the specification's table: 66.9.149.187:2794 -> 161.142.100.80:1766
        // hashes to 0x323e8fc2 (addresses only) and 0x51ccc178 (with ports);
        // 199.92.111.2:14230 -> 65.69.140.83:4739 to 0xd718262a and 0xc626b0ea.
        let rows = [
            (
                [66, 9, 149, 187],
                [161, 142, 100, 80],
                2794,
                1766,
                0x323e_8fc2,
                0x51cc_c178,
            ),
            (
                [199, 92, 111, 2],
                [65, 69, 140, 83],
                14230,
                4739,
                0xd718_262a,
                0xc626_b0ea,
            ),
        ];
        let mut buf = Vec::new();
        for (src, dst, sp, dp, ip_only, with_ports) in rows {
            let f = udp_frame(src, dst, sp, dp);
            input(
                &f,
                RxHashFields::SRC_IPV4 | RxHashFields::DST_IPV4,
                &mut buf,
            );
            assert_eq!(hash(&MS_KEY, &buf), ip_only);
            let all = RxHashFields::SRC_IPV4
                | RxHashFields::DST_IPV4
                | RxHashFields::SRC_PORT_UDP
                | RxHashFields::DST_PORT_UDP;
            input(&f, all, &mut buf);
            assert_eq!(buf.len(), 12);
            assert_eq!(hash(&MS_KEY, &buf), with_ports);
        }
    }

    #[test]
    fn no_fields_or_other_protocols_hash_nothing() {
        let mut buf = vec![1];
        let f = udp_frame([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        input(&f, RxHashFields::empty(), &mut buf);
        assert!(buf.is_empty());
        assert_eq!(hash(&MS_KEY, &buf), 0);
        // TCP port fields on a UDP frame: only the addresses.
        let fields = RxHashFields::SRC_IPV4 | RxHashFields::SRC_PORT_TCP;
        input(&f, fields, &mut buf);
        assert_eq!(buf, [10, 0, 0, 1]);
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        input(&arp, fields, &mut buf);
        assert!(buf.is_empty());
    }

    #[test]
    fn configurations_as_mlx5_checks_them() {
        let ok = |fields| RxHashConf {
            function: RX_HASH_FUNC_TOEPLITZ,
            key: vec![0; 40],
            fields,
        };
        assert_eq!(check(&ok(RxHashFields::empty())), Ok(()));
        assert_eq!(
            check(&ok(RxHashFields::SRC_IPV4 | RxHashFields::DST_PORT_UDP)),
            Ok(())
        );
        let kind = |c: &RxHashConf| check(c).unwrap_err().0;
        assert_eq!(
            kind(&RxHashConf {
                function: 2,
                ..ok(RxHashFields::empty())
            }),
            ErrorKind::Unsupported
        );
        assert_eq!(
            kind(&RxHashConf {
                key: vec![0; 39],
                ..ok(RxHashFields::empty())
            }),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind(&ok(RxHashFields::SRC_IPV4 | RxHashFields::DST_IPV6)),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind(&ok(RxHashFields::SRC_PORT_TCP | RxHashFields::DST_PORT_UDP)),
            ErrorKind::InvalidArgument
        );
        assert_eq!(kind(&ok(RxHashFields::INNER)), ErrorKind::Unsupported);
        assert_eq!(
            kind(&ok(RxHashFields::from_bits_retain(1 << 9))),
            ErrorKind::Unsupported
        );
    }
}
