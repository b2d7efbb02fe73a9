"""spead2 as an ordinary user writes it, run by `verbs-emu run` on two hosts: an ibverbs
reader (add_udp_ibv_reader) on one host's interface address and an ibverbs sender
(UdpIbvStream) on another's, over a multicast group (driven by launcher/tests/run.rs).
The kernel's UDP sockets in their place (add_udp_reader, UdpStream) meet them across the
wire in the interop step of `cargo xtask test --wire` (xtask/src/cmd/interop/spead.rs),
run in the Soft-RoCE VM.

Usage: spead2_two_hosts.py recv GROUP PORT IFACE HEAPS [PACKET]
       spead2_two_hosts.py send GROUP PORT IFACE HEAPS [PACKET]
       spead2_two_hosts.py recv-udp GROUP PORT IFACE HEAPS [PACKET]
       spead2_two_hosts.py send-udp GROUP PORT IFACE HEAPS [PACKET]
PACKET is the sender's largest packet (8972 bytes unless given) and the reader's largest
accepted (9200 unless given).
Heap i (cnt i + 1) carries item 0x1000 (i as a 64-bit big-endian integer) and item 0x1001
(100 + 1000 * (i % 5) bytes, byte k = (3 * i + k) % 251). The reader prints
{"ready": true} once its reader is in place, then each complete heap as a JSON line;
the sender prints each heap it sends the same way, then sends the end of the stream.
"""

import json
import sys

import numpy as np
import spead2
import spead2.recv
import spead2.send


def payload(i):
    n = 100 + 1000 * (i % 5)
    return ((3 * i + np.arange(n)) % 251).astype(np.uint8)


def heap_json(cnt, items):
    return json.dumps({"cnt": cnt, "items": [{"id": i, "hex": v.hex()} for i, v in items]})


def recv(group, port, iface, heaps, packet=None, kernel=False):
    rx = spead2.recv.Stream(
        spead2.ThreadPool(),
        spead2.recv.StreamConfig(max_heaps=4),
        spead2.recv.RingStreamConfig(heaps=heaps + 1),
    )
    max_size = packet or 9200
    if kernel:
        rx.add_udp_reader(group, port, max_size=max_size, interface_address=iface)
    else:
        rx.add_udp_ibv_reader(
            spead2.recv.UdpIbvConfig(
                endpoints=[(group, port)], interface_address=iface, max_size=max_size
            )
        )
    print(json.dumps({"ready": True}), flush=True)
    for heap in rx:
        items = [(item.id, bytes(memoryview(item))) for item in heap.get_items()]
        print(heap_json(heap.cnt, items), flush=True)


class RawItem:
    """What spead2.send.Heap.add_item needs of an item: its id and its bytes."""

    def __init__(self, id, data):
        self.id = id
        self._data = np.frombuffer(data, dtype=np.uint8)

    def to_buffer(self):
        return self._data

    def allow_immediate(self):
        return False


def send(group, port, iface, heaps, packet=None, kernel=False):
    config = spead2.send.StreamConfig(max_packet_size=packet or 8972, rate=100e6)
    if kernel:
        tx = spead2.send.UdpStream(
            spead2.ThreadPool(), [(group, port)], config, ttl=1, interface_address=iface
        )
    else:
        tx = spead2.send.UdpIbvStream(
            spead2.ThreadPool(),
            config,
            spead2.send.UdpIbvConfig(endpoints=[(group, port)], interface_address=iface),
        )
    flavour = spead2.Flavour(4, 64, 48, 0)
    for i in range(heaps):
        items = [(0x1000, i.to_bytes(8, "big")), (0x1001, payload(i).tobytes())]
        heap = spead2.send.Heap(flavour)
        for id, value in items:
            heap.add_item(RawItem(id, value))
        tx.send_heap(heap, cnt=i + 1)
        print(heap_json(i + 1, items), flush=True)
    end = spead2.send.Heap(flavour)
    end.add_end()
    tx.send_heap(end, cnt=heaps + 1)


def main():
    mode, group, port, iface, heaps = sys.argv[1:6]
    packet = int(sys.argv[6]) if len(sys.argv) > 6 else None
    run, kernel = {
        "recv": (recv, False),
        "send": (send, False),
        "recv-udp": (recv, True),
        "send-udp": (send, True),
    }[mode]
    run(group, int(port), iface, int(heaps), packet, kernel)


if __name__ == "__main__":
    main()
