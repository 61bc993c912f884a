#!/usr/bin/env bash
# Device benchmarks over a veth pair between two network namespaces (root), side by side in one
# run, medians of RUNS runs:
#   - RC WRITE goodput, 64 KiB messages (`roce perf write`, UDP and raw backends, path MTU 1024
#     and 4096), against the offloaded UDP blast of datagrams of the size of the WRITE packets
#     (bench/blast: UDP_SEGMENT on send, UDP_GRO on receive, the ceiling of a userspace protocol
#     on UDP), against iperf3's blast (one datagram per system call, the weaker anchor) and
#     against TCP (iperf3) between the same namespaces;
#   - 8-byte SEND ping-pong latency (`roce perf send --lat -s 8`, waiting on completion events
#     and with --busy-poll on the UDP backend, and with --busy-poll on the raw backend) against
#     a UDP ping-pong of 14 bytes, sockperf's smallest message, in the same mode: waiting in
#     the kernel (sockperf's default, blocking sockets) for the NIC that waits on events,
#     spinning (`--nonblocked` on both sides) for the busy-polling NIC;
#   - the message rate of 64-byte WRITEs (`roce perf write -s 64`), both NICs busy polling
#     (against the offloaded blast, which never waits either) and waiting on their sockets;
#   - aggregate goodput and Jain's index with 1, 10, 100 and 1000 QPs (`roce perf write -q N`),
#     against the offloaded blast moving the same working set: each side's datagrams from (or
#     into) N buffers of 64 KiB in turn (`roce-blast --buffers N`), as N QPs each write their
#     own 64 KiB region.
# The veths keep their default offloads: the UDP backend's GSO batches cross them whole.
# Writes the table into docs/benchmarks.md between the "veth" markers and the medians into
# target/bench/veth.env (for bench/compare.sh). Release build.
#   RUNS=5 bash bench/veth.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
need_root
RUNS=${RUNS:-3}
need iperf3 iperf3
need sockperf sockperf
cargo build -q --release -p roce -p roce-blast
ROCE=$PWD/target/release/roce
BLAST=$PWD/target/release/roce-blast
scratch TMP -d
STEADY_BLAST=$BLAST STEADY_LOG=$TMP/steady.log; : >"$STEADY_LOG"
A_IP=198.18.2.1; B_IP=198.18.2.2; A_RAW=198.18.2.3; B_RAW=198.18.2.4
veth_pair roce-bench-a.$$ roce-bench-b.$$ "$A_IP" "$B_IP"

# roce perf write: MB/s (10^6 bytes per second) of the client's average.
roce_write() {  # roce_write BACKEND MTU: "MB/s user-µs-per-packet" (the client's user CPU per
    # data packet it sent: 16 per 64 KiB WRITE at MTU 4096); both NICs on BACKEND (raw: they
    # play A_RAW and B_RAW). 40 000 WRITEs, a second or more as the blast's three: the kernel
    # splits CPU time into user and system by the tick (CONFIG_TICK_CPU_ACCOUNTING, 250 Hz
    # here), and 5 000 (0.2 s) gave 0.25 to 0.94 µs of user CPU per packet in one series.
    local backend=$1 mtu=$2 n=40000
    local server=(perf write -n "$n" -s 65536 -m "$mtu" --json)
    local client=(perf write "$B_IP" -n "$n" -s 65536 -m "$mtu" --json)
    if [ "$backend" = raw ]; then
        server+=(--backend raw --dev vb --ip "$B_RAW")
        client+=(--backend raw --dev va --ip "$A_RAW")
    fi
    inb "$ROCE" "${server[@]}" >/dev/null & local pid=$!
    sleep 0.3
    local mb
    mb=$(ina python3 bench/cputime.py "$TMP/cpu" "$ROCE" "${client[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bw_avg_mb_s"])')
    wait "$pid"
    echo "$mb $(awk -v n="$n" -v per=$((65536 / mtu)) '{printf "%.3f", $1 * 1e6 / (n * per)}' "$TMP/cpu")"
}
offload_blast() {  # offload_blast DATAGRAM_BYTES [BUFFERS]: "MB/s M-datagrams/s sys-µs-per-datagram"
    # received (bench/blast: UDP_SEGMENT + UDP_GRO), and the sender's system CPU per datagram
    # it sent (on a veth that includes the receiver's softirq, which runs in the sender's call);
    # each side over BUFFERS buffers of 64 KiB in turn [1]
    inb "$BLAST" recv --bind "$B_IP:5300" --seconds 3 --buffers "${2:-1}" >"$TMP/blast.json" & local pid=$!
    sleep 0.3
    ina python3 bench/cputime.py "$TMP/cpu" "$BLAST" send --to "$B_IP:5300" --size "$1" --seconds 3 \
        --buffers "${2:-1}" >"$TMP/blast-send.json"
    wait "$pid"
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1])); sent = json.load(open(sys.argv[2]))["datagrams"]
sys_s = float(open(sys.argv[3]).read().split()[1])
print(d["mb_s"], d["datagrams_per_s"]/1e6, "%.3f" % (sys_s * 1e6 / max(sent, 1)))' "$TMP/blast.json" "$TMP/blast-send.json" "$TMP/cpu"
}
udp_blast() {  # udp_blast DATAGRAM_BYTES: MB/s received
    inb iperf3 -s -1 -p 5201 >/dev/null & local pid=$!
    sleep 0.3
    ina iperf3 -c "$B_IP" -p 5201 -u -b 0 -l "$1" -t 3 -J | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["end"]["sum_received"]["bytes"]/d["end"]["sum_received"]["seconds"]/1e6)'
    wait "$pid" || true
}
tcp() {
    inb iperf3 -s -1 -p 5202 >/dev/null & local pid=$!
    sleep 0.3
    ina iperf3 -c "$B_IP" -p 5202 -t 3 -J | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["end"]["sum_received"]["bytes"]/d["end"]["sum_received"]["seconds"]/1e6)'
    wait "$pid" || true
}
roce_lat() {  # roce_lat [--busy-poll|-] [raw]: "median p99 p99.9" one-way latency, µs (raw:
    # both NICs on the raw backend, playing A_RAW and B_RAW)
    local flags=() server=() client=()
    [ "${1:-}" = --busy-poll ] && flags=(--busy-poll)
    if [ "${2:-}" = raw ]; then
        server=(--backend raw --dev vb --ip "$B_RAW")
        client=(--backend raw --dev va --ip "$A_RAW")
    fi
    inb "$ROCE" perf send --lat -s 8 -n 20000 --json "${flags[@]}" "${server[@]}" >/dev/null & local pid=$!
    sleep 0.3
    ina "$ROCE" perf send --lat "$B_IP" -s 8 -n 20000 --json "${flags[@]}" "${client[@]}" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["t_typical_us"], d["p99_us"], d["p999_us"])'
    wait "$pid"
}
roce_qps() {  # roce_qps N: aggregate MB/s and Jain's index of N QPs writing 64 KiB (same bytes in all)
    local n=$((20000 / $1))
    inb "$ROCE" perf write -q "$1" -n "$n" -s 65536 -m 4096 --json >/dev/null & local pid=$!
    sleep 0.5
    ina "$ROCE" perf write "$B_IP" -q "$1" -n "$n" -s 65536 -m 4096 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["bw_avg_mb_s"], d["jain"])'
    wait "$pid"
}
roce_rate() {  # [--busy-poll]: 64-byte WRITEs, millions of messages per second
    # perftest's CQ moderation (-Q 100, roce perf's default too) with a queue twice as deep,
    # so that a completion never finds the window empty (roce perf --help, -Q).
    inb "$ROCE" perf write -n 1000000 -s 64 -t 256 --json "$@" >/dev/null & local pid=$!
    sleep 0.3
    ina "$ROCE" perf write "$B_IP" -n 1000000 -s 64 -t 256 --json "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["msg_rate_mpps"])'
    wait "$pid"
}
roce_op() {  # roce_op OP SIZE N: "MB/s resent": one QP, MTU 4096; resent counts the requester's
    # packets sent again and the responder's duplicate requests (a READ asked for again).
    # Messages of 8 KiB and less run with perftest's CQ moderation (-Q 100), so with a queue
    # twice as deep (-t 256), as roce_rate's: at -t 128 the window falls to 28 WRs at every
    # completion, and a READ's responder, idle by then, is woken for the next request (three
    # alternated rounds of 4 KiB: READ 0.74-0.84 x WRITE at -t 128, 0.89-1.02 x at -t 256).
    local op=$1 size=$2 n=$3 depth=()
    [ "$size" -le 8192 ] && depth=(-t 256)
    inb "$ROCE" perf "$op" -n "$n" -s "$size" -m 4096 "${depth[@]}" --json >"$TMP/op.json" & local pid=$!
    sleep 0.3
    ina "$ROCE" perf "$op" "$B_IP" -n "$n" -s "$size" -m 4096 "${depth[@]}" --json >"$TMP/op-client.json"
    wait "$pid"
    python3 -c 'import json,sys
c, s = (json.load(open(p)) for p in sys.argv[1:])
print(c["bw_avg_mb_s"], c["retransmitted_packets"] + s.get("counters", {}).get("rx_duplicate_requests", 0))' \
        "$TMP/op-client.json" "$TMP/op.json"
}
# READ against WRITE, one message size at a time, about 1 GB of each (3 GiB at 1 GiB): at
# 300 MB (0.1-0.15 s) one 1 GiB WRITE read 1 310 MB/s and the next 2 934 with nothing changed.
OP_SIZES="4096:250000 65536:15000 1048576:1000 67108864:15 1073741824:3"
udp_lat() {  # [--nonblocked]: sockperf (14 bytes, its smallest message), one-way latency (half the
    # round trip): "median p99 p99.9", µs — the tails are the kernel's own, beside ours
    inb sockperf server -i "$B_IP" -p 11111 "$@" >/dev/null 2>&1 & local pid=$!
    sleep 0.3
    ina sockperf ping-pong -i "$B_IP" -p 11111 --msg-size 14 -t 3 "$@" 2>/dev/null |
        awk '/percentile 99.900/{p999=$NF} /percentile 99.000/{p99=$NF} /percentile 50.000/{p50=$NF} END{print p50, p99, p999}'
    # `inb … &` is a subshell running the function: its pid is not sockperf's, and a spinning
    # server left behind takes a core from every measurement after it.
    pkill -f "^sockperf server -i $B_IP -p 11111" 2>/dev/null || true
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
}

declare -A R
for _ in $(seq "$RUNS"); do
    read -r mb us <<<"$(steady roce_write udp 1024)"; R[udp1024]+="$mb "
    read -r mb us <<<"$(steady roce_write udp 4096)"; R[udp4096]+="$mb "; R[udp4096user]+="$us "
    read -r mb us <<<"$(steady roce_write raw 1024)"; R[raw1024]+="$mb "
    read -r mb us <<<"$(steady roce_write raw 4096)"; R[raw4096]+="$mb "; R[raw4096user]+="$us "
    R[blast1040]+="$(steady udp_blast 1040) "; R[blast4112]+="$(steady udp_blast 4112) "
    read -r mb mpps us <<<"$(steady offload_blast 4112)"; R[oblast4112]+="$mb "; R[oblast4112sys]+="$us "
    read -r mb mpps us <<<"$(steady offload_blast 96)"; R[oblast96pps]+="$mpps "
    R[tcp]+="$(steady tcp) "
    read -r t p99 p999 <<<"$(roce_lat)"; R[rlat]+="$t "; R[rlat99]+="$p99 "; R[rlat999]+="$p999 "
    read -r t p99 p999 <<<"$(roce_lat --busy-poll)"; R[rlatbusy]+="$t "; R[rlatbusy99]+="$p99 "; R[rlatbusy999]+="$p999 "
    read -r t p99 p999 <<<"$(roce_lat --busy-poll raw)"; R[rawlatbusy]+="$t "; R[rawlatbusy99]+="$p99 "; R[rawlatbusy999]+="$p999 "
    read -r t p99 p999 <<<"$(udp_lat)"; R[ulat]+="$t "; R[ulat99]+="$p99 "; R[ulat999]+="$p999 "
    read -r t p99 p999 <<<"$(udp_lat --nonblocked)"; R[ulatspin]+="$t "; R[ulatspin99]+="$p99 "; R[ulatspin999]+="$p999 "
    R[rate64busy]+="$(steady roce_rate --busy-poll) "; R[rate64]+="$(steady roce_rate) "
    for q in 1 10 100 1000; do
        read -r bw jain <<<"$(steady roce_qps "$q")"
        R[q$q]+="$bw "; R[jain$q]+="$jain "
        read -r mb mpps us <<<"$(steady offload_blast 4112 "$q")"; R[oblastbuf$q]+="$mb "
    done
    for sn in $OP_SIZES; do
        for op in write read; do
            read -r bw resent <<<"$(steady roce_op "$op" "${sn%:*}" "${sn#*:}")"
            R[$op${sn%:*}]+="$bw "; R[${op}resent${sn%:*}]+="$resent "
        done
    done
done
med() { tr ' ' '\n' <<<"${R[$1]}" | grep . | median | awk '{printf "%.4g", $1}'; }
ratio() { awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN{printf "%.2f", a/b}'; }
table=$(cat <<TXT
<!-- veth: generated by bench/veth.sh — do not edit by hand -->
Run of $(date -u +%Y-%m-%d) on $(uname -m), $(nproc) cores, veth MTU 9000, medians of $RUNS runs,
release build. MB/s are 10^6 bytes of payload per second. $(steady_summary "$STEADY_LOG")

| measurement | median | ratio |
|---|---|---|
| \`roce perf write\` 64 KiB, UDP backend, path MTU 1024 | $(med udp1024) MB/s | $(ratio udp1024 blast1040) × UDP blast of 1040-byte datagrams |
| \`roce perf write\` 64 KiB, UDP backend, path MTU 4096 | $(med udp4096) MB/s | $(ratio udp4096 oblast4112) × the offloaded UDP blast of 4112-byte datagrams, $(ratio udp4096 blast4112) × iperf3's |
| \`roce perf write\` 64 KiB, raw backend on both sides, path MTU 1024 | $(med raw1024) MB/s | $(ratio raw1024 blast1040) × UDP blast |
| \`roce perf write\` 64 KiB, raw backend on both sides, path MTU 4096 | $(med raw4096) MB/s | $(ratio raw4096 oblast4112) × the offloaded blast, $(ratio raw4096 blast4112) × iperf3's |
| … the client's user CPU per data packet it sent, UDP / raw backend, path MTU 4096 | $(med udp4096user) / $(med raw4096user) µs | $(ratio udp4096user oblast4112sys) / $(ratio raw4096user oblast4112sys) × the blast sender's system CPU per datagram |
| offloaded UDP blast, 4112-byte datagrams (bench/blast: UDP_SEGMENT, UDP_GRO) | $(med oblast4112) MB/s | |
| … the sender's system CPU per datagram (on a veth it carries the receiver's softirq) | $(med oblast4112sys) µs | |
| offloaded UDP blast, 96-byte datagrams (a 64-byte WRITE's size) | $(med oblast96pps) M datagrams/s | |
| iperf3's UDP blast, 1040-byte datagrams (-u -b 0: one datagram per system call) | $(med blast1040) MB/s | |
| iperf3's UDP blast, 4112-byte datagrams | $(med blast4112) MB/s | |
| TCP (iperf3) | $(med tcp) MB/s | |
| \`roce perf send --lat -s 8\`, typical one-way latency | $(med rlat) µs | $(ratio rlat ulat) × UDP ping-pong (blocking) |
| … its p99 / p99.9 | $(med rlat99) / $(med rlat999) µs | p99 $(ratio rlat99 rlat) × its median |
| \`roce perf send --lat -s 8 --busy-poll\`, typical one-way latency | $(med rlatbusy) µs | $(ratio rlatbusy ulatspin) × UDP ping-pong (spinning) |
| … its p99 / p99.9 | $(med rlatbusy99) / $(med rlatbusy999) µs | p99 $(ratio rlatbusy99 rlatbusy) × its median |
| \`roce perf send --lat -s 8 --busy-poll\`, raw backend on both sides | $(med rawlatbusy) µs | $(ratio rawlatbusy ulatspin) × UDP ping-pong (spinning) |
| … its p99 / p99.9 | $(med rawlatbusy99) / $(med rawlatbusy999) µs | p99 $(ratio rawlatbusy99 rawlatbusy) × its median |
| \`roce perf write -s 64 -t 256 --busy-poll\` (-Q 100), message rate | $(med rate64busy) M/s | |
| … waiting on the sockets (without \`--busy-poll\`) | $(med rate64) M/s | |
| \`roce perf write -q 1\` 64 KiB, MTU 4096, 20 000 WRITEs | $(med q1) MB/s | Jain $(med jain1) |
| \`roce perf write -q 10\`, 2 000 WRITEs per QP | $(med q10) MB/s | $(ratio q10 q1) × 1 QP, Jain $(med jain10) |
| \`roce perf write -q 100\`, 200 WRITEs per QP | $(med q100) MB/s | $(ratio q100 q1) × 1 QP, Jain $(med jain100) |
| \`roce perf write -q 1000\`, 20 WRITEs per QP | $(med q1000) MB/s | $(ratio q1000 q1) × 1 QP, Jain $(med jain1000) |
| offloaded blast of 4112-byte datagrams over 1 / 10 / 100 / 1000 buffers of 64 KiB (\`--buffers N\`, each side) | $(med oblastbuf1) / $(med oblastbuf10) / $(med oblastbuf100) / $(med oblastbuf1000) MB/s | $(ratio oblastbuf10 oblastbuf1) / $(ratio oblastbuf100 oblastbuf1) / $(ratio oblastbuf1000 oblastbuf1) × 1 buffer |
$(for sn in $OP_SIZES; do z=${sn%:*}; echo "| \`roce perf read\` against \`write\`, $z-byte messages, MTU 4096$([ "$z" -le 8192 ] && echo ", -t 256") | $(med "read$z") vs $(med "write$z") MB/s, sent again $(med "readresent$z") vs $(med "writeresent$z") | $(ratio "read$z" "write$z") × |"; done)
| UDP ping-pong of 14 bytes (sockperf's smallest), median one-way, blocking sockets | $(med ulat) µs | |
| … its p99 / p99.9 | $(med ulat99) / $(med ulat999) µs | |
| … spinning (\`--nonblocked\` on both sides) | $(med ulatspin) µs | |
| … its p99 / p99.9 | $(med ulatspin99) / $(med ulatspin999) µs | |
<!-- /veth -->
TXT
)
mkdir -p target/bench
{
    for key in "${!R[@]}"; do echo "$key=$(med "$key")"; done
    echo "runs=$RUNS"
} | sort > target/bench/veth.env
steady_summary "$STEADY_LOG" > target/bench/veth.steady
python3 - "$table" <<'PY'
import re, sys
path = "docs/benchmarks.md"
text = open(path).read()
block = sys.argv[1]
if "<!-- veth:" in text:
    text = re.sub(r"<!-- veth:.*?<!-- /veth -->", lambda _: block, text, flags=re.S)
else:
    text += "\n## Device over a veth pair (issue: device)\n\n`sudo bash bench/veth.sh` (RUNS=3 by default)\n\n" + block + "\n"
open(path, "w").write(text)
PY
echo "$table"
