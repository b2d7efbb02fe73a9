"""spead2 over the emulated NIC as two programs on two hosts: an ibverbs sender on one,
an ibverbs reader on the other, over a multicast group (driven by
emulator/tests/spead2.rs; each runs in a network namespace whose interface holds its
host's address).

Usage: spead2_hosts.py recv GROUP PORT IFACE HEAPS
       spead2_hosts.py send GROUP PORT IFACE HEAPS
Heap i (cnt i + 1) carries item 0x1000 (i as a 64-bit big-endian integer) and item 0x1001
(a byte array of 100 + 3000 * (i % 4) bytes, byte k = (7 * i + k) % 251); the sender
sends HEAPS heaps at 100 Mb/s, then the end of the stream. The reader prints
{"ready": true} once its flows are in place, then each complete heap as a JSON line (its
cnt and each item's id and hex value), then {"stats": {...}} with the stream's counters,
then {"log": [...]}: spead2's INFO records (which reader it made). Its warnings still go
to stderr as Python prints them without a handler.
"""

import json
import logging
import sys

import numpy as np
import spead2
import spead2.recv
import spead2.send


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


def reader(group, port, iface, heaps):
    """An ibverbs reader of GROUP:PORT on IFACE with a ring for every heap."""
    pool = spead2.ThreadPool()
    # A ring with room for every heap: the reader never waits for the printing loop.
    rx = spead2.recv.Stream(
        pool,
        spead2.recv.StreamConfig(max_heaps=4),
        spead2.recv.RingStreamConfig(heaps=heaps + 1),
    )
    rx.add_udp_ibv_reader(
        spead2.recv.UdpIbvConfig(
            endpoints=[(group, port)],
            interface_address=iface,
            buffer_size=4 * 1024 * 1024,
            max_size=9200,
        )
    )
    return rx


def print_heaps(rx, names):
    """Prints each complete heap as a JSON line, then the stream's counters NAMES."""
    for heap in rx:
        items = [
            {"id": item.id, "hex": bytes(memoryview(item)).hex()}
            for item in heap.get_items()
        ]
        print(json.dumps({"cnt": heap.cnt, "items": items}), flush=True)
    # spead2 signals the end of the stream before it adds the last batch's counters to
    # the stream's (add_packet_state's destructor calls stop_received() first), both
    # under the stream's queue mutex; stop() takes that mutex, so it waits for them.
    rx.stop()
    s = rx.stats
    print(json.dumps({"stats": {n: s[n] for n in names}}), flush=True)


def sender(group, port, iface):
    """An ibverbs sender to GROUP:PORT from IFACE at 100 Mb/s."""
    pool = spead2.ThreadPool()
    return spead2.send.UdpIbvStream(
        pool,
        spead2.send.StreamConfig(max_packet_size=8972, rate=100e6),
        spead2.send.UdpIbvConfig(
            endpoints=[(group, port)],
            interface_address=iface,
            buffer_size=4 * 1024 * 1024,
        ),
    )


def send_heaps(tx, heaps):
    """Sends heaps 0 .. HEAPS - 1 (cnt i + 1), then the end of the stream."""
    flavour = spead2.Flavour(4, 64, 48, 0)
    for i in range(heaps):
        heap = spead2.send.Heap(flavour)
        heap.add_item(RawItem(0x1000, i.to_bytes(8, "big")))
        heap.add_item(RawItem(0x1001, payload(i).tobytes()))
        tx.send_heap(heap, cnt=i + 1)
    end = spead2.send.Heap(flavour)
    end.add_end()
    tx.send_heap(end, cnt=heaps + 1)


class InfoRecords(logging.Handler):
    """Keeps the INFO records as "LEVEL message" lines."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        if record.levelno == logging.INFO:
            self.lines.append(f"{record.levelname} {record.getMessage()}")


def recv(group, port, iface, heaps):
    log = logging.getLogger("spead2")
    log.setLevel(logging.INFO)
    info = InfoRecords()
    log.addHandler(info)
    # Warnings and above on stderr, as Python's last-resort handler prints them.
    warnings = logging.StreamHandler(sys.stderr)
    warnings.setLevel(logging.WARNING)
    log.addHandler(warnings)
    rx = reader(group, port, iface, heaps)
    print(json.dumps({"ready": True}), flush=True)
    print_heaps(
        rx, ["heaps", "incomplete_heaps_evicted", "incomplete_heaps_flushed", "packets"]
    )
    print(json.dumps({"log": info.lines}), flush=True)


def send(group, port, iface, heaps):
    send_heaps(sender(group, port, iface), heaps)
    print(json.dumps({"sent": heaps}), flush=True)


def main():
    mode, group, port, iface, heaps = sys.argv[1:6]
    {"recv": recv, "send": send}[mode](group, int(port), iface, int(heaps))


if __name__ == "__main__":
    main()
