#!/usr/bin/env python3
"""Recomputes the RoCE v2 ICRC of every frame of a pcap (Ethernet link type) and compares
it with the frame's last 4 bytes; prints one line per frame. Standard library only.

ICRC (IBA annex A17, RoCE v2): CRC-32 (the Ethernet/zlib one) over 8 bytes of 0xff (the
LRH place), then the IP header, UDP header, BTH and the rest of the packet up to the ICRC,
with the variant fields set to all ones: IPv4 TOS, TTL and header checksum; IPv6 traffic
class, flow label and hop limit; UDP checksum; the BTH's reserved byte after the P_Key
(resv8a). On the wire its 4 bytes are the CRC value least significant byte first (as the
Ethernet FCS; rxe stores ~crc as a little-endian u32).

usage: check_icrc.py FILE.pcap
"""
import struct
import sys
import zlib


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        sys.exit(f"{path}: not a little-endian pcap file (magic {magic:#x})")
    linktype = struct.unpack("<I", data[20:24])[0]
    if linktype != 1:
        sys.exit(f"{path}: link type {linktype}, want 1 (Ethernet)")
    off = 24
    while off < len(data):
        _, _, incl, orig = struct.unpack("<IIII", data[off : off + 16])
        if incl != orig:
            sys.exit(f"{path}: frame at {off} truncated ({incl} of {orig} bytes)")
        yield data[off + 16 : off + 16 + incl]
        off += 16 + incl


def icrc(frame):
    ethertype = struct.unpack(">H", frame[12:14])[0]
    ip = bytearray(frame[14:-4])
    if ethertype == 0x0800:
        ihl = (ip[0] & 0x0F) * 4
        ip[1] = 0xFF  # TOS
        ip[8] = 0xFF  # TTL
        ip[10:12] = b"\xff\xff"  # header checksum
    elif ethertype == 0x86DD:
        ihl = 40
        ip[0] |= 0x0F  # traffic class, high nibble
        ip[1:4] = b"\xff\xff\xff"  # traffic class low nibble, flow label
        ip[7] = 0xFF  # hop limit
    else:
        sys.exit(f"ethertype {ethertype:#06x} is neither IPv4 nor IPv6")
    ip[ihl + 6 : ihl + 8] = b"\xff\xff"  # UDP checksum
    ip[ihl + 8 + 4] = 0xFF  # BTH resv8a
    return zlib.crc32(b"\xff" * 8 + bytes(ip))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    bad = 0
    for n, frame in enumerate(frames(sys.argv[1]), 1):
        wire = frame[-4:]
        want = struct.pack("<I", icrc(frame))
        ok = wire == want
        bad += not ok
        print(f"{n:3} wire {wire.hex()} computed {want.hex()} {'ok' if ok else 'MISMATCH'}")
    sys.exit(1 if bad else 0)


main()
