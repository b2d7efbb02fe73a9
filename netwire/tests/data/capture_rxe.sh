#!/bin/sh
# Captures real RoCE v2 frames sent by the Linux rxe driver (Soft-RoCE) between two rxe
# devices on the Soft-RoCE VM's veth pair, as test vectors for netwire:
#   rxe_rocev2_ipv6.pcap  GID index 0 (IPv6 link-local GIDs)
#   rxe_rocev2_ipv4.pcap  GID index 1 (IPv4-mapped GIDs)
# Each holds one ibv_rc_pingpong and one ibv_ud_pingpong run (3 iterations of 64 bytes),
# rxe0 (veth0) the server, rxe1 (veth1) the client.
#
# Run from the workspace root (root in the VM; the VM made veth0 10.77.0.1/24 and rxe0):
#   cargo xtask vm -- sh netwire/tests/data/capture_rxe.sh [OUTDIR]
# OUTDIR defaults to this script's folder. Needs dumpcap (wireshark-common) on the host.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
. "$here/../../../backend-hw/scripts/rxe-helpers.sh"

for need in /sys/class/net/veth0 /sys/class/net/veth1 /sys/class/infiniband/rxe0; do
    [ -e "$need" ] || { echo "no $need: run this in the Soft-RoCE VM (cargo xtask vm)" >&2; exit 1; }
done
echo "kernel: $(uname -r)"
dpkg-query -W rdma-core ibverbs-utils ibverbs-providers wireshark-common

# rxe1 on veth1 with an IPv4 address too (its GID 1); veth1 is already up, so it has its
# link-local IPv6 address (its GID 0) once duplicate address detection is over.
ip addr add 10.77.0.2/24 dev veth1
linklocal_ready() {
    for d in veth0 veth1; do
        ip -6 addr show dev "$d" scope link | grep -q 'inet6 fe80' || return 1
        ! ip -6 addr show dev "$d" scope link | grep -q tentative || return 1
    done
}
wait_until "link-local addresses" linklocal_ready
rdma link add rxe1 type rxe netdev veth1

# IPv4 between two local addresses would take the local path (lo), where rxe cannot send:
# locally made packets to the other device's address leave through their own veth
# (as tests/src/conformance/loss.rs sets up). IPv6 link-local needs nothing: rxe's route
# lookup names its own netdev as the output interface, so fe80::/64 on that veth is taken.
ip rule add pref 10 to 10.77.0.2 iif lo lookup 100
ip route add 10.77.0.2 dev veth0 src 10.77.0.1 table 100
ip rule add pref 11 to 10.77.0.1 iif lo lookup 101
ip route add 10.77.0.1 dev veth1 src 10.77.0.2 table 101
ip rule add pref 100 lookup local
ip rule del pref 0
for d in all veth0 veth1; do
    echo 1 > "/proc/sys/net/ipv4/conf/$d/accept_local"
    echo 0 > "/proc/sys/net/ipv4/conf/$d/rp_filter"
done

ip -6 addr show dev veth0 scope link
ip -6 addr show dev veth1 scope link
for dev in rxe0 rxe1; do
    for i in 0 1; do
        echo "$dev GID[$i] $(cat /sys/class/infiniband/$dev/ports/1/gids/$i)" \
            "$(cat /sys/class/infiniband/$dev/ports/1/gid_attrs/types/$i)"
    done
done

# pingpong PROGRAM GID_INDEX PORT: server on rxe0, client on rxe1; the out-of-band TCP
# exchange goes over 127.0.0.1 (not captured).
pingpong() {
    "$1" -d rxe0 -g "$2" -n 3 -s 64 -p "$3" &
    srv=$!
    wait_port "$3"
    "$1" -d rxe1 -g "$2" -n 3 -s 64 -p "$3" 127.0.0.1
    wait "$srv"
}

# capture FILE GID_INDEX: both pingpongs, captured where veth1 sends and receives
# (every frame between the two devices crosses it), RoCE v2 only, pcap format.
capture() {
    rm -f "$1"
    dumpcap -q -P -i veth1 -f 'udp dst port 4791' -w "$1" &
    cap=$!
    wait_until "dumpcap to open $1" test -s "$1"
    sleep 1
    pingpong ibv_rc_pingpong "$2" 18515
    pingpong ibv_ud_pingpong "$2" 18516
    sleep 1
    kill -INT "$cap"
    wait "$cap" || true
    chmod 644 "$1"
}

capture "$out/rxe_rocev2_ipv6.pcap" 0
capture "$out/rxe_rocev2_ipv4.pcap" 1
ls -l "$out"/rxe_rocev2_ipv6.pcap "$out"/rxe_rocev2_ipv4.pcap
