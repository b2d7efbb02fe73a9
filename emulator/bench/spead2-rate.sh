#!/bin/sh
# The lossless rate of a spead2 sender and receiver in two processes through the emulated
# NIC (its reader once through the multi-packet receive queue, once through the ordinary
# reader on a device without direct verbs), beside the same pair over kernel UDP loopback,
# 8 KiB packets (see spead2_rate.py).
# Usage, as root (network namespaces): emulator/bench/spead2-rate.sh [--runs N] [--mib M]
#   [--workset-mib W] [--steps S]
# Builds the emulator in release mode, and spead2 4.5.1 into target/spead2-venv if missing.
set -eu
if [ "$(id -u)" != 0 ]; then
    echo "spead2-rate.sh: run as root (each emulated host gets a network namespace)" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release --quiet -p emulator
lib="$root/target/emu/release-lib"
mkdir -p "$lib"
for name in libibverbs.so.1 librdmacm.so.1 libmlx5.so.1; do
    ln -sfn "$root/target/release/libibverbs.so" "$lib/$name"
done
python="$root/target/spead2-venv/bin/python"
if ! "$python" -c 'import spead2, numpy' 2>/dev/null; then
    python3 -m venv "$root/target/spead2-venv"
    "$python" -m pip install --quiet spead2==4.5.1 numpy
fi
# The kernel pair talks on the loopback of a namespace of its own.
exec unshare -n sh -c 'ip link set lo up && exec "$@"' sh \
    "$python" "$root/emulator/bench/spead2_rate.py" bench \
    --fabric "$root/target/release/verbs-emu-fabric" --lib "$lib" "$@"
