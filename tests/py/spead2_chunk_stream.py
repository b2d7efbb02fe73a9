"""spead2's chunk stream on raw packets, for tests/tests/spead_chunk_semantics.rs.

Usage: spead2_chunk_stream.py MAXCHUNKS < packets
       spead2_chunk_stream.py MAXCHUNKS group < JSON list of hex packet buffers
A ChunkRingStream (StreamConfig(max_heaps=128)) with spead2's test place function
("place_plain" of spead2's tests/test_recv_chunk_stream.py: items 0x1000 and HEAP_LENGTH;
heaps of 1024 bytes, 10 to a chunk), given as a ctypes function in a PyCapsule, reads
the packets (back to back on stdin). Prints one JSON line per chunk ({"chunk_id",
"present", "data" (hex)}), then {"stats": {...}}. With "group", a lossless
ChunkStreamRingGroup of max_chunks MAXCHUNKS with one such stream per buffer prints
the chunks holding any heap (as spead2's group tests skip padding chunks).
"""

import ctypes
import json
import sys

import numpy as np
import spead2
import spead2.recv

HEAP_PAYLOAD_SIZE = 1024
HEAPS_PER_CHUNK = 10


class PlaceData(ctypes.Structure):
    """spead2's chunk_place_data."""

    _fields_ = [
        ("packet", ctypes.c_void_p),
        ("packet_size", ctypes.c_size_t),
        ("items", ctypes.POINTER(ctypes.c_int64)),
        ("chunk_id", ctypes.c_int64),
        ("heap_index", ctypes.c_size_t),
        ("heap_offset", ctypes.c_size_t),
        ("batch_stats", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
        ("extra_offset", ctypes.c_size_t),
        ("extra_size", ctypes.c_size_t),
    ]


@ctypes.CFUNCTYPE(None, ctypes.POINTER(PlaceData), ctypes.c_size_t)
def place_plain(data, _size):
    d = data.contents
    position, length = d.items[0], d.items[1]
    if length == HEAP_PAYLOAD_SIZE and position >= 0:
        d.chunk_id = position // HEAPS_PER_CHUNK
        d.heap_index = position % HEAPS_PER_CHUNK
        d.heap_offset = d.heap_index * HEAP_PAYLOAD_SIZE


SIGNATURE = ctypes.c_char_p(b"void (void *, size_t)")


def capsule(func):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.cast(func, ctypes.c_void_p), SIGNATURE, None)


def rings():
    free = spead2.recv.ChunkRingbuffer(64)
    ring = spead2.recv.ChunkRingbuffer(64)
    for _ in range(64):
        free.put(
            spead2.recv.Chunk(
                present=np.zeros(HEAPS_PER_CHUNK, np.uint8),
                data=np.zeros(HEAPS_PER_CHUNK * HEAP_PAYLOAD_SIZE, np.uint8),
            )
        )
    return ring, free


def chunk_config(max_chunks):
    return spead2.recv.ChunkStreamConfig(
        items=[0x1000, spead2.HEAP_LENGTH_ID],
        max_chunks=max_chunks,
        place=(capsule(place_plain),),
    )


def print_chunk(c):
    print(json.dumps({
        "chunk_id": c.chunk_id,
        "present": c.present.tolist(),
        "data": bytes(c.data).hex(),
    }))


def group(max_chunks):
    buffers = [bytes.fromhex(h) for h in json.load(sys.stdin)]
    ring, free = rings()
    config = spead2.recv.ChunkStreamGroupConfig(
        max_chunks=max_chunks,
        eviction_mode=spead2.recv.ChunkStreamGroupConfig.EvictionMode.LOSSLESS,
    )
    g = spead2.recv.ChunkStreamRingGroup(config, ring, free)
    for _ in buffers:
        g.emplace_back(
            spead2.ThreadPool(),
            config=spead2.recv.StreamConfig(max_heaps=128),
            chunk_stream_config=chunk_config(max_chunks),
        )
    for stream, data in zip(g, buffers):
        stream.add_buffer_reader(data)
    for c in ring:
        if any(c.present):
            print_chunk(c)
        g.add_free_chunk(c)
    g.stop()


def main():
    max_chunks = int(sys.argv[1])
    if sys.argv[2:] == ["group"]:
        group(max_chunks)
        return
    data = sys.stdin.buffer.read()
    ring, free = rings()
    stream = spead2.recv.ChunkRingStream(
        spead2.ThreadPool(),
        spead2.recv.StreamConfig(max_heaps=128),
        chunk_config(max_chunks),
        ring,
        free,
    )
    stream.add_buffer_reader(data)
    for c in ring:
        print_chunk(c)
    stream.stop()
    st = stream.stats
    keys = ["heaps", "incomplete_heaps_evicted", "incomplete_heaps_flushed", "packets",
            "too_old_heaps", "rejected_heaps"]
    print(json.dumps({"stats": {k: st[k] for k in keys}}))


if __name__ == "__main__":
    main()
