#!/usr/bin/env bash
# Two builds of `roce` on one simulator scenario, run at the same time, one per core, then with
# the cores swapped: on a machine whose other tenants make one run differ from the next by up to
# 2x, the two halves of a pair share the same moment, and the swap cancels the cores' own
# difference. Prints packet-hops per wall second for each, and the ratio B/A; the runs must
# agree on the packet-hops (the same code path gives the same result, bit for bit).
#
#   bash bench/sim-ab.sh OLD/roce NEW/roce SCENARIO.toml [PAIRS]
#
# A cut of the reference run, as docs/benchmarks.md measures it:
#   sed -e 's/duration_us = 100000/duration_us = 10000/' -e 's/drain_us = 100000/drain_us = 20000/' \
#       scenarios/fattree-fb30-incast.toml > /tmp/cut.toml
# Needs two cores and `taskset` (util-linux); needs no root.
set -euo pipefail
if [ $# -lt 3 ]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
a=$1 b=$2 scenario=$3 pairs=${4:-1}
command -v taskset >/dev/null || { echo "sim-ab: taskset is missing (util-linux)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "sim-ab: needs two cores, this machine has $(nproc)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
rate() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["packet_hops_per_s"], d["packet_hops"])' "$1"; }
run_pair() { # first on core 0, second on core 1
    taskset -c 0 "$1" sim "$scenario" --out "$dir/0" --json >"$dir/0.json" 2>/dev/null &
    taskset -c 1 "$2" sim "$scenario" --out "$dir/1" --json >"$dir/1.json" 2>/dev/null &
    wait
}
for _ in $(seq "$pairs"); do
    for order in ab ba; do
        if [ $order = ab ]; then run_pair "$a" "$b"; ca=0 cb=1; else run_pair "$b" "$a"; ca=1 cb=0; fi
        read -r ra ha < <(rate "$dir/$ca.json")
        read -r rb hb < <(rate "$dir/$cb.json")
        [ "$ha" = "$hb" ] || echo "sim-ab: the builds differ in packet-hops ($ha, $hb): not the same run" >&2
        python3 -c 'import sys; a,b=map(float,sys.argv[1:3]); print("A %.3f M/s (core %s)  B %.3f M/s (core %s)  B/A %.3f" % (a/1e6, sys.argv[3], b/1e6, sys.argv[4], b/a))' \
            "$ra" "$rb" "$ca" "$cb"
    done
done
