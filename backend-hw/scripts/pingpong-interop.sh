#!/bin/sh
# Our rc_pingpong / ud_pingpong examples against rdma-core's ibv_rc_pingpong /
# ibv_ud_pingpong, in both roles, and against each other, on one RDMA device (loopback
# through its IPv4-mapped GID). Run inside the Soft-RoCE VM, e.g.:
#
#   cargo build -p backend-hw --features ibverbs --examples
#   cargo xtask vm -- sh backend-hw/scripts/pingpong-interop.sh target/debug/examples
#
# $1: the folder holding our example binaries; RDMA_DEVICE (default rxe0); ITERS (default 200).
set -eu
. "$(dirname "$0")/rxe-helpers.sh"
BIN=$(cd "${1:?usage: pingpong-interop.sh EXAMPLES_DIR}" && pwd)
D=${RDMA_DEVICE:-rxe0}
N=${ITERS:-200}
G=$(ipv4_gid_index "$D")
echo "== $D GID index $G, $N iterations"
PORT=18600
# pair NAME SERVER CLIENT ARGS...: the server in the background, the client against it.
pair() {
    name=$1; server=$2; client=$3; shift 3
    PORT=$((PORT + 1))
    echo "== $name: server $(basename "$server"), client $(basename "$client")"
    "$server" -d "$D" -g "$G" -p $PORT -n "$N" "$@" > /tmp/server.out 2>&1 & S=$!
    wait_port $PORT
    if ! "$client" -d "$D" -g "$G" -p $PORT -n "$N" "$@" 127.0.0.1; then
        echo "client failed; server said:"; cat /tmp/server.out; kill $S 2>/dev/null; exit 1
    fi
    if ! wait $S; then
        echo "server failed:"; cat /tmp/server.out; exit 1
    fi
    cat /tmp/server.out
}
pair "RC ours/ours" "$BIN/rc_pingpong" "$BIN/rc_pingpong" -s 4096
pair "RC ours/rdma-core" "$BIN/rc_pingpong" ibv_rc_pingpong -s 4096
pair "RC rdma-core/ours" ibv_rc_pingpong "$BIN/rc_pingpong" -s 4096
pair "RC events rdma-core/ours" ibv_rc_pingpong "$BIN/rc_pingpong" -s 100 -e
pair "UD ours/ours" "$BIN/ud_pingpong" "$BIN/ud_pingpong" -s 1000
pair "UD ours/rdma-core" "$BIN/ud_pingpong" ibv_ud_pingpong -s 1000
pair "UD rdma-core/ours" ibv_ud_pingpong "$BIN/ud_pingpong" -s 1000
pair "UD events ours/rdma-core" "$BIN/ud_pingpong" ibv_ud_pingpong -s 500 -e
echo "== pingpong interop passed"
