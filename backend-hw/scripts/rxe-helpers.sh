# Shell functions for checks on an RDMA device's port 1 (Soft-RoCE rxe0 in the VM), shared
# by pingpong-interop.sh (which sources this file) and xtask's smoke check (which embeds it:
# xtask/src/cmd.rs, SMOKE_SCRIPT). Defines functions only.

# ipv4_gid_index DEVICE: prints the index of port 1's IPv4-mapped GID (::ffff:a.b.c.d),
# the one RoCEv2 over IPv4 uses; fails, saying so, when the port has none.
ipv4_gid_index() {
    for i in $(seq 0 15); do
        case "$(cat "/sys/class/infiniband/$1/ports/1/gids/$i" 2>/dev/null)" in
            0000:0000:0000:0000:0000:ffff:*) echo "$i"; return 0 ;;
        esac
    done
    echo "no IPv4-mapped GID on $1 port 1" >&2
    return 1
}

# wait_until WHAT COMMAND...: polls COMMAND for up to 60 s.
wait_until() {
    what=$1; shift
    end=$(( $(date +%s) + 60 ))
    until "$@"; do
        [ "$(date +%s)" -lt $end ] || { echo "timed out waiting for $what"; return 1; }
        sleep 0.2
    done
}

# wait_port PORT: waits for a TCP server listening on PORT.
listening() { ss -ltn | grep -q ":$1 "; }
wait_port() { wait_until "a server on port $1" listening "$1"; }
