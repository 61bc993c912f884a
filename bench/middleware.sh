#!/usr/bin/env bash
# What middleware gets from the NIC: Debian's unmodified UCX (ucx_perftest) under `roce exec`
# against perftest under `roce exec`, the same two processes' places, over one veth pair
# between two network namespaces (root), in one run, medians of RUNS runs:
#   - goodput, 64 KiB messages, path MTU 4096: ucx_perftest tag_bw over rc_verbs and over
#     ud_verbs against `ib_write_bw -s 65536 -m 4096` (goals: rc_verbs ≥ 0.9 ×, ud_verbs ≥ 0.5 ×);
#     over rc_verbs also with `-O 64` (at most 64 sends outstanding; the default, 0, sets no
#     bound);
#   - 8-byte latency, typical one-way: ucx_perftest tag_lat over rc_verbs, and an MPI ping-pong
#     (tools/roce/tests/mpi/pingpong_alltoall.c `lat`, Open MPI's UCX pml over rc_verbs, one
#     rank per namespace) against `ib_send_lat -s 8` (goal: ≤ 1.2 ×).
# UCX is told its transport (UCX_TLS) and device (UCX_NET_DEVICES=roce0:1) only: the two
# processes share a host, where UCX would otherwise pick shared memory. All programs wait on
# their sockets (no --busy-poll); ucx_perftest and perftest both spin on their CQs.
# ucx_perftest's MB/s and perftest's MB/sec are 2^20 bytes per second: both are converted to
# 10^6 here. Every program, the anchors too, runs with path MTU 4096 (`--mtu 4096`). Prints
# each ratio and whether its goal is met (a missed goal does not fail the script). Release
# build.
#   RUNS=3 bash bench/middleware.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_root
RUNS=${RUNS:-3}
need ib_write_bw perftest
need ucx_perftest ucx-utils
need mpicc openmpi-bin libopenmpi-dev
cargo build -q --release -p roce -p roce-verbs-so -p roce-rdmacm-so
ROCE=$PWD/target/release/roce
A_IP=198.18.3.1; B_IP=198.18.3.2
veth_pair roce-bench-ma.$$ roce-bench-mb.$$ "$A_IP" "$B_IP"

exec_write() {  # ib_write_bw's BW average, in 10^6 bytes per second
    local args=(-x 1 -n 5000 -s 65536 -m 4096)
    inb "$ROCE" exec --ip "$B_IP" --mtu 4096 -- ib_write_bw "${args[@]}" >/dev/null & local pid=$!
    listening 18515
    ina "$ROCE" exec --ip "$A_IP" --mtu 4096 -- ib_write_bw "${args[@]}" "$B_IP" |
        row 4 | awk '{printf "%.2f\n", $1 * 1.048576}'
    wait "$pid"
}
exec_lat() {  # ib_send_lat's typical one-way latency, µs
    local args=(-x 1 -s 8 -n 20000)
    inb timeout 120 "$ROCE" exec --ip "$B_IP" --mtu 4096 -- ib_send_lat "${args[@]}" >/dev/null & local pid=$!
    listening 18515
    ina "$ROCE" exec --ip "$A_IP" --mtu 4096 -- ib_send_lat "${args[@]}" "$B_IP" | row 5
    wait "$pid"
}
# ucx_perftest TEST TLS SIZE ITERS [OPTION...]: its "Final:" line. The warm-up is 1000
# messages (its default is as many as the run, up to 10 000).
ucx() {
    local env=(env UCX_TLS="$2" UCX_NET_DEVICES=roce0:1)  # rc_verbs connects through ud_verbs
    local args=(-t "$1" -s "$3" -n "$4" -w 1000 -p 13337 "${@:5}")
    inb timeout 120 "$ROCE" exec --ip "$B_IP" --mtu 4096 -- "${env[@]}" ucx_perftest "${args[@]}" >/dev/null & local pid=$!
    listening 13337
    ina timeout 120 "$ROCE" exec --ip "$A_IP" --mtu 4096 -- "${env[@]}" ucx_perftest "${args[@]}" "$B_IP" |
        grep '^Final:'
    wait "$pid"
}
# "Final: iters typ_lat avg_lat overall_lat bw_avg bw_overall msgrate_avg msgrate_overall":
# the overall bandwidth (MB/s, 2^20) in 10^6 bytes per second, and the typical latency (µs).
ucx_bw() { ucx tag_bw "$1" 65536 5000 "${@:2}" | awk '{printf "%.2f\n", $7 * 1.048576}'; }
ucx_lat() { ucx tag_lat rc_verbs,ud_verbs 8 20000 | awk '{print $3}'; }
# The MPI program, and mpirun's "rsh agent" that starts the daemon of host B_IP in namespace b.
MPI_APP=$PWD/target/bench/mpi-pingpong
mkdir -p target/bench
mpicc -O2 -o "$MPI_APP" tools/roce/tests/mpi/pingpong_alltoall.c
AGENT=$PWD/target/bench/mpi-agent.sh
printf '#!/bin/sh\nhost=$1; shift\ncase $host in %s) ns=%s;; *) ns=%s;; esac\nexec ip netns exec "$ns" sh -c "$*"\n' \
    "$B_IP" "$B" "$A" >"$AGENT"
chmod +x "$AGENT"
mpi_lat() {  # the MPI ping-pong's typical one-way latency, µs
    ina timeout 120 mpirun --allow-run-as-root -np 2 -host "$A_IP,$B_IP" --mca plm_rsh_agent "$AGENT" \
        --mca pml ucx --mca btl '^vader,tcp,openib,uct' \
        -x UCX_TLS=rc_verbs,ud_verbs -x UCX_NET_DEVICES=roce0:1 \
        sh -c "if [ \$OMPI_COMM_WORLD_RANK = 0 ]; then ip=$A_IP; else ip=$B_IP; fi; exec $ROCE exec --ip \$ip --mtu 4096 -- $MPI_APP lat" |
        awk '/^lat_us/ {print $2}'
}

scratch RESULTS
for run in $(seq "$RUNS"); do
    w=$(exec_write); r=$(ucx_bw rc_verbs,ud_verbs); o=$(ucx_bw rc_verbs,ud_verbs -O 64)
    u=$(ucx_bw ud_verbs); l=$(exec_lat); t=$(ucx_lat); m=$(mpi_lat)
    echo "run $run: ib_write_bw $w MB/s, tag_bw rc_verbs $r (-O 64: $o), ud_verbs $u; ib_send_lat $l µs, tag_lat $t, MPI $m"
    echo "$w $r $u $l $t $o $m" >>"$RESULTS"
done
col() { awk -v c="$1" '{print $c}' "$RESULTS" | median; }
W=$(col 1); R=$(col 2); U=$(col 3); L=$(col 4); T=$(col 5); O=$(col 6); M=$(col 7)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; }
goal() { awk -v r="$1" -v g="$3" -v op="$2" 'BEGIN{ok = (op == ">=") ? r >= g : r <= g; print (ok ? "met" : "missed")}'; }
rr=$(ratio "$R" "$W"); or=$(ratio "$O" "$W"); ur=$(ratio "$U" "$W"); lr=$(ratio "$T" "$L")
mr=$(ratio "$M" "$L")
echo "median of $RUNS:"
echo "  ucx_perftest tag_bw rc_verbs $R MB/s / ib_write_bw $W MB/s = $rr × (goal ≥ 0.9: $(goal "$rr" ">=" 0.9))"
echo "  ucx_perftest tag_bw -O 64 rc_verbs $O MB/s / ib_write_bw $W MB/s = $or × (goal ≥ 0.9: $(goal "$or" ">=" 0.9))"
echo "  ucx_perftest tag_bw ud_verbs $U MB/s / ib_write_bw $W MB/s = $ur × (goal ≥ 0.5: $(goal "$ur" ">=" 0.5))"
echo "  ucx_perftest tag_lat rc_verbs $T µs / ib_send_lat $L µs = $lr × (goal ≤ 1.2: $(goal "$lr" "<=" 1.2))"
echo "  MPI ping-pong (Open MPI, UCX pml, rc_verbs) $M µs / ib_send_lat $L µs = $mr × (goal ≤ 1.2: $(goal "$mr" "<=" 1.2))"
