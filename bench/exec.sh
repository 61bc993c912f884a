#!/usr/bin/env bash
# What the verbs layer costs: Debian's unmodified perftest under `roce exec` (roce-emu's
# libibverbs.so.1 in the program's process) against `roce perf` (the same NIC driven directly),
# over one veth pair between two network namespaces (root), in one run, medians of RUNS runs:
#   - RC WRITE goodput, 64 KiB messages, path MTU 4096, 20 000 WRITEs, 128 in flight (1.3 GB:
#     at 5 000, 0.15 s a run, one run of a pair read 0.84 × the other with nothing changed):
#     `roce exec --mtu 4096 -- ib_write_bw -s 65536 -m 4096` against
#     `roce perf write -s 65536 -m 4096` (goal: ≥ 0.9 ×);
#   - 8-byte SEND latency, typical (median) one-way, 20 000 exchanges:
#     `roce exec -- ib_send_lat -s 8` against `roce perf send --lat -s 8` (goal: ≤ 1.1 ×). Both
#     NICs wait on their sockets (no --busy-poll on either side);
#   - the shared NIC (every process on an address shares its NIC, roce exec's default) against
#     a NIC of the process's own (`--private-nic`), both measures above (goals: ≥ 0.9 × the
#     goodput, ≤ 1.1 × the latency), and two ib_write_bw pairs at once on the two shared NICs
#     against one (goal: ≥ 1 ×).
# They are interleaved in each run, so load on the machine hits both alike. perftest's MB/sec
# is 2^20 bytes per second (its rows show it: size × MsgRate[Mpps] = 1.049 × BW average; `roce
# perf --help` says the same of its own table): converted here to 10^6, the unit of `roce perf
# --json`. Prints each ratio and whether its goal
# is met (a missed goal does not fail the script) and writes the medians to
# target/bench/exec.env, for bench/compare.sh's goals table. Release build.
#   RUNS=5 bash bench/exec.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_root
RUNS=${RUNS:-3}
need ib_write_bw perftest
cargo build -q --release -p roce -p roce-verbs-so -p roce-rdmacm-so -p roce-blast
ROCE=$PWD/target/release/roce
STEADY_BLAST=$PWD/target/release/roce-blast
scratch STEADY_LOG
A_IP=198.18.2.1; B_IP=198.18.2.2
veth_pair roce-bench-xa.$$ roce-bench-xb.$$ "$A_IP" "$B_IP"

perf_write() {  # MB/s (10^6) of the client's average
    inb "$ROCE" perf write -n 20000 -s 65536 -m 4096 --json >/dev/null & local pid=$!
    listening
    ina "$ROCE" perf write "$B_IP" -n 20000 -s 65536 -m 4096 --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["bw_avg_mb_s"])'
    wait "$pid"
}
exec_write() {  # [--private-nic]: ib_write_bw's BW average (2^20 bytes per second), in 10^6
    local args=(-x 1 -n 20000 -s 65536 -m 4096)
    inb "$ROCE" exec --ip "$B_IP" --mtu 4096 "$@" -- ib_write_bw "${args[@]}" >/dev/null & local pid=$!
    listening
    ina "$ROCE" exec --ip "$A_IP" --mtu 4096 "$@" -- ib_write_bw "${args[@]}" "$B_IP" |
        row 4 | awk '{printf "%.2f\n", $1 * 1.048576}'
    wait "$pid"
}
exec_write2() {  # two ib_write_bw pairs at once on the two shared NICs: the sum, 10^6 B/s
    local args=(-x 1 -n 20000 -s 65536 -m 4096) pids=() i
    for i in 1 2; do
        inb "$ROCE" exec --ip "$B_IP" --mtu 4096 -- ib_write_bw "${args[@]}" -p $((18600 + i)) >/dev/null &
        pids+=($!)
    done
    sleep 1
    scratch sums
    for i in 1 2; do
        (ina "$ROCE" exec --ip "$A_IP" --mtu 4096 -- ib_write_bw "${args[@]}" -p $((18600 + i)) "$B_IP" |
            row 4 >>"$sums") &
        pids+=($!)
    done
    wait "${pids[@]}"
    awk '{s += $1 * 1.048576} END {printf "%.2f\n", s}' "$sums"
}
perf_lat() {  # µs, typical one-way
    inb "$ROCE" perf send --lat -s 8 -n 20000 --json >/dev/null & local pid=$!
    listening
    ina "$ROCE" perf send --lat "$B_IP" -s 8 -n 20000 --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["t_typical_us"])'
    wait "$pid"
}
exec_lat() {  # [--private-nic]: ib_send_lat's t_typical, µs (one-way: perftest halves the round trip)
    local args=(-x 1 -n 20000 -s 8)
    inb "$ROCE" exec --ip "$B_IP" "$@" -- ib_send_lat "${args[@]}" >/dev/null & local pid=$!
    listening
    ina "$ROCE" exec --ip "$A_IP" "$@" -- ib_send_lat "${args[@]}" "$B_IP" | row 5
    wait "$pid"
}

declare -A R
for i in $(seq "$RUNS"); do
    # Alternate which goes first, so that a trend in the machine's load does not favour one.
    if [ $((i % 2)) = 1 ]; then
        R[perf_bw]+="$(steady perf_write) "; R[exec_bw]+="$(steady exec_write) "
        R[perf_lat]+="$(perf_lat) "; R[exec_lat]+="$(exec_lat) "
        R[private_bw]+="$(steady exec_write --private-nic) "; R[private_lat]+="$(exec_lat --private-nic) "
        R[exec_bw2]+="$(steady exec_write2) "
    else
        R[exec_bw]+="$(steady exec_write) "; R[perf_bw]+="$(steady perf_write) "
        R[exec_lat]+="$(exec_lat) "; R[perf_lat]+="$(perf_lat) "
        R[exec_bw2]+="$(steady exec_write2) "
        R[private_lat]+="$(exec_lat --private-nic) "; R[private_bw]+="$(steady exec_write --private-nic) "
    fi
done
med() { tr ' ' '\n' <<<"${R[$1]}" | grep . | median | awk '{printf "%.4g", $1}'; }
mkdir -p target/bench
{
    for key in "${!R[@]}"; do echo "$key=$(med "$key")"; done
    echo "runs=$RUNS"
} | sort > target/bench/exec.env
steady_summary "$STEADY_LOG" > target/bench/exec.steady
awk -v e="$(med exec_bw)" -v p="$(med perf_bw)" 'BEGIN{r = e / p;
    printf "WRITE 64 KiB, MTU 4096: roce exec -- ib_write_bw %.0f MB/s / roce perf write %.0f MB/s = %.2f (goal >= 0.9: %s)\n",
        e, p, r, (r >= 0.9 ? "met" : "NOT met")}'
awk -v e="$(med exec_lat)" -v p="$(med perf_lat)" 'BEGIN{r = e / p;
    printf "SEND 8 B latency: roce exec -- ib_send_lat %.2f us / roce perf send --lat %.2f us = %.2f (goal <= 1.1: %s)\n",
        e, p, r, (r <= 1.1 ? "met" : "NOT met")}'
awk -v s="$(med exec_bw)" -v p="$(med private_bw)" 'BEGIN{r = s / p;
    printf "WRITE 64 KiB: shared NIC %.0f MB/s / NIC of its own (--private-nic) %.0f MB/s = %.2f (goal >= 0.9: %s)\n",
        s, p, r, (r >= 0.9 ? "met" : "NOT met")}'
awk -v s="$(med exec_lat)" -v p="$(med private_lat)" 'BEGIN{r = s / p;
    printf "SEND 8 B latency: shared NIC %.2f us / NIC of its own %.2f us = %.2f (goal <= 1.1: %s)\n",
        s, p, r, (r <= 1.1 ? "met" : "NOT met")}'
awk -v two="$(med exec_bw2)" -v one="$(med exec_bw)" 'BEGIN{r = two / one;
    printf "WRITE 64 KiB: two processes on each shared NIC %.0f MB/s / one %.0f MB/s = %.2f (goal >= 1: %s)\n",
        two, one, r, (r >= 1 ? "met" : "NOT met")}'
echo "medians of $RUNS runs in target/bench/exec.env"
cat target/bench/exec.steady
