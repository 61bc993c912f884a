#!/usr/bin/env bash
# Two builds of `roce` on one 64 KiB WRITE stream over a veth pair, in ABBA rounds (A, B, B, A:
# the order cancels a drift of the host within a round), both sides pinned (server on CPU 1,
# client on CPU 0). Prints one line a run: build, goodput MB/s, the client's user and system
# CPU per data packet in µs (bench/cputime.py; 16 packets per WRITE at MTU 4096), then the
# medians of each build and the rounds in which B's user CPU was the lower.
#
#   sudo bash bench/veth-ab.sh OLD/roce NEW/roce [ROUNDS]      # N=40000 WRITEs a run
#   sudo BACKEND=raw bash bench/veth-ab.sh OLD/roce NEW/roce   # both NICs on the raw backend
#
# Needs root (network namespaces) and two CPUs; addresses 198.18.2.1 and .2 on its own veth
# (the raw backend's NICs play .3 and .4 on it).
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
bin_a=$1 bin_b=$2 rounds=${3:-6}
cd "$(dirname "$0")/.."
. bench/lib.sh
need_root
[ "$(nproc)" -ge 2 ] || { echo "veth-ab: needs two CPUs, this machine has $(nproc)" >&2; exit 2; }
scratch TMP -d
A_IP=198.18.2.1; B_IP=198.18.2.2
veth_pair roce-ab-a.$$ roce-ab-b.$$ "$A_IP" "$B_IP"
n=${N:-40000}
server=() client=()
case ${BACKEND:-udp} in
udp) ;;
raw) server=(--backend raw --dev vb --ip 198.18.2.4); client=(--backend raw --dev va --ip 198.18.2.3) ;;
*) echo "veth-ab: BACKEND is udp or raw, not $BACKEND" >&2; exit 2 ;;
esac
one() { # one BINARY LABEL: a run, and its line
    inb taskset -c 1 "$1" perf write -n "$n" -s 65536 -m 4096 --json ${server[@]+"${server[@]}"} >/dev/null & local pid=$!
    sleep 0.3
    ina taskset -c 0 python3 bench/cputime.py "$TMP/cpu" "$1" perf write "$B_IP" -n "$n" -s 65536 -m 4096 --json ${client[@]+"${client[@]}"} >"$TMP/c.json"
    wait "$pid"
    echo "$2 $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["bw_avg_mb_s"]))' "$TMP/c.json") $(awk -v n="$n" '{printf "%.3f %.3f", $1 * 1e6 / (n * 16), $2 * 1e6 / (n * 16)}' "$TMP/cpu")"
}
for _ in $(seq "$rounds"); do
    one "$bin_a" A; one "$bin_b" B; one "$bin_b" B; one "$bin_a" A
done | tee "$TMP/runs"
python3 - "$TMP/runs" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l[:1] in "AB"]
for k in "AB":
    r = [x for x in rows if x[0] == k]
    print(f"{k}: goodput median {statistics.median(float(x[1]) for x in r):.0f} MB/s, "
          f"user {statistics.median(float(x[2]) for x in r):.3f} µs/packet, "
          f"system {statistics.median(float(x[3]) for x in r):.3f} µs/packet ({len(r)} runs)")
lower = sum(1 for i in range(0, len(rows) - 3, 4)
            if float(rows[i + 1][2]) + float(rows[i + 2][2]) < float(rows[i][2]) + float(rows[i + 3][2]))
print(f"B's user CPU lower in {lower} of {len(rows) // 4} rounds")
PY
