"""spead2 side of the interoperability tests (driven by tests/src/spead2.rs).

Subcommands (JSON on stdin, JSON lines on stdout):
  packetize            heaps spec list -> hex of spead2's BytesStream output per heap
  recv-bytes           raw packets on stdin -> received heaps
  recv-udp MAXHEAPS    bind 127.0.0.1:0, print {"port": P}, receive until stop
  send-udp PORT RATE   heaps spec list -> sent to 127.0.0.1:PORT at RATE bytes/s
  recv-tcp MAXHEAPS    listen on 127.0.0.1:0, print {"port": P}, receive until stop
  send-tcp PORT        heaps spec list -> sent over TCP to 127.0.0.1:PORT
  recv-pcap PATH FILTER MAXHEAPS
                       UDP payloads of a capture file (FILTER: a BPF expression, may
                       be empty) -> received heaps
  bench-mem REPEATS    raw packets on stdin -> assembly rate
  bench-udp-recv       bind, print port, count heaps/packets until stop, print rate
  bench-mem-serve MAXHEAPS HEAPSIZE
                       a line with a byte count, then that many bytes of raw packets;
                       then per line "0" (default allocator) or "1" (MemoryPool of
                       HEAPSIZE buffers): one pass over the bytes, its rate as JSON
  bench-udp-pair-serve per line "RATE HEAPS HEAPSIZE PACKETSIZE": spead2's sender
                       (RATE bytes/s, 0 = unlimited) to spead2's receiver over
                       loopback, HEAPS heaps of one HEAPSIZE-byte item; the complete
                       heaps and the receive time as JSON
"""

import json
import socket
import sys
import threading
import time

import numpy as np
import spead2
import spead2.recv
import spead2.send


class RawItem:
    """Duck-typed item: spead2.send.Heap.add_item only needs these members."""

    def __init__(self, id, data, allow_immediate):
        self.id = id
        self._data = np.frombuffer(data, dtype=np.uint8)
        self._imm = allow_immediate

    def to_buffer(self):
        return self._data

    def allow_immediate(self):
        return self._imm


def make_descriptor(d, flavour):
    shape = tuple(d["shape"])
    if d.get("dtype"):
        return spead2.Descriptor(d["id"], d["name"], d["description"], shape, dtype=d["dtype"])
    fmt = [(c, b) for c, b in d["format"]]
    return spead2.Descriptor(d["id"], d["name"], d["description"], shape, format=fmt)


def make_heap(spec):
    flavour = spead2.Flavour(4, 64, spec["flavour"], 0)
    heap = spead2.send.Heap(flavour)
    heap.repeat_pointers = spec.get("repeat_pointers", False)
    for op in spec["ops"]:
        kind = op["kind"]
        if kind == "item":
            heap.add_item(RawItem(op["id"], bytes.fromhex(op["hex"]), op["allow_immediate"]))
        elif kind == "descriptor":
            heap.add_descriptor(make_descriptor(op, flavour))
        elif kind == "start":
            heap.add_start()
        elif kind == "end":
            heap.add_end()
        else:
            raise ValueError(kind)
    return heap


def packetize(specs):
    pool = spead2.ThreadPool()
    for spec in specs:
        cfg = spead2.send.StreamConfig(max_packet_size=spec["packet_size"])
        stream = spead2.send.BytesStream(pool, cfg)
        stream.send_heap(make_heap(spec), spec["cnt"])
        print(json.dumps({"cnt": spec["cnt"], "hex": stream.getvalue().hex()}))


def heap_json(heap):
    out = {"cnt": heap.cnt, "complete": isinstance(heap, spead2.recv.Heap), "items": []}
    if not out["complete"]:
        return out
    for item in heap.get_items():
        entry = {"id": item.id, "hex": bytes(memoryview(item)).hex()}
        if item.is_immediate:
            entry["immediate"] = item.immediate_value
        out["items"].append(entry)
    out["descriptors"] = [
        {"id": d.id, "name": d.name.decode() if isinstance(d.name, bytes) else d.name}
        for d in heap.get_descriptors()
    ]
    return out


def print_stats(stream):
    stream.stop()  # merges the last batch's counters
    st = stream.stats
    keys = ["heaps", "incomplete_heaps_evicted", "incomplete_heaps_flushed", "packets",
            "batches", "max_batch", "single_packet_heaps", "search_dist", "worker_blocked"]
    print(json.dumps({"stats": {k: getattr(st, k) for k in keys}}))


def recv_bytes(data, max_heaps, ooo):
    cfg = spead2.recv.StreamConfig(max_heaps=max_heaps, allow_out_of_order=ooo)
    ring = spead2.recv.RingStreamConfig(heaps=64)
    stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
    stream.add_buffer_reader(data)
    for heap in stream:
        print(json.dumps(heap_json(heap)))
    print_stats(stream)


def recv_udp(max_heaps):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    sock.bind(("127.0.0.1", 0))
    cfg = spead2.recv.StreamConfig(max_heaps=max_heaps)
    ring = spead2.recv.RingStreamConfig(heaps=256)
    stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
    stream.add_udp_reader(sock)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    for heap in stream:
        print(json.dumps(heap_json(heap)), flush=True)
    print_stats(stream)


def recv_tcp(max_heaps):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    cfg = spead2.recv.StreamConfig(max_heaps=max_heaps)
    ring = spead2.recv.RingStreamConfig(heaps=256)
    stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
    stream.add_tcp_reader(sock)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    for heap in stream:
        print(json.dumps(heap_json(heap)), flush=True)
    print_stats(stream)


def recv_pcap(path, bpf_filter, max_heaps):
    cfg = spead2.recv.StreamConfig(max_heaps=max_heaps)
    ring = spead2.recv.RingStreamConfig(heaps=256)
    stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
    stream.add_udp_pcap_file_reader(path, bpf_filter)
    for heap in stream:
        print(json.dumps(heap_json(heap)), flush=True)
    print_stats(stream)


def send_tcp(specs, port):
    cfg = spead2.send.StreamConfig(max_packet_size=specs[0]["packet_size"])
    stream = spead2.send.TcpStream(spead2.ThreadPool(), [("127.0.0.1", port)], cfg)
    for spec in specs:
        stream.send_heap(make_heap(spec), spec["cnt"])


def send_udp(specs, port, rate):
    cfg = spead2.send.StreamConfig(max_packet_size=specs[0]["packet_size"], rate=rate)
    stream = spead2.send.UdpStream(spead2.ThreadPool(), [("127.0.0.1", port)], cfg,
                                   buffer_size=1 << 20)
    for spec in specs:
        stream.send_heap(make_heap(spec), spec["cnt"])


def bench_mem(data, repeats, max_heaps, pool):
    best = None
    for _ in range(repeats):
        cfg = spead2.recv.StreamConfig(max_heaps=max_heaps)
        if pool:
            cfg.memory_allocator = spead2.MemoryPool(1 << 19, 1 << 21, 16, 16)
        ring = spead2.recv.RingStreamConfig(heaps=16)
        stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
        start = time.perf_counter()
        stream.add_buffer_reader(data)
        heaps = 0
        for heap in stream:
            heaps += 1
        elapsed = time.perf_counter() - start
        stream.stop()  # merges the last batch's counters
        packets = stream.stats.packets
        if best is None or elapsed < best[0]:
            best = (elapsed, heaps, packets)
    elapsed, heaps, packets = best
    print(json.dumps({"seconds": elapsed, "heaps": heaps, "packets": packets}))


def bench_udp_recv(max_heaps):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    sock.bind(("127.0.0.1", 0))
    cfg = spead2.recv.StreamConfig(max_heaps=max_heaps)
    ring = spead2.recv.RingStreamConfig(heaps=64)
    stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
    stream.add_udp_reader(sock, max_size=9200)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    start = None
    end = None
    heaps = 0
    last_seen = [time.monotonic()]

    def watchdog():
        # Stop if the stop heap was lost: no heap for 3 s.
        while True:
            time.sleep(0.5)
            if time.monotonic() - last_seen[0] > 3:
                stream.stop()
                return

    threading.Thread(target=watchdog, daemon=True).start()
    for heap in stream:
        now = time.perf_counter()
        last_seen[0] = time.monotonic()
        if start is None:
            start = now
        end = now
        if isinstance(heap, spead2.recv.Heap):
            heaps += 1
    elapsed = (end - start) if start is not None else float("nan")
    stream.stop()
    st = stream.stats
    print(json.dumps({"seconds": elapsed, "heaps": heaps, "packets": st.packets}), flush=True)


def bench_mem_pass(data, max_heaps, heap_size, pool):
    cfg = spead2.recv.StreamConfig(max_heaps=max_heaps)
    if pool:
        cfg.memory_allocator = spead2.MemoryPool(heap_size, heap_size, 32, 32)
    ring = spead2.recv.RingStreamConfig(heaps=16)
    stream = spead2.recv.Stream(spead2.ThreadPool(), cfg, ring)
    start = time.perf_counter()
    cpu = time.process_time()  # every thread: spead2's reader and this consumer
    stream.add_buffer_reader(data)
    heaps = 0
    for heap in stream:
        heaps += 1
    cpu = time.process_time() - cpu
    elapsed = time.perf_counter() - start
    stream.stop()  # merges the last batch's counters
    return {"seconds": elapsed, "cpu": cpu, "heaps": heaps, "packets": stream.stats.packets}


def bench_mem_serve(max_heaps, heap_size):
    inp = sys.stdin.buffer
    n = int(inp.readline())
    data = inp.read(n)
    assert len(data) == n, "short input"
    print(json.dumps({"ready": n}), flush=True)
    for line in inp:
        line = line.strip()
        if not line:
            break
        out = bench_mem_pass(data, max_heaps, heap_size, line == b"1")
        print(json.dumps(out), flush=True)


def udp_pair_trial(rate, heaps, heap_size, packet_size):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # As our receiver: SO_RCVBUFFORCE when permitted, past rmem_max.
    try:
        sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 32 << 20)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    rx = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=4),
                            spead2.recv.RingStreamConfig(heaps=64))
    rx.add_udp_reader(sock, max_size=packet_size + 64)
    got = {"heaps": 0, "first": None, "last": None}

    def consume():
        for heap in rx:
            now = time.perf_counter()
            if got["first"] is None:
                got["first"] = now
            got["last"] = now
            if isinstance(heap, spead2.recv.Heap):
                got["heaps"] += 1

    t = threading.Thread(target=consume)
    t.start()
    flavour = spead2.Flavour(4, 64, 48, 0)
    cfg = spead2.send.StreamConfig(max_packet_size=packet_size, rate=rate)
    tx = spead2.send.UdpStream(spead2.ThreadPool(), [("127.0.0.1", port)], cfg,
                               buffer_size=4 << 20)
    heap = spead2.send.Heap(flavour)
    payload = (np.arange(heap_size, dtype=np.uint64) * 7).astype(np.uint8)
    heap.add_item(RawItem(0x1000, payload.tobytes(), False))
    cpu = time.process_time()  # every thread: sender, receiver, consumer
    start = time.perf_counter()
    for cnt in range(1, heaps + 1):
        tx.send_heap(heap, cnt)
    sent = time.perf_counter() - start
    stop = spead2.send.Heap(flavour)
    stop.add_end()
    for _ in range(5):
        time.sleep(0.05)
        tx.send_heap(stop, heaps + 1)
    t.join(timeout=3)
    rx.stop()
    t.join()
    cpu = time.process_time() - cpu
    first, last = got["first"], got["last"]
    return {"seconds": (last - first) if first is not None else float("nan"), "cpu": cpu,
            "heaps": got["heaps"], "packets": rx.stats.packets, "send_seconds": sent}


def bench_udp_pair_serve():
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            break
        rate, heaps, heap_size, packet_size = float(parts[0]), *map(int, parts[1:4])
        print(json.dumps(udp_pair_trial(rate, heaps, heap_size, packet_size)), flush=True)


def main():
    cmd = sys.argv[1]
    if cmd == "packetize":
        packetize(json.load(sys.stdin))
    elif cmd == "recv-bytes":
        recv_bytes(sys.stdin.buffer.read(), int(sys.argv[2]), sys.argv[3] == "1")
    elif cmd == "recv-udp":
        recv_udp(int(sys.argv[2]))
    elif cmd == "recv-tcp":
        recv_tcp(int(sys.argv[2]))
    elif cmd == "recv-pcap":
        recv_pcap(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "send-tcp":
        send_tcp(json.load(sys.stdin), int(sys.argv[2]))
    elif cmd == "send-udp":
        send_udp(json.load(sys.stdin), int(sys.argv[2]), float(sys.argv[3]))
    elif cmd == "bench-mem":
        bench_mem(sys.stdin.buffer.read(), int(sys.argv[2]), int(sys.argv[3]),
                  len(sys.argv) > 4 and sys.argv[4] == "1")
    elif cmd == "bench-mem-serve":
        bench_mem_serve(int(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "bench-udp-pair-serve":
        bench_udp_pair_serve()
    elif cmd == "bench-udp-recv":
        bench_udp_recv(int(sys.argv[2]))
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main()
