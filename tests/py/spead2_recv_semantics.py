"""spead2's heap assembly on raw packets, for tests/tests/spead_recv_semantics.rs.

Usage: spead2_recv_semantics.py MAXHEAPS OOO < packets
Packets back to back on stdin go through a spead2.recv.Stream with
contiguous_only=False (and payload ranges kept), so incomplete heaps come out too.
Prints one JSON line per heap ({"cnt", "contiguous", "items": [[id, hex]], and for incomplete heaps "heap_length",
"received_length", "payload_ranges"}), then {"stats": {...}}.
"""

import json
import sys

import spead2
import spead2.recv


def main():
    max_heaps, ooo = int(sys.argv[1]), sys.argv[2] == "1"
    data = sys.stdin.buffer.read()
    cfg = spead2.recv.StreamConfig(max_heaps=max_heaps, allow_out_of_order=ooo)
    ring = spead2.recv.RingStreamConfig(
        heaps=64, contiguous_only=False, incomplete_keep_payload_ranges=True
    )
    stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
    stream.add_buffer_reader(data)
    for heap in stream:
        out = {
            "cnt": heap.cnt,
            "contiguous": isinstance(heap, spead2.recv.Heap),
            "items": [[i.id, bytes(memoryview(i)).hex()] for i in heap.get_items()],
        }
        if not out["contiguous"]:
            out["heap_length"] = heap.heap_length
            out["received_length"] = heap.received_length
            out["payload_ranges"] = [list(r) for r in heap.payload_ranges]
        print(json.dumps(out))
    stream.stop()
    st = stream.stats
    keys = ["heaps", "incomplete_heaps_evicted", "incomplete_heaps_flushed", "packets",
            "single_packet_heaps"]
    print(json.dumps({"stats": {k: getattr(st, k) for k in keys}}))


if __name__ == "__main__":
    main()
