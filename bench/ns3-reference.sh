#!/usr/bin/env bash
# HPCC's ns-3 (alibaba-edu/High-Precision-Congestion-Control, ns-3.17) as a differential
# reference for `roce sim`: the same topology file (its mix/fat.txt: 320 hosts at 100 Gb/s,
# 56 switches) and the SAME flow file (made by its traffic_gen/traffic_gen.py) run in both
# simulators, and the FCT slowdown p50/p95/p99 per size bin (5 % of the flows each, as
# analysis/fct_analysis.py cuts them) compared side by side, PASS when within 25 %.
#
#   bash bench/ns3-reference.sh [--cdf fb_hadoop|websearch] [--load 0.3] [--ms 2] [--cc dcqcn]
#                               [--drain-ms 50] [--seed 1] [--jitter-ns N [--jitter-seed S]]
#                               [--topology FILE] [--flows FILE] [--out DIR] [--roce PATH] [--reuse]
#
#   --cdf       flow sizes: fb_hadoop (FbHdp_distribution.txt) or websearch
#               (WebSearch_distribution.txt), HPCC's files                     [fb_hadoop]
#   --load      Poisson load per host NIC (traffic_gen.py -l)                  [0.3]
#   --ms        milliseconds of flow arrivals (traffic_gen.py -t); 15 ms of FB_Hadoop 30 %
#               (150 k flows) took ns-3 about 15 minutes on this machine      [2]
#   --cc        congestion control, as HPCC's run.py sets it up [dcqcn]:
#               dcqcn   run.py --cc dcqcn (CC_MODE 1): its DCQCN "CX-4" profile, no window,
#                       ACKs at high priority; roce sim with ns-3's decrease tick and timer
#                       stages (decrease_on_tick, stages_by_timer), as every dcqcn_* below
#               hpcc    run.py --cc hp (CC_MODE 3): eta 0.95, maxStage 0, W_AI 40 Mb/s, a window
#                       (VAR_WIN) and fast react, INT units x4 (100G / 25G)
#               hpcc_pint  run.py --cc hpccPint (CC_MODE 10): hpcc's with PINT's one value for
#                       the records, log base 1.01, every echo used (PINT_PROB 1.0); roce sim's
#                       hpcc-pint, its switches' T the topology's largest RTT
#               dctcp   run.py --cc dctcp (CC_MODE 8): g 1/16, AI 615 Mb/s, a window (VAR_WIN),
#                       its own marking K = 300 KB at 100G (1200 KB at 400G), Pmax 1
#               timely  run.py --cc timely (CC_MODE 7): AI 100 Mb/s, HAI 500 Mb/s, no window
#                       (roce sim's QP window lifted), ns-3's thresholds (T_low 50 us, T_high
#                       500 us, minRTT 20 us)
#               dcqcn_paper  run.py --cc dcqcn_paper: dcqcn's rates with the paper's timers
#                       (alpha every 50 us, a decrease at most every 50 us, the increase
#                       timer 55 us), no window
#               dcqcn_vwin, timely_vwin  run.py's, dcqcn and timely with a window of the
#                       topology's largest RTT at the rate (HAS_WIN 1, VAR_WIN 1; roce sim's
#                       dcqcn-vwin and timely-vwin with window_rtt_ns that RTT)
#   --drain-ms  simulated time after the last arrival for flows to finish      [50]
#   --seed      seed of Python's random for traffic_gen.py (it has none of its own) [1]
#   --jitter-ns every flow's start moved later by 0..N ns (uniform, seeded by --jitter-seed,
#               the file's order kept), N from 1 to 8: the same workload, perturbed far below
#               a packet's 80 ns at 100 Gb/s, to show how far a bin's tail moves by chance
#               (bench/ns3-sensitivity.sh runs it over seeds). Without --reuse both simulators
#               run the moved flows (--out named -jitterN-sS); with it, roce sim alone, into
#               roce-jitterN-sS, compared with ns-3's run of the unmoved flows and with roce
#               sim's (roce-jitterN-sS-self.md). Flows are matched by start within 10 ns. [0]
#   --jitter-seed  the jitter's seed                                            [1]
#   --topology  a topology file of ns-3's format instead of HPCC's mix/fat.txt (written as
#               fat.txt in --out): a small case, a dumbbell or a star, isolates one behaviour
#   --flows     a flow file of traffic_gen.py's format (a count line, then "src dst 3 100 bytes
#               start_s" per flow, in start order, from 2 s) instead of generating one; --ms must
#               still cover the last start (it sets the stop time). --out then defaults to
#               bench-out/ns3-<the file's name>-<cc>
#   --out       where the run's files go     [bench-out/ns3-<cdf>-<load>-<ms>ms-<cc>]
#   --roce      the roce binary              [$CARGO_TARGET_DIR or target]/release/roce
#   --reuse     keep --out's flow.txt and ns-3's fct_ns3.txt from an earlier run and run roce
#               sim alone: with ROCE_SETS (below), a hypothesis tested in seconds
#
# roce sim runs scenarios/fattree-fb30.toml with --topology/--flows given these files, and
# with HPCC's profile where the scenario's differs: no DCQCN byte counter
# (network.dcqcn.rpg_byte_reset=4294967295) and ECN marks at dequeue (network.mark_at=dequeue).
# For hpcc, dctcp and timely: --set network.congestion=<cc> and the [network.<cc>] values of
# run.py's profile (T and the window from ns-3's largest base RTT of the topology, maxRtt:
# 12 240 ns on fat.txt), marks at dequeue, DCTCP's marking in [network.dctcp.ecn].
# ROCE_SETS="KEY=VALUE ..." adds --set overrides after those (the scenario as shipped:
# ROCE_SETS="network.dcqcn.rpg_byte_reset=32767 network.mark_at=enqueue"); the out directory
# and the tables are then named after them (roce-<sets>). NS3_SETS="KEY=VALUE ..." changes
# lines of ns-3's config.txt (e.g. ACK_HIGH_PRIO=0) and the default --out is named after them.
#
# Environment: NS3_SRC, a clone (or bare git directory) of HPCC's repository to copy from, else
# it is cloned from GitHub; NS3_DIR, the cache where it is built once
# [$HOME/.cache/roce-emu/hpcc-ns3]. Pinned at commit 9f4be2a (2021-03-11). Builds ns-3.17 with
# waf under Python 2.7 (`python2`, or pyenv's 2.7.18), g++ with -std=gnu++11 -fpermissive, the
# optimized profile, five modules: 1-5 minutes.
#
# Writes into --out: flow.txt (the flows, both simulators), fat.txt, config.txt, ns3.log and
# fct_ns3.txt (ns-3's), roce/ and roce.log (roce sim's), roce.md and roce.json (the
# comparison by bench/ns3-compare.py, which computes both sides' slowdown from third.cc's
# standalone FCT: base RTT + (size + 48 header bytes per 1000-byte packet) at the bottleneck;
# with the wall times and packet counts), and prints roce.md. Not for CI: minutes to hours.
set -euo pipefail
# All in one function, read whole before it runs: the file may change under a long run.
main() {
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
PIN=9f4be2a9ead8a90e8bf732c66bd758c00e58e5be
URL=https://github.com/alibaba-edu/High-Precision-Congestion-Control

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
cdf=fb_hadoop load=0.3 ms=2 cc=dcqcn drain_ms=50 seed=1 out='' roce='' reuse=0 jitter=0 jseed=1
topo='' flows_in=''
while [ $# -gt 0 ]; do
    case $1 in
        --cdf) cdf=$2; shift 2 ;;
        --load) load=$2; shift 2 ;;
        --ms) ms=$2; shift 2 ;;
        --cc) cc=$2; shift 2 ;;
        --drain-ms) drain_ms=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --jitter-ns) jitter=$2; shift 2 ;;
        --jitter-seed) jseed=$2; shift 2 ;;
        --topology) topo=$2; shift 2 ;;
        --flows) flows_in=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --roce) roce=$2; shift 2 ;;
        --reuse) reuse=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "ns3-reference: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
done
case $cdf in
    fb_hadoop) cdf_file=FbHdp_distribution.txt ;;
    websearch) cdf_file=WebSearch_distribution.txt ;;
    *) echo "ns3-reference: --cdf fb_hadoop or websearch, not '$cdf'" >&2; exit 2 ;;
esac
case $cc in
    dcqcn | hpcc | hpcc_pint | dctcp | timely | dcqcn_paper | dcqcn_vwin | timely_vwin) ;;
    *) echo "ns3-reference: --cc dcqcn, hpcc, hpcc_pint, dctcp, timely, dcqcn_paper, dcqcn_vwin or timely_vwin, not '$cc'" >&2; exit 2 ;;
esac
num='^[0-9]+([.][0-9]+)?$'
for v in "$load" "$ms" "$drain_ms" "$seed" "$jitter" "$jseed"; do
    [[ $v =~ $num ]] || { echo "ns3-reference: '$v' is not a number" >&2; exit 2; }
done
[[ $jitter =~ ^[0-8]$ ]] || { echo "ns3-reference: --jitter-ns from 1 to 8 (flows are matched by start within 10 ns), not '$jitter'" >&2; exit 2; }
[[ $jseed =~ ^[0-9]+$ ]] || { echo "ns3-reference: --jitter-seed is a whole number, not '$jseed'" >&2; exit 2; }
jtag=''
[ "$jitter" = 0 ] || jtag="-jitter$jitter-s$jseed"
ns3_tag=''
for kv in ${NS3_SETS:-}; do ns3_tag+="-${kv//[^A-Za-z0-9_.=]/_}"; done
[ "$reuse" = 1 ] || ns3_tag+=$jtag
for f in "$topo" "$flows_in"; do
    [ -z "$f" ] || [ -s "$f" ] || { echo "ns3-reference: no file '$f'" >&2; exit 2; }
done
[ -z "$topo" ] || topo=$(cd "$(dirname "$topo")" && pwd)/$(basename "$topo")
[ -z "$flows_in" ] || flows_in=$(cd "$(dirname "$flows_in")" && pwd)/$(basename "$flows_in")
if [ -n "$flows_in" ]; then
    out=${out:-$repo/bench-out/ns3-$(basename "$flows_in" .txt)-$cc$ns3_tag}
else
    out=${out:-$repo/bench-out/ns3-$cdf-$load-${ms}ms-$cc$ns3_tag}
fi
roce=${roce:-${CARGO_TARGET_DIR:-$repo/target}/release/roce}
[ -x "$roce" ] || { echo "ns3-reference: no $roce: cargo build --release -p roce" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "ns3-reference: needs /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }
NS3_DIR=${NS3_DIR:-$HOME/.cache/roce-emu/hpcc-ns3}
bw=100 # run.py --bw 100: the hosts' Gb/s, which its parameters scale with

# Python 2.7 for waf and traffic_gen.py: python2 on the PATH, or pyenv's.
pyenv27=0
if command -v pyenv >/dev/null && [[ $'\n'$(pyenv versions --bare 2>/dev/null)$'\n' == *$'\n2.7.18\n'* ]]; then
    pyenv27=1
fi
# As a command (for `nice`, which cannot run a shell function) and as a function.
if [ "$pyenv27" = 1 ]; then py2cmd=(env PYENV_VERSION=2.7.18 pyenv exec python2); else py2cmd=(python2); fi
py2() { "${py2cmd[@]}" "$@"; }
py2 -c 'import sys; assert sys.version_info[:2] == (2, 7)' 2>/dev/null \
    || { echo "ns3-reference: needs Python 2.7 as python2 (or pyenv's 2.7.18)" >&2; exit 2; }

# The source, once, at the pinned commit.
src=$NS3_DIR/src
if [ ! -d "$src/.git" ]; then
    mkdir -p "$NS3_DIR"
    git clone -q "${NS3_SRC:-$URL}" "$src"
fi
if [ "$(git -C "$src" rev-parse HEAD)" != "$PIN" ]; then
    git -C "$src" -c advice.detachedHead=false checkout -q "$PIN"
fi
sim=$src/simulation
third=$sim/build/scratch/third

# The build, once. `CC` must not hold anything but a C compiler here: waf reads it.
if [ ! -x "$third" ] || [ ! -e "$NS3_DIR/built-$PIN" ]; then
    echo "ns3-reference: building HPCC's ns-3.17 in $sim (about a minute)" >&2
    (
        cd "$sim"
        unset CC CXX
        CXXFLAGS="-std=gnu++11 -fpermissive -w" py2 waf configure -d optimized \
            --enable-modules=core,network,internet,point-to-point,applications \
            --disable-python --disable-tests --disable-examples >"$NS3_DIR/configure.log" 2>&1
        nice -n 19 "${py2cmd[@]}" waf build -j"$(nproc)" >"$NS3_DIR/build.log" 2>&1
    ) || { echo "ns3-reference: the ns-3 build failed, see $NS3_DIR/configure.log and build.log" >&2; exit 1; }
    touch "$NS3_DIR/built-$PIN"
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
what="$cdf $load, $ms ms of arrivals" # the run, in the tables' titles
[ -z "$flows_in" ] || what="$(basename "$flows_in") on $(basename "${topo:-fat.txt}")"
topo=${topo:-$sim/mix/fat.txt}
[ "$topo" -ef "$out/fat.txt" ] || cp "$topo" "$out/fat.txt"

# jitter_flows IN OUT: IN's flows with each start moved later by a seeded 0..$jitter ns, never
# before the previous flow's (the simulators read the file in order; a reordering would
# change the flows' ports, and so their ECMP paths).
jitter_flows() {
    python3 - "$1" "$2" "$jitter" "$jseed" <<'PY'
import random, sys
src, dst, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng, prev = random.Random(seed), 0
with open(src) as f, open(dst, "w") as g:
    g.write(f.readline())
    for line in f:
        p = line.split()
        if len(p) != 6:
            g.write(line)
            continue
        whole, _, frac = p[5].partition(".")
        at = max(int(whole) * 10**9 + int(frac[:9].ljust(9, "0")) + rng.randint(0, n), prev)
        prev = at
        p[5] = "%d.%09d" % divmod(at, 10**9)
        g.write(" ".join(p) + "\n")
PY
}

# /usr/bin/time's "wall user sys" as "wall cpu", in seconds; `? ?` without the file.
times_of() { if [ -s "$1" ]; then awk 'END {printf "%.1f %.1f\n", $1, $2 + $3}' "$1"; else echo '? ?'; fi; }
if [ "$reuse" = 1 ] && [ -s "$out/flow.txt" ] && [ -s "$out/fct_ns3.txt" ] && [ -s "$out/ns3.wall" ]; then
    read -r ns3_wall ns3_cpu <<<"$(times_of "$out/ns3.time")"
    if [ "$ns3_wall" = '?' ]; then # a run of before ns3.time: third prints its clock() last
        ns3_wall=$(cat "$out/ns3.wall")
        ns3_cpu=$(tail -1 "$out/ns3.log" | awk '{printf "%.1f", $1}')
    fi
    n=$(head -1 "$out/flow.txt")
    echo "ns3-reference: reusing $out/flow.txt ($n flows) and fct_ns3.txt" >&2
else
    # The flows: traffic_gen.py with Python's random seeded (the script seeds nothing); flows start
    # at 2 s as it writes them. Its count line is the estimate overwritten in place by the real
    # count, which leaves a stale digit when the two differ in length: written again here.
    if [ -n "$flows_in" ]; then
        [ "$flows_in" -ef "$out/flow.txt" ] || cp "$flows_in" "$out/flow.txt"
        n=$(head -1 "$out/flow.txt")
        echo "ns3-reference: $n flows from $flows_in" >&2
    else
        secs=$(python3 -c "print(${ms} / 1000)")
        (
            cd "$src/traffic_gen"
            py2 -c 'import random, sys; random.seed(int(sys.argv[1])); sys.argv = ["traffic_gen.py"] + sys.argv[2:]; execfile("traffic_gen.py")' \
                "$seed" -c "$cdf_file" -n 320 -l "$load" -b 100G -t "$secs" -o "$out/flow.raw"
        )
        n=$(($(wc -l <"$out/flow.raw") - 1))
        { echo "$n"; tail -n +2 "$out/flow.raw"; } >"$out/flow.txt"
        rm "$out/flow.raw"
        echo "ns3-reference: $n flows ($cdf, load $load, $ms ms of arrivals, seed $seed)" >&2
    fi
    if [ "$jitter" != 0 ]; then
        jitter_flows "$out/flow.txt" "$out/flow.jittered"
        mv "$out/flow.jittered" "$out/flow.txt"
        echo "ns3-reference: every start moved later by 0-$jitter ns (seed $jseed)" >&2
    fi

    # ns-3's config as run.py writes it for `--cc <cc> --bw 100 --topo fat` (`hp` for hpcc), with
    # the run's paths, the stop time after the drain, and the queue monitor (every 100 ns until
    # QLEN_MON_END, which costs ns-3 a lot) off. run.py's values per algorithm, its names.
    stop=$(python3 -c "print('%.6f' % (2 + (${ms} + ${drain_ms}) / 1000))")
    t_alpha=1 t_dec=4 t_inc=300 g=0.00390625 dctcp_ai=1000 int_multi=1
    kmax_map="2 $((bw * 1000000000)) $((400 * bw / 25)) $((bw * 4 * 1000000000)) $((400 * bw * 4 / 25))"
    kmin_map="2 $((bw * 1000000000)) $((100 * bw / 25)) $((bw * 4 * 1000000000)) $((100 * bw * 4 / 25))"
    pmax_map="2 $((bw * 1000000000)) 0.20 $((bw * 4 * 1000000000)) 0.20"
    case $cc in
        dcqcn)
            mode=1 ai=$((5 * bw / 25)) hai=$((50 * bw / 25)) has_win=0 vwin=0 us=0 ack_prio=1 ;;
        hpcc)
            mode=3 ai=$((10 * bw / 25)) hai=$((10 * bw / 25)) has_win=1 vwin=1 us=1 ack_prio=0
            int_multi=$((bw / 25)) ;;
        hpcc_pint)
            mode=10 ai=$((10 * bw / 25)) hai=$((10 * bw / 25)) has_win=1 vwin=1 us=1 ack_prio=0
            int_multi=$((bw / 25)) ;;
        dctcp)
            mode=8 ai=10 hai=10 dctcp_ai=615 g=0.0625 has_win=1 vwin=1 us=0 ack_prio=0
            kmax_map="2 $((bw * 1000000000)) $((30 * bw / 10)) $((bw * 4 * 1000000000)) $((30 * bw * 4 / 10))"
            kmin_map=$kmax_map
            pmax_map="2 $((bw * 1000000000)) 1.00 $((bw * 4 * 1000000000)) 1.00" ;;
        timely)
            mode=7 ai=$((10 * bw / 10)) hai=$((50 * bw / 10)) has_win=0 vwin=0 us=0 ack_prio=1 ;;
        dcqcn_paper)
            mode=1 ai=$((5 * bw / 25)) hai=$((50 * bw / 25)) has_win=0 vwin=0 us=0 ack_prio=1
            t_alpha=50 t_dec=50 t_inc=55 ;;
        dcqcn_vwin)
            mode=1 ai=$((5 * bw / 25)) hai=$((50 * bw / 25)) has_win=1 vwin=1 us=0 ack_prio=0 ;;
        timely_vwin)
            mode=7 ai=$((10 * bw / 10)) hai=$((50 * bw / 10)) has_win=1 vwin=1 us=0 ack_prio=1 ;;
    esac
    cat >"$out/config.txt" <<EOF
ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1

PACKET_PAYLOAD_SIZE 1000

TOPOLOGY_FILE $out/fat.txt
FLOW_FILE $out/flow.txt
TRACE_FILE $sim/mix/trace.txt
TRACE_OUTPUT_FILE $out/ns3.tr
FCT_OUTPUT_FILE $out/fct_ns3.txt
PFC_OUTPUT_FILE $out/pfc_ns3.txt

SIMULATOR_STOP_TIME $stop

CC_MODE $mode
ALPHA_RESUME_INTERVAL $t_alpha
RATE_DECREASE_INTERVAL $t_dec
CLAMP_TARGET_RATE 0
RP_TIMER $t_inc
EWMA_GAIN $g
FAST_RECOVERY_TIMES 1
RATE_AI ${ai}Mb/s
RATE_HAI ${hai}Mb/s
MIN_RATE 1000Mb/s
DCTCP_RATE_AI ${dctcp_ai}Mb/s

ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0

HAS_WIN $has_win
GLOBAL_T 1
VAR_WIN $vwin
FAST_REACT $us
U_TARGET 0.95
MI_THRESH 0
INT_MULTI $int_multi
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.01
PINT_PROB 1.0

RATE_BOUND 1

ACK_HIGH_PRIO $ack_prio

LINK_DOWN 0 0 0

ENABLE_TRACE 0

KMAX_MAP $kmax_map
KMIN_MAP $kmin_map
PMAX_MAP $pmax_map
BUFFER_SIZE $((16 * bw / 50))
QLEN_MON_FILE $out/qlen_ns3.txt
QLEN_MON_START 2000000000
QLEN_MON_END 2000000000
EOF
    for kv in ${NS3_SETS:-}; do
        grep -q "^${kv%%=*} " "$out/config.txt" || { echo "ns3-reference: NS3_SETS: no ${kv%%=*} in config.txt" >&2; exit 2; }
        sed -i "s|^${kv%%=*} .*|${kv%%=*} ${kv#*=}|" "$out/config.txt"
    done

    echo "ns3-reference: ns-3 (third) running, stop at $stop s simulated" >&2
    LD_LIBRARY_PATH="$sim/build" nice -n 19 /usr/bin/time -f '%e %U %S' -o "$out/ns3.time" \
        "$third" "$out/config.txt" >"$out/ns3.log" 2>&1 \
        || { tail -5 "$out/ns3.log" >&2; echo "ns3-reference: ns-3 failed, see $out/ns3.log" >&2; exit 1; }
    read -r ns3_wall ns3_cpu <<<"$(times_of "$out/ns3.time")"
    echo "$ns3_wall" >"$out/ns3.wall"
    echo "ns3-reference: ns-3 took $ns3_wall s of wall time ($ns3_cpu s of CPU)" >&2
fi

# roce sim: the shipped fat-tree scenario (HPCC's dcqcn timers and rates, ECN maps, 32 MB shared
# buffer, dynamic PFC thresholds) with the same topology and flow files, and two more settings
# of HPCC's profile that the scenario does not make: no byte counter (rdma-hw.cc's DCQCN
# increases on its 300 us timer only; NVIDIA's 32767-byte counter made roce sim 1.3-1.5x
# slower at p95/p99) and ECN marks decided at dequeue (switch-node.cc SwitchNotifyDequeue).
# No queue sampling, as ns-3's monitor is off. The other algorithms with run.py's values over
# the scenario's switches: T (HPCC) and the window's RTT (HPCC, DCTCP) are ns-3's maxRtt, the
# largest base RTT between two hosts of the topology (third.cc, GLOBAL_T 1), which ns-3 gives
# every QP; DCTCP's marking K = Kmin = Kmax = 30 KB x bw/10G, Pmax 1 (one K for every port:
# roce sim's marking has no per-rate map, ns-3's is 4x that at 400G). TIMELY has no window in
# run.py's profile (HAS_WIN 0): the QPs' window of 512 packets, which network runs have by
# default, is lifted to 65 536 (with it, roce sim's p99 of short flows was 0.68-0.77 x ns-3's:
# the window held back the queues TIMELY lets grow up to T_low). ROCE_SETS adds --set
# overrides (space-separated KEY=VALUE, applied after these), for experiments.
echo "ns3-reference: roce sim running" >&2
# Every flow's packets hash the UDP ports ns-3 gives that flow (third.cc: 10 000 + its number
# between its two hosts, the file's dport), so that its path is its ns-3 twin's wherever the two
# order a switch's next hops alike: network.ecmp_ports=hpcc.
sets=(--set "run.drain_us=$(python3 -c "print(int(${drain_ms} * 1000))")" --set run.qlen_every_us=0
      --set network.ecmp_ports=hpcc)
max_rtt() { # third.cc's maxRtt of the topology file, ns
    python3 -c 'import importlib.util, sys
spec = importlib.util.spec_from_file_location("cmp", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
topo = m.read_topology(sys.argv[2]); paths = m.Paths(topo)
hosts = [h for h in range(topo[0]) if h not in topo[1]]
print(max(2 * d[s] + t[s] for h in hosts for d, t, _ in [paths.from_host(h)] for s in hosts))' "$here/ns3-compare.py" "$1"
}
# ns-3's DCQCN decides a decrease on a tick of RATE_DECREASE_INTERVAL begun by the first CNP
# (CheckRateDecreaseMlx) and counts its increase stages by the timer alone (RateIncEventMlx).
ns3_dcqcn=(--set network.dcqcn.decrease_on_tick=true --set network.dcqcn.stages_by_timer=true)
case $cc in
    dcqcn)
        sets+=(--set network.dcqcn.rpg_byte_reset=4294967295 --set network.mark_at=dequeue
               "${ns3_dcqcn[@]}") ;;
    hpcc | hpcc_pint)
        rtt=$(max_rtt "$out/fat.txt")
        sets+=(--set "network.congestion=${cc/_/-}" --set network.mark_at=dequeue
               --set network.hpcc.eta=950 --set network.hpcc.max_stage=0
               --set network.hpcc.rate_ai=$((10 * bw / 25)) --set network.hpcc.min_rate=1000
               --set "network.hpcc.base_rtt_ns=$rtt" --set network.hpcc.fast_react=true) ;;
    dctcp)
        rtt=$(max_rtt "$out/fat.txt")
        sets+=(--set network.congestion=dctcp --set network.mark_at=dequeue
               --set network.dctcp.shift_g=4 --set network.dctcp.initial_alpha=1024
               --set network.dctcp.rate_ai=615 --set network.dctcp.min_rate=1000
               --set "network.dctcp.base_rtt_ns=$rtt"
               --set network.dctcp.ecn.kmin_bytes=$((30 * bw / 10 * 1000))
               --set network.dctcp.ecn.kmax_bytes=$((30 * bw / 10 * 1000))
               --set network.dctcp.ecn.pmax=1.0) ;;
    timely)
        sets+=(--set network.congestion=timely --set network.mark_at=dequeue
               --set network.timely.rate_ai=$((10 * bw / 10)) --set network.timely.rate_hai=$((50 * bw / 10))
               --set network.timely.t_low_ns=50000 --set network.timely.t_high_ns=500000
               --set network.timely.min_rtt_ns=20000 --set network.timely.alpha=875
               --set network.timely.beta=800 --set network.timely.hai_thresh=5
               --set network.timely.min_rate=1000 --set network.window_packets=65536) ;;
    dcqcn_paper)
        sets+=(--set network.dcqcn.rpg_byte_reset=4294967295 --set network.mark_at=dequeue "${ns3_dcqcn[@]}"
               --set network.dcqcn.dce_tcp_rtt=50 --set network.dcqcn.rate_reduce_monitor_period=50
               --set network.dcqcn.rpg_time_reset=55) ;;
    dcqcn_vwin)
        rtt=$(max_rtt "$out/fat.txt")
        sets+=(--set network.congestion=dcqcn-vwin --set network.dcqcn.rpg_byte_reset=4294967295
               "${ns3_dcqcn[@]}"
               --set network.mark_at=dequeue --set "network.dcqcn.window_rtt_ns=$rtt") ;;
    timely_vwin)
        rtt=$(max_rtt "$out/fat.txt")
        sets+=(--set network.congestion=timely-vwin --set network.mark_at=dequeue
               --set network.timely.rate_ai=$((10 * bw / 10)) --set network.timely.rate_hai=$((50 * bw / 10))
               --set network.timely.t_low_ns=50000 --set network.timely.t_high_ns=500000
               --set network.timely.min_rtt_ns=20000 --set network.timely.alpha=875
               --set network.timely.beta=800 --set network.timely.hai_thresh=5
               --set network.timely.min_rate=1000 --set network.window_packets=65536
               --set "network.timely.window_rtt_ns=$rtt") ;;
esac
rdir=roce self=''
for kv in ${ROCE_SETS:-}; do sets+=(--set "$kv"); rdir+="-${kv//[^A-Za-z0-9_.=]/_}"; done
flows=$out/flow.txt
if [ "$reuse" = 1 ] && [ "$jitter" != 0 ]; then # roce sim alone on moved flows
    self=$rdir
    rdir+=$jtag
    flows=$out/flow$jtag.txt
    jitter_flows "$out/flow.txt" "$flows"
    echo "ns3-reference: roce sim on $flows: every start moved later by 0-$jitter ns (seed $jseed)" >&2
fi
nice -n 19 /usr/bin/time -f '%e %U %S' -o "$out/$rdir.time" "$roce" sim "$repo/scenarios/fattree-fb30.toml" \
    --topology "$out/fat.txt" --flows "$flows" "${sets[@]}" \
    --out "$out/$rdir" >"$out/$rdir.log" 2>&1 \
    || { tail -5 "$out/$rdir.log" >&2; echo "ns3-reference: roce sim failed, see $out/$rdir.log" >&2; exit 1; }
read -r roce_wall roce_cpu <<<"$(times_of "$out/$rdir.time")"
echo "ns3-reference: roce sim took $roce_wall s of wall time ($roce_cpu s of CPU)" >&2

python3 "$here/ns3-compare.py" --topology "$out/fat.txt" --flows "$out/flow.txt" \
    --ns3 "$out/fct_ns3.txt" --ours "$out/$rdir/fct.txt" --summary "$out/$rdir/summary.json" \
    --ns3-wall "$ns3_wall" --ours-wall "$roce_wall" --ns3-cpu "$ns3_cpu" --ours-cpu "$roce_cpu" \
    --title "$what, $cc, seed $seed${NS3_SETS:+, ns-3 with $NS3_SETS}${ROCE_SETS:+, roce sim with $ROCE_SETS}${jtag:+, starts moved by 0-$jitter ns (seed $jseed)${self:+ for roce sim alone}}" \
    --md "$out/$rdir.md" --json "$out/$rdir.json"
cat "$out/$rdir.md"
if [ -n "${self:-}" ] && [ -s "$out/$self/fct.txt" ]; then
    # roce sim against itself: the unmoved flows' run against the moved ones'.
    python3 "$here/ns3-compare.py" --topology "$out/fat.txt" --flows "$out/flow.txt" \
        --ns3 "$out/$self/fct.txt" --ours "$out/$rdir/fct.txt" --names "roce sim,moved" \
        --title "$what, $cc: roce sim against itself with starts moved by 0-$jitter ns (seed $jseed)" \
        --md "$out/$rdir-self.md" --json "$out/$rdir-self.json"
    tail -1 "$out/$rdir-self.md"
fi
}
# On one line: bash parses the line whole before main runs, so an edit of the file during a run
# cannot make it read on from a moved offset afterwards.
main "$@"; exit
