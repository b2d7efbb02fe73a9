"""spead2 over the emulated NIC, in one process: an ibverbs reader on a multicast group and
an ibverbs sender to it, both on the interface address of host h1 (driven by
emulator/tests/spead2.rs).

Usage: spead2_multicast.py GROUP PORT HEAPS
The heaps are spead2_hosts.py's (the reader, sender and heaps are its own). Prints, as
JSON lines, every received heap: its cnt and each item's id and hex value, then
{"stats": {...}} with the stream's heap counters.
"""

import sys
import threading

from spead2_hosts import print_heaps, reader, send_heaps, sender

IFACE = "10.100.0.1"


def main():
    group, port, heaps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rx = reader(group, port, IFACE, heaps)
    tx = sender(group, port, IFACE)
    # The sender runs beside the receiving loop, as two programs would.
    thread = threading.Thread(target=send_heaps, args=(tx, heaps))
    thread.start()
    print_heaps(rx, ["heaps", "incomplete_heaps_evicted"])
    thread.join()


if __name__ == "__main__":
    main()
