//! Tiny captures built in memory: every link type, both containers and byte orders,
//! VLAN tags, IP options, fragments, truncation, corruption and filters. This file builds
//! the frames and files; the tests are in its modules.

use std::net::{Ipv4Addr, SocketAddrV4};

use netwire::checksum::internet_checksum as ip_checksum;
use proptest::prelude::*;

use super::*;
use crate::recv::StreamConfig;
use crate::send::{heap_to_bytes, Heap};
use crate::wire::Flavour;

const SRC: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000);
const DST: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148);

/// An IPv4 packet (with `options`, a multiple of 4 bytes) carrying `payload`.
fn ipv4(proto: u8, frag: u16, options: &[u8], l4: &[u8]) -> Vec<u8> {
    assert_eq!(options.len() % 4, 0);
    let ihl = 20 + options.len();
    let total = ihl + l4.len();
    let mut ip = vec![0u8; ihl];
    ip[0] = 0x40 | (ihl / 4) as u8;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&SRC.ip().octets());
    ip[16..20].copy_from_slice(&DST.ip().octets());
    ip[20..].copy_from_slice(options);
    let sum = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip.extend_from_slice(l4);
    ip
}

fn udp(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&src.port().to_be_bytes());
    u.extend_from_slice(&dst.port().to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

fn ip_udp(payload: &[u8]) -> Vec<u8> {
    ipv4(17, 0x4000, &[], &udp(SRC, DST, payload))
}

fn ip_udp_to(dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let mut ip = ipv4(17, 0, &[], &udp(SRC, dst, payload));
    ip[16..20].copy_from_slice(&dst.ip().octets());
    ip[10..12].copy_from_slice(&[0, 0]);
    let sum = ip_checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip
}

fn eth(tags: &[u16], ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![0x01, 0x00, 0x5e, 0x0a, 0x00, 0x01, 0x02, 0, 0, 0, 0, 1];
    for &tpid in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&0x0064u16.to_be_bytes()); // VLAN 100
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn sll(protocol: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
    f.extend_from_slice(&protocol.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn sll2(protocol: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = protocol.to_be_bytes().to_vec();
    f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
    f.extend_from_slice(l3);
    f
}

#[derive(Clone)]
struct Rec {
    ts_ns: u64,
    data: Vec<u8>,
    orig_len: u32,
}

fn rec(ts_ns: u64, data: Vec<u8>) -> Rec {
    let orig_len = data.len() as u32;
    Rec {
        ts_ns,
        data,
        orig_len,
    }
}

fn put32(out: &mut Vec<u8>, big: bool, v: u32) {
    out.extend_from_slice(&if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    });
}

fn put16(out: &mut Vec<u8>, big: bool, v: u16) {
    out.extend_from_slice(&if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    });
}

/// A classic pcap file.
fn pcap(big: bool, nanos: bool, link: u32, records: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    put32(&mut out, big, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    put16(&mut out, big, 2);
    put16(&mut out, big, 4);
    put32(&mut out, big, 0);
    put32(&mut out, big, 0);
    put32(&mut out, big, 262_144);
    put32(&mut out, big, link);
    for r in records {
        let div = if nanos { 1 } else { 1000 };
        put32(&mut out, big, (r.ts_ns / 1_000_000_000) as u32);
        put32(&mut out, big, ((r.ts_ns % 1_000_000_000) / div) as u32);
        put32(&mut out, big, r.data.len() as u32);
        put32(&mut out, big, r.orig_len);
        out.extend_from_slice(&r.data);
    }
    out
}

fn ng_block(out: &mut Vec<u8>, big: bool, block_type: u32, body: &[u8]) {
    let padded = body.len().div_ceil(4) * 4;
    let total = (12 + padded) as u32;
    put32(out, big, block_type);
    put32(out, big, total);
    out.extend_from_slice(body);
    out.resize(out.len() + padded - body.len(), 0);
    put32(out, big, total);
}

fn ng_shb(out: &mut Vec<u8>, big: bool) {
    let mut body = Vec::new();
    put32(&mut body, big, 0x1a2b_3c4d);
    put16(&mut body, big, 1);
    put16(&mut body, big, 0);
    body.extend_from_slice(&[0xff; 8]); // section length unknown
    ng_block(out, big, 0x0a0d_0d0a, &body);
}

/// An IDB with an optional if_tsresol.
fn ng_idb(out: &mut Vec<u8>, big: bool, link: u16, tsresol: Option<u8>) {
    let mut body = Vec::new();
    put16(&mut body, big, link);
    put16(&mut body, big, 0);
    put32(&mut body, big, 0);
    if let Some(r) = tsresol {
        put16(&mut body, big, 9);
        put16(&mut body, big, 1);
        body.extend_from_slice(&[r, 0, 0, 0]);
        put16(&mut body, big, 0);
        put16(&mut body, big, 0);
    }
    ng_block(out, big, 1, &body);
}

fn ng_epb(out: &mut Vec<u8>, big: bool, iface: u32, ts: u64, r: &Rec) {
    let mut body = Vec::new();
    put32(&mut body, big, iface);
    put32(&mut body, big, (ts >> 32) as u32);
    put32(&mut body, big, ts as u32);
    put32(&mut body, big, r.data.len() as u32);
    put32(&mut body, big, r.orig_len);
    body.extend_from_slice(&r.data);
    ng_block(out, big, 6, &body);
}

/// Timestamp, source, destination and payload of a datagram.
type Found = (u64, SocketAddrV4, SocketAddrV4, Vec<u8>);

fn all_datagrams(file: &[u8]) -> (Vec<Found>, PcapStats) {
    let mut src = PcapSource::new(file, Filter::ANY).unwrap();
    let mut out = Vec::new();
    while let Some(d) = src.next_datagram().unwrap() {
        out.push((d.ts_ns, d.src, d.dst, d.payload.to_vec()));
    }
    (out, *src.stats())
}

fn one_payload(link: u32, frame: Vec<u8>) -> Result<Vec<u8>, DropCause> {
    parse_frame(link, &frame, true).map(|u| {
        assert_eq!(u.src, SRC);
        u.payload.to_vec()
    })
}

mod files;
mod filters;
mod frames;
mod props;
mod pump;
