"""The lossless rate of a spead2 sender and a spead2 receiver as two processes, through the
emulated NIC (an ibverbs sender on host h1, an ibverbs reader on host h2, joined to a
fabric process) and, in the same run, over kernel UDP loopback; 8 KiB packets. The
emulated pair runs twice: with h2 an mlx5 device with direct verbs, where spead2's reader
takes its multi-packet (striding) receive queue, and with h2 a device without them
(`direct_verbs = false`, ConnectX-4 Lx style), where it takes its ordinary reader; the
receiver reports which path spead2 logged, and a path other than the one asked for ends
the run.

Run by emulator/bench/spead2-rate.sh (as root: each emulated host gets a network namespace
whose interface holds its address, because spead2 binds and joins kernel sockets on it).

Usage (driver): spead2_rate.py bench --fabric BIN --lib DIR [--runs N] [--mib M]
                                      [--workset-mib W] [--steps S]
The sender sends M MiB of 1 MiB heaps (their payload cycling through a W MiB working set,
out of cache), at most 8 heaps in flight; a trial is lossless when the receiver gets every
heap complete. Each trial pair first goes unpaced; if that loses heaps, a bisection of S
steps on spead2's own rate limit finds the fastest lossless pace. The rate reported is
the payload the sender moved per second of its own wall time in the best lossless trial.
The memcpy line is numpy copying the working set, the bound on one pass over the data.

The same file is the sender and the receiver (modes `send` and `recv`, started by the
driver; `cargo xtask bench emu` starts them too, through `verbs-emu run` for the emulated
hosts, see xtask/src/cmd/bench_spead2.rs).

Usage (receiver): spead2_rate.py recv emu|kernel IFACE [WORKSET_MIB [BUFFER]]
Usage (sender):   spead2_rate.py send emu|kernel IFACE MIB WORKSET_MIB RATE_GBPS
The receiver prints {"ready": true} once its reader is in place, then, when the stream
ends (or "stop" is written to its stdin), one JSON line: "heaps" (complete heaps whose
payload is the sender's: length 1 MiB and, given WORKSET_MIB, the first and last 64-bit
words of heap cnt - 1's slice of the working set), "bad" (complete heaps that are not),
"incomplete" (heaps spead2 dropped incomplete), "packets", "mprq", "bytes" (the intact
heaps' payload) and "last" (the wall clock, time.time(), when the last intact heap came
out of the stream; 0 if none did). BUFFER is the reader's buffer in bytes
(posted receive buffers for ibverbs, the socket's for the kernel), or "default" for
spead2's own (16 MiB for ibverbs; 8 MiB asked for the socket, which the kernel caps at
net.core.rmem_max); 4 MiB unless given. The sender prints "elapsed" (its seconds
sending), "bytes", "heaps" and "start" (the wall clock when it began sending): the
receiver's "bytes" over its "last" less the sender's "start" is the pair's rate from the
first packet sent to the last heap received, on one machine's clock.
"""

import argparse
import asyncio
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import spead2
import spead2.recv
import spead2.send
import spead2.send.asyncio

HEAP = 1 << 20
PACKET = 8192
GROUP = "239.10.1.1"
PORT = 7152
BUFFER = 4 << 20  # the kernel caps a socket's buffer at net.core.rmem_max (4 MiB here)
WINDOW = 8
RECV_HEAPS = 256
EMU_SENDER = ("h1", "10.100.0.1")
EMU_RECEIVER = ("h2", "10.100.0.2")
SCRATCH = [tempfile.gettempdir()]  # the run's scratch folder, set by bench()
MPRQ_LOG = "Using multi-packet receive queue for verbs acceleration"
# The default hosts, h2 (the receiver) without mlx5 direct verbs.
NO_DV_TOPOLOGY = """
[[host]]
name = "h1"
ip = "10.100.0.1"

[[host]]
name = "h2"
ip = "10.100.0.2"
direct_verbs = false
"""


class SpeadLog(logging.Handler):
    """Remembers whether spead2 said it took the multi-packet receive queue."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.mprq = False

    def emit(self, record):
        if MPRQ_LOG in record.getMessage():
            self.mprq = True


GOLDEN = 0x9E3779B97F4A7C15  # the sender's payload: word k of the working set is k * GOLDEN


def intact(heap, workset_mib):
    """Whether the heap holds the sender's payload for its cnt: one item of 1 MiB whose
    first and last 64-bit words are those of slice (cnt - 1) % WORKSET_MIB."""
    items = [i for i in heap.get_items() if i.id == 0x1000]
    if len(items) != 1:
        return False
    data = np.frombuffer(memoryview(items[0]), dtype=np.uint64)
    if data.size != HEAP // 8:
        return False
    if workset_mib is None:
        return True
    first = ((heap.cnt - 1) % workset_mib) * (HEAP // 8)
    mask = (1 << 64) - 1
    return int(data[0]) == (first * GOLDEN) & mask and int(data[-1]) == (
        (first + HEAP // 8 - 1) * GOLDEN
    ) & mask


def recv(transport, iface, workset_mib=None, buffer=BUFFER):
    log = SpeadLog()
    logging.getLogger("spead2").addHandler(log)
    logging.getLogger("spead2").setLevel(logging.INFO)
    pool = spead2.ThreadPool()
    # Room for 256 heaps between the stream and this loop, so that a Python thread
    # descheduled for a while on a busy machine does not make either transport drop.
    memory = spead2.MemoryPool(HEAP, HEAP + 4096, RECV_HEAPS + WINDOW, RECV_HEAPS)
    rx = spead2.recv.Stream(
        pool,
        spead2.recv.StreamConfig(max_heaps=WINDOW, memory_allocator=memory),
        spead2.recv.RingStreamConfig(heaps=RECV_HEAPS),
    )
    sized = {} if buffer is None else {"buffer_size": buffer}
    if transport == "emu":
        rx.add_udp_ibv_reader(
            spead2.recv.UdpIbvConfig(
                endpoints=[(GROUP, PORT)], interface_address=iface, max_size=9200, **sized
            )
        )
    else:
        rx.add_udp_reader(PORT, max_size=9200, bind_hostname=iface, **sized)
    print(json.dumps({"ready": True}), flush=True)

    requested = threading.Event()
    stopped = threading.Event()

    def stop_on_request():
        if sys.stdin.readline().strip() == "stop":
            requested.set()
            rx.stop()
            stopped.set()

    threading.Thread(target=stop_on_request, daemon=True).start()
    heaps = bad = 0
    last = 0.0
    for heap in rx:
        if not intact(heap, workset_mib):
            bad += 1
            continue
        last = time.time()
        heaps += 1
    if requested.is_set():
        stopped.wait()  # leave only once the stop has returned
    else:
        rx.stop()  # waits for the last batch's counters (see spead2_hosts.py)
    stats = rx.stats
    print(
        json.dumps(
            {
                "heaps": heaps,
                "bad": bad,
                "incomplete": stats["incomplete_heaps_evicted"] + stats["incomplete_heaps_flushed"],
                "packets": stats["packets"],
                "mprq": log.mprq,
                "bytes": heaps * HEAP,
                "last": last,
            }
        ),
        flush=True,
    )


async def send_all(tx, heaps):
    pending = []
    for h in heaps:
        if len(pending) >= WINDOW:
            await pending.pop(0)
        pending.append(tx.async_send_heap(h))
    for f in pending:
        await f


def send(transport, iface, mib, workset_mib, rate_gbps):
    pool = spead2.ThreadPool()
    config = spead2.send.StreamConfig(
        max_packet_size=PACKET, rate=rate_gbps * 1e9 / 8, max_heaps=WINDOW + 1
    )
    if transport == "emu":
        tx = spead2.send.asyncio.UdpIbvStream(
            pool,
            config,
            spead2.send.UdpIbvConfig(
                endpoints=[(GROUP, PORT)], interface_address=iface, buffer_size=BUFFER
            ),
        )
    else:
        tx = spead2.send.asyncio.UdpStream(pool, [(iface, PORT)], config, buffer_size=BUFFER)
    words = np.arange(workset_mib * HEAP // 8, dtype=np.uint64)
    data = (words * np.uint64(GOLDEN)).view(np.uint8)
    slices = workset_mib
    flavour = spead2.Flavour(4, 64, 48, 0)
    heaps = []
    for i in range(mib):
        h = spead2.send.Heap(flavour)
        part = data[(i % slices) * HEAP : (i % slices + 1) * HEAP]
        h.add_item(spead2.Item(0x1000, "payload", "", shape=part.shape, dtype=part.dtype, value=part))
        heaps.append(h)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    wall = time.time()
    start = time.perf_counter()
    loop.run_until_complete(send_all(tx, heaps))
    elapsed = time.perf_counter() - start
    end = spead2.send.Heap(flavour)
    end.add_end()
    loop.run_until_complete(tx.async_send_heap(end))
    print(
        json.dumps({"elapsed": elapsed, "bytes": mib * HEAP, "heaps": mib, "start": wall}),
        flush=True,
    )


class Emu:
    """The fabric process of one run, and how to start programs as its hosts."""

    def __init__(self, fabric, lib, scratch, topology=None):
        self.lib = lib
        self.topology = topology
        os.makedirs(scratch)
        extra = ["--topology", topology] if topology else []
        self.proc = subprocess.Popen(
            [fabric, "--dir", os.path.join(scratch, "fabric"), "--stop-on-eof", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.socket = self.proc.stdout.readline().strip()
        if not self.socket.endswith("fabric.sock"):
            raise SystemExit(f"the fabric did not start: {self.proc.stderr.read()}")

    def command(self, host, ip, args):
        env = dict(os.environ, LD_LIBRARY_PATH=self.lib, VERBS_EMU_FABRIC=self.socket,
                   VERBS_EMU_HOST=host)
        if self.topology:
            env["VERBS_EMU_TOPOLOGY"] = self.topology
        netns = (
            f"ip link add v0 type veth peer name v1 && ip addr add {ip}/24 dev v0 && "
            'ip link set v1 up && ip link set v0 up && exec "$@"'
        )
        return ["unshare", "-n", "sh", "-c", netns, "sh", *args], env

    def stop(self):
        self.proc.stdin.close()
        err = self.proc.stderr.read()
        self.proc.wait()
        return err.strip().splitlines()[-1]


def trial(transport, emu, args, rate_gbps):
    """One paced run: (lossless, Gb/s, whether spead2 took the multi-packet queue)."""
    me = [sys.executable, os.path.abspath(__file__)]
    if emu is not None:
        rcmd, renv = emu.command(
            *EMU_RECEIVER, me + ["recv", "emu", EMU_RECEIVER[1], str(args.workset_mib)]
        )
        scmd, senv = emu.command(
            *EMU_SENDER,
            me + ["send", "emu", EMU_SENDER[1], str(args.mib), str(args.workset_mib), str(rate_gbps)],
        )
    else:
        rcmd, renv = me + ["recv", "kernel", "127.0.0.1", str(args.workset_mib)], dict(os.environ)
        scmd, senv = me + [
            "send", "kernel", "127.0.0.1", str(args.mib), str(args.workset_mib), str(rate_gbps)
        ], dict(os.environ)
    # spead2 names each incomplete heap it drops on stderr: kept in a file, not shown.
    with open(os.path.join(SCRATCH[0], f"{transport}-receiver.err"), "ab") as err:
        receiver = subprocess.Popen(rcmd, env=renv, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err, text=True)
    ready = receiver.stdout.readline()
    if not ready.startswith('{"ready"'):
        raise SystemExit(f"the {transport} receiver did not start")
    sender = subprocess.run(scmd, env=senv, stdout=subprocess.PIPE, text=True, check=True)
    sent = json.loads(sender.stdout)
    # The end of the stream stops the receiver; if it was lost, the receiver is told.
    try:
        receiver.wait(timeout=3)
    except subprocess.TimeoutExpired:
        receiver.stdin.write("stop\n")
        receiver.stdin.flush()
    got = json.loads(receiver.stdout.readline())
    receiver.wait()
    gbps = sent["bytes"] * 8 / sent["elapsed"] / 1e9
    if emu is not None and got["mprq"] != (emu.topology is None):
        raise SystemExit(
            f"spead2's reader took the {'multi-packet' if got['mprq'] else 'ordinary'} path "
            f"on the {'no-direct-verbs' if emu.topology else 'direct-verbs'} device"
        )
    return got["heaps"] == args.mib and got["bad"] == 0, gbps


def lossless(transport, emu, args):
    """The fastest lossless rate (Gb/s), and the trials that found it."""
    ok, gbps = trial(transport, emu, args, 0.0)
    trials = [(0.0, ok, gbps)]
    if ok:
        return gbps, trials
    lo, hi, best = 0.0, gbps, 0.0
    for _ in range(args.steps):
        mid = (lo + hi) / 2
        ok, got = trial(transport, emu, args, mid)
        trials.append((mid, ok, got))
        if ok:
            lo, best = mid, max(best, got)
        else:
            hi = mid
    return best, trials


def ratio(a, b, digits=2):
    return f"{a / b:.{digits}f}" if b > 0 else "n/a"


def memcpy_gbps(workset_mib):
    src = np.ones(workset_mib * HEAP, dtype=np.uint8)
    dst = np.empty_like(src)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = max(best, src.nbytes * 8 / (time.perf_counter() - start) / 1e9)
    return best


def bench(args):
    rows = []
    with tempfile.TemporaryDirectory(prefix="spead2-rate-") as scratch:
        SCRATCH[0] = scratch
        no_dv = os.path.join(scratch, "no-direct-verbs.toml")
        with open(no_dv, "w") as f:
            f.write(NO_DV_TOPOLOGY)
        show = lambda t: " ".join(
            f"{'unpaced' if r == 0 else f'{r:.2f}'}:{'ok' if ok else 'loss'}@{g:.2f}"
            for r, ok, g in t
        )
        for run in range(args.runs):
            emu = Emu(args.fabric, args.lib, os.path.join(scratch, f"{run}-mprq"))
            e, e_trials = lossless("emu", emu, args)
            summary = emu.stop()
            emu = Emu(args.fabric, args.lib, os.path.join(scratch, f"{run}-plain"), no_dv)
            o, o_trials = lossless("emu-ordinary", emu, args)
            o_summary = emu.stop()
            k, k_trials = lossless("kernel", None, args)
            m = memcpy_gbps(args.workset_mib)
            rows.append((e, o, k, m))
            print(
                f"run {run + 1}: emulator (multi-packet queue) {e:.2f} Gb/s, emulator "
                f"(ordinary reader) {o:.2f} Gb/s, kernel UDP loopback {k:.2f} Gb/s, memcpy "
                f"{m:.1f} Gb/s; multi-packet/ordinary {ratio(e, o)}, emulator/kernel "
                f"{ratio(e, k)}, emulator/memcpy {ratio(e, m, 3)}, kernel/memcpy {ratio(k, m, 3)}",
                flush=True,
            )
            print(f"  multi-packet trials (pace:result@achieved): {show(e_trials)}", flush=True)
            print(f"  ordinary trials: {show(o_trials)}", flush=True)
            print(f"  kernel trials: {show(k_trials)}", flush=True)
            print(f"  fabric (multi-packet): {summary}", flush=True)
            print(f"  fabric (ordinary): {o_summary}", flush=True)
    med = [statistics.median(c) for c in zip(*rows)]
    print(
        f"median of {args.runs} runs ({args.mib} MiB of 1 MiB heaps in {PACKET}-byte packets "
        f"per trial, {args.workset_mib} MiB working set): emulator {med[0]:.2f} Gb/s through "
        f"spead2's multi-packet receive queue, {med[1]:.2f} Gb/s through its ordinary reader "
        f"(multi-packet/ordinary {ratio(med[0], med[1])}), kernel UDP loopback {med[2]:.2f} "
        f"Gb/s, memcpy {med[3]:.1f} Gb/s; emulator/kernel {ratio(med[0], med[2])}"
        + ("" if all(med) else " (0 Gb/s: no trial was lossless)")
    )


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "recv":
        workset = int(sys.argv[4]) if len(sys.argv) > 4 else None
        size = sys.argv[5] if len(sys.argv) > 5 else str(BUFFER)
        recv(sys.argv[2], sys.argv[3], workset, None if size == "default" else int(size))
    elif mode == "send":
        send(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
    elif mode == "bench":
        p = argparse.ArgumentParser(prog="spead2_rate.py bench")
        p.add_argument("--fabric", required=True, help="the verbs-emu-fabric binary")
        p.add_argument("--lib", required=True, help="folder with the emulated libibverbs.so.1")
        p.add_argument("--runs", type=int, default=3)
        p.add_argument("--mib", type=int, default=512, help="MiB sent per trial")
        p.add_argument("--workset-mib", type=int, default=256)
        p.add_argument("--steps", type=int, default=5)
        args = p.parse_args(sys.argv[2:])
        if args.runs < 1 or args.mib < 1 or args.workset_mib < 1 or args.steps < 0:
            p.error("--runs, --mib and --workset-mib must be at least 1, --steps at least 0")
        bench(args)
    else:
        raise SystemExit(f"usage: {sys.argv[0]} bench|send|recv ... (got {mode!r})")


if __name__ == "__main__":
    main()
