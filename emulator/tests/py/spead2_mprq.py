"""spead2's ibverbs reader on the emulated NIC, in one process with an ibverbs sender,
with spead2's log captured (driven by emulator/tests/spead2.rs): on an mlx5 device with
direct verbs spead2 receives through a multi-packet (striding) receive queue and says
so at INFO level; without direct verbs it uses its ordinary reader.

Usage: spead2_mprq.py GROUP PORT HEAPS PACKET_SIZE HEAP_BYTES
Heap i (cnt i + 1) carries item 0x1000 (i as a 64-bit big-endian integer) and item
0x1001 (HEAP_BYTES + 7 * i bytes, byte k = (3 * i + k) % 251); the sender sends them in
packets of at most PACKET_SIZE bytes (the UDP payload). Prints one JSON line per
complete heap (its cnt and each item's id and hex value), then {"stats": {...}} and
{"log": [...]}: spead2's log records of INFO and above, as "LEVEL message".
"""

import json
import logging
import sys
import threading

import numpy as np
import spead2
import spead2.recv
import spead2.send

from spead2_hosts import RawItem

IFACE = "10.100.0.1"


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def payload(i, size):
    return ((3 * i + np.arange(size + 7 * i)) % 251).astype(np.uint8)


def main():
    group, port, heaps, packet, size = sys.argv[1], *map(int, sys.argv[2:6])
    records = Records()
    log = logging.getLogger("spead2")
    log.addHandler(records)
    log.setLevel(logging.INFO)
    log.propagate = False
    pool = spead2.ThreadPool()
    rx = spead2.recv.Stream(
        pool,
        spead2.recv.StreamConfig(max_heaps=4),
        spead2.recv.RingStreamConfig(heaps=heaps + 1),
    )
    rx.add_udp_ibv_reader(
        spead2.recv.UdpIbvConfig(
            endpoints=[(group, port)],
            interface_address=IFACE,
            buffer_size=4 * 1024 * 1024,
            max_size=packet + 100,
        )
    )
    tx = spead2.send.UdpIbvStream(
        pool,
        spead2.send.StreamConfig(max_packet_size=packet, rate=100e6),
        spead2.send.UdpIbvConfig(
            endpoints=[(group, port)],
            interface_address=IFACE,
            buffer_size=4 * 1024 * 1024,
        ),
    )

    def send():
        flavour = spead2.Flavour(4, 64, 48, 0)
        for i in range(heaps):
            heap = spead2.send.Heap(flavour)
            heap.add_item(RawItem(0x1000, i.to_bytes(8, "big")))
            heap.add_item(RawItem(0x1001, payload(i, size).tobytes()))
            tx.send_heap(heap, cnt=i + 1)
        end = spead2.send.Heap(flavour)
        end.add_end()
        tx.send_heap(end, cnt=heaps + 1)

    thread = threading.Thread(target=send)
    thread.start()
    for heap in rx:
        items = [
            {"id": item.id, "hex": bytes(memoryview(item)).hex()}
            for item in heap.get_items()
        ]
        print(json.dumps({"cnt": heap.cnt, "items": items}), flush=True)
    thread.join()
    rx.stop()
    s = rx.stats
    print(json.dumps({"stats": {n: s[n] for n in ["heaps", "incomplete_heaps_evicted"]}}))
    print(json.dumps({"log": records.lines}), flush=True)


if __name__ == "__main__":
    main()
