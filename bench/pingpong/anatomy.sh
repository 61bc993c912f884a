#!/usr/bin/env bash
# What the kernel's side of a spinning one-way latency costs for each way of using a UDP socket
# that roce-emu's UDP backend uses: a spinning UDP ping-pong of 64-byte datagrams in C
# (udp_pingpong.c, built here with cc) over a veth pair between two namespaces (root), with one
# socket feature at a time and with all of them, variants alternated, medians of RUNS runs of
# 100 000 exchanges. Prints a Markdown table (median and p99 one-way, µs, and the difference
# from the plain spinning socket); docs/benchmarks.md quotes it.
#   sudo RUNS=3 bash bench/pingpong/anatomy.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
need_root
RUNS=${RUNS:-3}
command -v cc >/dev/null || { echo "SKIP: needs a C compiler (cc)"; exit 0; }
scratch TMP -d
# With liburing (Debian's liburing-dev), the io_uring receive variants too.
uring=0
if echo '#include <liburing.h>' | cc -E - >/dev/null 2>&1; then
    cc -O2 -DWITH_IO_URING -o "$TMP/udp_pingpong" bench/pingpong/udp_pingpong.c -luring && uring=1
fi
[ "$uring" = 1 ] || cc -O2 -o "$TMP/udp_pingpong" bench/pingpong/udp_pingpong.c
A_IP=198.18.2.5; B_IP=198.18.2.6
veth_pair roce-pp-a.$$ roce-pp-b.$$ "$A_IP" "$B_IP"

VARIANTS=(
    "plain:"
    "connected:-c"
    "recvmmsg:-m"
    "UDP_GRO:-g"
    "UDP_SEGMENT cmsg:-s"
    "IP_TOS cmsg:-t"
    "sched_yield per empty poll:-y"
    "the backend's four (recvmmsg, UDP_GRO, UDP_SEGMENT, IP_TOS):-m -g -s -t"
    "… and sched_yield per empty poll (the busy-polling NIC's loop):-m -g -s -t -y"
)
if [ "$uring" = 1 ]; then
    VARIANTS+=(
        "io_uring multishot receive (default task-work notification), sched_yield per empty poll:-u -y"
        "io_uring multishot receive (COOP_TASKRUN), sched_yield per empty poll:-U -y"
        "… with UDP_GRO, UDP_SEGMENT and IP_TOS (the backend's calls, io_uring receiving):-U -g -s -t -y"
    )
else
    echo "(no liburing: the io_uring variants are left out; apt-get install liburing-dev)" >&2
fi
one() {  # one FLAGS…: "median p99"
    inb "$TMP/udp_pingpong" "$@" server >/dev/null 2>&1 & local pid=$!
    sleep 0.3
    ina timeout 60 "$TMP/udp_pingpong" "$@" client "$B_IP" || echo "- -"
    # The server spins in the namespace until killed: a subshell's pid is not its pid.
    pkill -f "^$TMP/udp_pingpong.* server$" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
declare -A MED P99
for _ in $(seq "$RUNS"); do
    for v in "${VARIANTS[@]}"; do
        # shellcheck disable=SC2086 # the flags are words
        read -r m p <<<"$(one ${v#*:})"
        MED[$v]+="$m "; P99[$v]+="$p "
    done
done
med() { tr ' ' '\n' <<<"$1" | grep -E '^[0-9.]+$' | median; }
plain=$(med "${MED[${VARIANTS[0]}]}")
echo "Run of $(date -u +%Y-%m-%d) on $(uname -m), $(nproc) cores, kernel $(uname -r), medians of $RUNS runs."
echo
echo "| socket | one-way median | p99 | median − plain |"
echo "|---|---|---|---|"
for v in "${VARIANTS[@]}"; do
    m=$(med "${MED[$v]}"); p=$(med "${P99[$v]}")
    echo "| ${v%%:*} | $m µs | $p µs | $(awk -v a="$m" -v b="$plain" 'BEGIN{printf "%+.2f", a-b}') µs |"
done
