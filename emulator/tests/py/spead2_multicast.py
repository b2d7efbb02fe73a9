"""spead2 over the emulated NIC, in one process: an ibverbs reader on a multicast group and
an ibverbs sender to it, both on the interface address of host h1 (driven by
emulator/tests/spead2.rs).

Usage: spead2_multicast.py GROUP PORT HEAPS
Heap i carries item 0x1000 (i as a 64-bit big-endian integer) and item 0x1001 (a byte
array of 100 + 3000 * (i % 4) bytes, byte k = (7 * i + k) % 251). Prints, as JSON lines,
every received heap: its cnt and each item's id and hex value, then
{"stats": {...}} with the stream's heap counters.
"""

import json
import sys
import threading

import numpy as np
import spead2
import spead2.recv
import spead2.send

IFACE = "10.100.0.1"


class RawItem:
    """What spead2.send.Heap.add_item needs of an item: its id and its bytes."""

    def __init__(self, id, data):
        self.id = id
        self._data = np.frombuffer(data, dtype=np.uint8)

    def to_buffer(self):
        return self._data

    def allow_immediate(self):
        return False


def payload(i):
    n = 100 + 3000 * (i % 4)
    return ((7 * i + np.arange(n)) % 251).astype(np.uint8)


def main():
    group, port, heaps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pool = spead2.ThreadPool()
    # A ring with room for every heap: the reader never waits for this loop.
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
            max_size=9200,
        )
    )
    tx = spead2.send.UdpIbvStream(
        pool,
        spead2.send.StreamConfig(max_packet_size=8972, rate=100e6),
        spead2.send.UdpIbvConfig(
            endpoints=[(group, port)],
            interface_address=IFACE,
            buffer_size=4 * 1024 * 1024,
        ),
    )
    flavour = spead2.Flavour(4, 64, 48, 0)

    def send():
        for i in range(heaps):
            heap = spead2.send.Heap(flavour)
            heap.add_item(RawItem(0x1000, i.to_bytes(8, "big")))
            heap.add_item(RawItem(0x1001, payload(i).tobytes()))
            tx.send_heap(heap, cnt=i + 1)
        end = spead2.send.Heap(flavour)
        end.add_end()
        tx.send_heap(end, cnt=heaps + 1)

    # The sender runs beside the receiving loop, as two programs would.
    sender = threading.Thread(target=send)
    sender.start()
    for heap in rx:
        items = [
            {"id": item.id, "hex": bytes(memoryview(item)).hex()}
            for item in heap.get_items()
        ]
        print(json.dumps({"cnt": heap.cnt, "items": items}), flush=True)
    sender.join()
    s = rx.stats
    print(
        json.dumps(
            {
                "stats": {
                    "heaps": s["heaps"],
                    "incomplete_heaps_evicted": s["incomplete_heaps_evicted"],
                }
            }
        )
    )


if __name__ == "__main__":
    main()
