#!/usr/bin/env bash
# How far a bin's tail moves by chance: the ns-3 reference (bench/ns3-reference.sh) run again
# with every flow's start moved later by 0..N ns (a seeded uniform draw per flow, far below a
# 1000-byte packet's 80 ns at 100 Gb/s), so that a bin that misses the 25 % tolerance against
# ns-3 can be told from one that misses it against the same simulator on the same workload.
#
#   bash bench/ns3-sensitivity.sh [--seeds 5] [--jitter-ns 5] [ns3-reference.sh's arguments]
#
#   --seeds      jitter seeds 1..K, one roce sim run each                       [5]
#   --jitter-ns  the largest move, 1-8 ns                                       [5]
#   the rest     as for bench/ns3-reference.sh (--cdf, --load, --ms, --cc, --out, --roce, ...):
#                they name a run of it that has finished (its --out holds flow.txt, ns-3's
#                fct_ns3.txt and roce/fct.txt); roce sim runs again (--reuse), ns-3 does not
#
# For each seed it prints how many of the 20 bins are within 25 % (p50, p95 and p99 each) and
# which miss, for: ns-3 against roce sim on the moved flows, and roce sim against itself (the
# unmoved flows' run against the moved ones'). Where ns-3 itself ran moved flows — a run of
# `bench/ns3-reference.sh --jitter-ns N --jitter-seed S` without --reuse into DIR-jitterN-sS
# beside the run's DIR (the default --out is named so) — ns-3 against itself too, and ns-3
# against roce sim with both on the moved flows. Writes sensitivity-jN.md into
# the run's directory and prints it. Not for CI: seconds per roce sim run, minutes for ns-3's.
set -euo pipefail
main() {
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
seeds=5 jitter=5 cdf=fb_hadoop load=0.3 ms=2 cc=dcqcn out=''
pass=()
while [ $# -gt 0 ]; do
    case $1 in
        --seeds) seeds=$2; shift 2 ;;
        --jitter-ns) jitter=$2; shift 2 ;;
        --cdf) cdf=$2; pass+=("$1" "$2"); shift 2 ;;
        --load) load=$2; pass+=("$1" "$2"); shift 2 ;;
        --ms) ms=$2; pass+=("$1" "$2"); shift 2 ;;
        --cc) cc=$2; pass+=("$1" "$2"); shift 2 ;;
        --out) out=$2; pass+=("$1" "$2"); shift 2 ;;
        --reuse) shift ;;
        --jitter-seed) echo "ns3-sensitivity: the seeds are 1..--seeds" >&2; exit 2 ;;
        -h|--help) usage; exit 0 ;;
        --*) [ $# -ge 2 ] || { echo "ns3-sensitivity: $1 needs a value (--help)" >&2; exit 2; }
             pass+=("$1" "$2"); shift 2 ;;
        *) echo "ns3-sensitivity: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
done
[[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "ns3-sensitivity: --seeds is a count, not '$seeds'" >&2; exit 2; }
[[ $jitter =~ ^[1-8]$ ]] || { echo "ns3-sensitivity: --jitter-ns from 1 to 8, not '$jitter'" >&2; exit 2; }
ns3_tag=''
for kv in ${NS3_SETS:-}; do ns3_tag+="-${kv//[^A-Za-z0-9_.=]/_}"; done
default_out=$repo/bench-out/ns3-$cdf-$load-${ms}ms-$cc$ns3_tag
out=${out:-$default_out}
rdir=roce
for kv in ${ROCE_SETS:-}; do rdir+="-${kv//[^A-Za-z0-9_.=]/_}"; done
for f in flow.txt fct_ns3.txt "$rdir.json" "$rdir/fct.txt"; do
    [ -s "$out/$f" ] || {
        echo "ns3-sensitivity: no $out/$f: run bench/ns3-reference.sh with these arguments first" >&2
        exit 2
    }
done

# One line of the table from a comparison's JSON: bins passed, then each miss as
# "bin: p95 0.74" (the percentiles outside the tolerance with their ratios).
row() {
    python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
miss = []
for b in r["bins"]:
    if not b["pass"]:
        bad = ["%s %.2f" % (q, v) for q, v in zip(("p50", "p95", "p99"), b["ratio"])
               if abs(v - 1) > r["tolerance"]]
        miss.append("%.2f: %s" % (b["percentile"], ", ".join(bad)))
print("%d of %d | %s" % (r["bins_passed"], len(r["bins"]), "; ".join(miss) or "none"))
PY
}

md=$out/sensitivity-j$jitter.md
{
    echo "### How far the bins move by chance: $cdf $load, $ms ms of arrivals, $cc"
    echo
    echo "Every flow's start moved later by 0-$jitter ns (seeded, the file's order kept)."
    echo
    echo "| comparison | seed | bins within 25 % | misses (bin: percentile ratio) |"
    echo "|---|---|---|---|"
    echo "| ns-3 against roce sim | unmoved | $(row "$out/$rdir.json") |"
} >"$md"
for s in $(seq 1 "$seeds"); do
    echo "ns3-sensitivity: seed $s of $seeds" >&2
    bash "$here/ns3-reference.sh" "${pass[@]}" --out "$out" --reuse --jitter-ns "$jitter" \
        --jitter-seed "$s" >/dev/null
    tag=-jitter$jitter-s$s
    {
        echo "| ns-3 against roce sim, moved | $s | $(row "$out/$rdir$tag.json") |"
        echo "| roce sim against itself, moved | $s | $(row "$out/$rdir$tag-self.json") |"
    } >>"$md"
    moved=$out$tag
    if [ -s "$moved/fct_ns3.txt" ]; then
        python3 "$here/ns3-compare.py" --topology "$out/fat.txt" --flows "$out/flow.txt" \
            --ns3 "$out/fct_ns3.txt" --ours "$moved/fct_ns3.txt" --names "ns-3,moved" \
            --title "$cdf $load, $ms ms of arrivals, $cc: ns-3 against itself with starts moved by 0-$jitter ns (seed $s)" \
            --md "$out/ns3$tag-self.md" --json "$out/ns3$tag-self.json"
        python3 "$here/ns3-compare.py" --topology "$out/fat.txt" --flows "$out/flow.txt" \
            --ns3 "$moved/fct_ns3.txt" --ours "$out/$rdir$tag/fct.txt" \
            --title "$cdf $load, $ms ms of arrivals, $cc: both with starts moved by 0-$jitter ns (seed $s)" \
            --md "$out/$rdir$tag-both.md" --json "$out/$rdir$tag-both.json"
        {
            echo "| ns-3 against itself, moved | $s | $(row "$out/ns3$tag-self.json") |"
            echo "| ns-3 against roce sim, both moved | $s | $(row "$out/$rdir$tag-both.json") |"
        } >>"$md"
    fi
done
cat "$md"
}
main "$@"; exit
