#!/usr/bin/env bash
# Soak (root, not CI): MINUTES of mixed RDMA traffic with 1 % loss over a veth pair between two
# network namespaces, every byte checked, and each process's memory and open files sampled
# every minute. Four `roce perf` pairs run side by side for the whole time (`-D`), each on
# addresses of its own:
#   - WRITE 64 KiB, 2 QPs, the server checks what landed (--check);
#   - READ 64 KiB, 2 QPs, the client checks every READ (--check);
#   - SEND 64 KiB, 2 QPs, the server checks every message (--check);
#   - FETCH_AND_ADD.
# nftables drops 1 % of the RoCEv2 datagrams leaving each veth, so go-back-N, implied NAKs and
# the retransmit timer work the whole time. Writes target/bench/soak.csv (minute, process,
# RSS in KiB, open fds) and the summary table into docs/benchmarks.md between the "soak"
# markers. Exit status 1 if a process failed or a check did not pass.
#   sudo bash bench/soak.sh 30
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 0; }
MINUTES=${1:-30}
# The pairs run half a minute past the last sample, so that every sample sees them all.
SECS=$((MINUTES * 60 + 30))
export DEBIAN_FRONTEND=noninteractive
command -v nft >/dev/null || { apt-get update -qq; apt-get install -y -qq nftables >/dev/null; }
cargo build -q --release -p roce
ROCE=$PWD/target/release/roce
OUT=$PWD/target/bench; mkdir -p "$OUT"
A=roce-soak-a.$$; B=roce-soak-b.$$
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    ip netns delete "$A" 2>/dev/null || true; ip netns delete "$B" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
ip netns add "$A"; ip netns add "$B"
ip -n "$A" link add va type veth peer name vb netns "$B"
for i in 1 2 3 4; do
    ip -n "$A" addr add "198.18.4.$i/24" dev va
    ip -n "$B" addr add "198.18.4.$((10 + i))/24" dev vb
done
for ns_dev in "$A va" "$B vb"; do
    set -- $ns_dev
    ip -n "$1" link set "$2" up; ip -n "$1" link set lo up
    ip netns exec "$1" nft add table netdev roce
    ip netns exec "$1" nft add chain netdev roce egress "{ type filter hook egress device \"$2\" priority 0; }"
    ip netns exec "$1" nft add rule netdev roce egress udp dport 4791 numgen random mod 100 '<' 1 drop
done

# name, server args, client args (the server of pair i is 198.18.4.(10+i), its client 198.18.4.i)
PAIRS=(
  "write|write -s 65536 -q 2 --check|write -s 65536 -q 2"
  "read|read -s 65536 -q 2|read -s 65536 -q 2 --check"
  "send|send -s 65536 -q 2 --check|send -s 65536 -q 2"
  "atomic|atomic|atomic"
)
declare -A PID
i=0
for pair in "${PAIRS[@]}"; do
    i=$((i + 1))
    IFS='|' read -r name server client <<<"$pair"
    port=$((19000 + i))
    # shellcheck disable=SC2086
    ip netns exec "$B" "$ROCE" perf $server -D "$SECS" -p "$port" --ip "198.18.4.$((10 + i))" --json \
        >"$OUT/soak-$name-server.json" 2>"$OUT/soak-$name-server.err" &
    PID[$name-server]=$!
    sleep 0.5
    # shellcheck disable=SC2086
    ip netns exec "$A" "$ROCE" perf $client "198.18.4.$((10 + i))" -D "$SECS" -p "$port" --ip "198.18.4.$i" --json \
        >"$OUT/soak-$name-client.json" 2>"$OUT/soak-$name-client.err" &
    PID[$name-client]=$!
done

echo "minute,process,rss_kib,fds" >"$OUT/soak.csv"
sample() {
    for proc in "${!PID[@]}"; do
        pid=${PID[$proc]}
        # The roce process is the child of `ip netns exec` (which execs it: same pid).
        [ -r "/proc/$pid/status" ] || continue
        rss=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status")
        fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
        echo "$1,$proc,$rss,$fds" >>"$OUT/soak.csv"
    done
}
for minute in $(seq 0 "$MINUTES"); do
    sample "$minute"
    echo "soak: minute $minute of $MINUTES" >&2
    [ "$minute" -lt "$MINUTES" ] && sleep 60
done

failed=0
for proc in "${!PID[@]}"; do
    if ! wait "${PID[$proc]}"; then
        echo "soak: $proc failed:" >&2; tail -3 "$OUT/soak-$proc.err" >&2; failed=1
    fi
done
for name in write send; do grep -q "every byte as sent" "$OUT/soak-$name-server.err" || failed=1; done
grep -q "every byte as sent" "$OUT/soak-read-client.err" || failed=1

python3 - "$OUT" "$MINUTES" "$failed" <<'EOF'
import csv, json, re, sys, pathlib, datetime, subprocess
out, minutes, failed = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
rows = list(csv.DictReader(open(out / "soak.csv")))
procs = sorted({r["process"] for r in rows})
def checked(name):
    side = "client" if name == "read" else "server"
    err = (out / f"soak-{name}-{side}.err").read_text(errors="replace")
    m = re.search(r"--check: (\d+) messages \((\d+) bytes\)", err)
    return f"{int(m.group(1))} messages, {int(m.group(2)) / 2**30:.1f} GiB" if m else "no"
def result(name):
    try:
        j = json.loads((out / f"soak-{name}-client.json").read_text().strip().splitlines()[-1])
    except Exception:
        return "—", "—"
    rate = (f"{j.get('msg_rate_mpps', 0) * 1e3:.0f} k msg/s" if name == "atomic"
            else f"{j.get('bw_avg_mb_s', 0):.0f} MB/s")
    return rate, str(j.get("retransmitted_packets", "—"))
lines = ["<!-- soak: generated by bench/soak.sh — do not edit by hand -->",
         f"Run of {datetime.date.today()} at commit "
         f"{subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}: "
         f"{minutes} minutes, 1 % of RoCEv2 datagrams dropped each way, four pairs at once. "
         f"RSS and open fds from /proc each minute; 'after warm-up' is minutes 2 to the end.",
         "",
         "| process | RSS at minute 1 KiB | RSS after warm-up, min–max KiB | open fds, min–max | goodput (client) | retransmitted (client) | every byte checked |",
         "|---|---|---|---|---|---|---|"]
for p in procs:
    r = [x for x in rows if x["process"] == p]
    rss = [int(x["rss_kib"]) for x in r if int(x["minute"]) >= 2] or [0]
    first = next((x["rss_kib"] for x in r if x["minute"] == "1"), "—")
    fds = [int(x["fds"]) for x in r] or [0]
    name, side = p.rsplit("-", 1)
    bw, rt = result(name) if side == "client" else ("", "")
    chk = checked(name) if (name != "atomic" and side == ("client" if name == "read" else "server")) else ""
    lines.append(f"| {p} | {first} | {min(rss)}–{max(rss)} | {min(fds)}–{max(fds)} | {bw} | {rt} | {chk} |")
lines.append("")
lines.append("Outcome: " + ("a process failed or a check did not pass" if failed else "every process ran to the end and every check passed") + ".")
lines.append("<!-- /soak -->")
table = "\n".join(lines)
print(table)
doc = pathlib.Path("docs/benchmarks.md")
text = doc.read_text()
start, end = text.find("<!-- soak:"), text.find("<!-- /soak -->")
if start >= 0 and end > start:
    text = text[:start] + table + text[end + len("<!-- /soak -->"):]
else:
    text = text.rstrip() + "\n\n## Soak\n\n`sudo bash bench/soak.sh 30`: see the script's head for what runs.\n\n" + table + "\n"
doc.write_text(text)
EOF
exit "$failed"
