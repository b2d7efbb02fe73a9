"""Makes the pcap fixtures in tests/data from real spead2 traffic on loopback.

Run as root with the spead2 venv's Python (tests/src/spead2.rs creates it at
target/spead2-venv on first use of the interop tests):

    target/spead2-venv/bin/python tests/py/capture_fixtures.py [OUT_DIR]

For each capture it starts tcpdump on loopback, sends the same heaps with spead2's
`spead2.send.UdpStream` to 127.0.0.1, and stops tcpdump:

  spead2_lo_eth.pcap    tcpdump -i lo                       (LINKTYPE_ETHERNET, microseconds)
  spead2_any_sll.pcap   tcpdump -i any -y LINUX_SLL         (LINKTYPE_LINUX_SLL, nanoseconds)
  spead2_any_sll2.pcap  tcpdump -i any -y LINUX_SLL2        (LINKTYPE_LINUX_SLL2, microseconds)
  spead2_lo.pcapng      dumpcap -i lo, when dumpcap exists  (pcapng, Ethernet)

Traffic: the main stream goes to 127.0.0.1:7148 (descriptors, immediates, int16 and
float32 arrays of several packets each, a numpy-dtype descriptor, a stop heap); a second
stream to 127.0.0.1:7149 (a few small heaps, its own stop heap) is interleaved with it so
that destination filters have something to filter. Only loopback traffic is captured
(`udp and dst host 127.0.0.1 and dst portrange 7148-7149`). Heap contents are
deterministic; only timestamps differ between runs.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import spead2
import spead2.send

MAIN_PORT = 7148
SIDE_PORT = 7149
CAPTURE_FILTER = "udp and dst host 127.0.0.1 and dst portrange %d-%d" % (MAIN_PORT, SIDE_PORT)


def main_heaps():
    """Heaps of the main stream, as (heap, cnt) pairs built by an ItemGroup."""
    rng = np.random.default_rng(2026)
    flavour = spead2.Flavour(4, 64, 48, 0)
    ig = spead2.send.ItemGroup(flavour=flavour, descriptor_frequency=None)
    ig.add_item(0x1600, "timestamp", "sample counter of the first sample", (), format=[("u", 48)])
    ig.add_item(0x1601, "gain", "a small immediate", (), format=[("u", 16)])
    ig.add_item(0x1800, "samples", "int16 voltage samples", (1024,), dtype=np.int16)
    ig.add_item(0x1801, "spectrum", "float32 power spectrum", (2048,), dtype=np.float32)
    ig.add_item(0x1802, "flags", "uint8 flags", (16, 8), dtype=np.uint8)
    out = []
    for i in range(5):
        ig["timestamp"].value = 1_000_000 + i * 1024
        ig["gain"].value = 100 + i
        ig["samples"].value = rng.integers(-30000, 30000, 1024, dtype=np.int16)
        ig["spectrum"].value = rng.random(2048, dtype=np.float32)
        ig["flags"].value = rng.integers(0, 256, (16, 8), dtype=np.uint8)
        # The first heap carries every descriptor (and the first update marks them).
        heap = ig.get_heap(descriptors="all" if i == 0 else "stale", data="all")
        out.append(heap)
    out.append(ig.get_end())
    return out


def side_heaps():
    flavour = spead2.Flavour(4, 64, 40, 0)
    ig = spead2.send.ItemGroup(flavour=flavour)
    ig.add_item(0x2000, "counter", "side stream counter", (), format=[("u", 32)])
    ig.add_item(0x2001, "blob", "side stream bytes", (300,), dtype=np.uint8)
    out = []
    for i in range(3):
        ig["counter"].value = i
        ig["blob"].value = np.full(300, i, dtype=np.uint8)
        out.append(ig.get_heap(descriptors="all" if i == 0 else "stale", data="all"))
    out.append(ig.get_end())
    return out


def send_traffic():
    # Receivers bound to both ports, so the kernel never answers with ICMP errors.
    sinks = []
    for port in (MAIN_PORT, SIDE_PORT):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("127.0.0.1", port))
        sinks.append(s)
    pool = spead2.ThreadPool()
    cfg = spead2.send.StreamConfig(max_packet_size=1472, rate=2e6)
    main = spead2.send.UdpStream(pool, [("127.0.0.1", MAIN_PORT)], cfg)
    side = spead2.send.UdpStream(pool, [("127.0.0.1", SIDE_PORT)], cfg)
    mains = main_heaps()
    sides = side_heaps()
    # Heap counters: the main stream counts 1, 2, ...; the side stream 1001, 1002, ...
    for i, heap in enumerate(mains):
        main.send_heap(heap, i + 1)
        if i < len(sides):
            side.send_heap(sides[i], 1001 + i)
    for i in range(len(mains), len(sides)):
        side.send_heap(sides[i], 1001 + i)
    time.sleep(0.2)
    for s in sinks:
        s.close()


def capture(cmd, out_path):
    """Runs a capture command around one round of traffic."""
    if os.path.exists(out_path):
        os.remove(out_path)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    # Both tcpdump and dumpcap say when they listen.
    deadline = time.monotonic() + 10
    line = ""
    while "istening on" not in line and "Capturing on" not in line:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise SystemExit("capture failed: %s" % " ".join(cmd))
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("capture did not start: %s" % " ".join(cmd))
    time.sleep(0.3)
    send_traffic()
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=10)[1]
    print("%s: %s" % (os.path.basename(out_path), rest.strip().replace("\n", "; ")))
    os.chmod(out_path, 0o644)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data")
    os.makedirs(out_dir, exist_ok=True)
    tcpdump = shutil.which("tcpdump")
    if tcpdump is None:
        raise SystemExit("tcpdump not found (apt-get install -y tcpdump)")
    base = [tcpdump, "-n", "-s", "0", "-B", "32768", "-U", "--immediate-mode"]
    captures = [
        (base + ["-i", "lo"], "spead2_lo_eth.pcap"),
        # Only the inbound copy: on "any", loopback frames are seen going out and in.
        (base + ["-i", "any", "-y", "LINUX_SLL", "-Q", "in",
                 "--time-stamp-precision", "nano"], "spead2_any_sll.pcap"),
        (base + ["-i", "any", "-y", "LINUX_SLL2", "-Q", "in"], "spead2_any_sll2.pcap"),
    ]
    for cmd, name in captures:
        path = os.path.join(out_dir, name)
        capture(cmd + ["-w", path, CAPTURE_FILTER], path)
    dumpcap = shutil.which("dumpcap")
    if dumpcap is not None:
        path = os.path.join(out_dir, "spead2_lo.pcapng")
        capture([dumpcap, "-q", "-i", "lo", "-s", "0", "-f", CAPTURE_FILTER, "-w", path], path)


if __name__ == "__main__":
    main()
