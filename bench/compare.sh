#!/usr/bin/env bash
# Every performance comparison of roce-emu, side by side in one run, into docs/benchmarks.md:
#   1. the machine and the commit;
#   2. criterion: the ICRC, parsing, and the engine per 4 KiB packet and per 64-byte message
#      (medians of criterion's samples, from target/criterion/*/new/estimates.json);
#   3. callgrind: instructions per byte of the engine's data path (the difference of two runs
#      of the criterion-free stream in the engine bench, so set-up does not count);
#   4. scale: `cargo run --release -p roce-sim --example scale` (memory per idle QP with 10 000
#      QPs, goodput and Jain's index with 1 to 1000 active QPs);
#   5. veth (root): bench/veth.sh — our NIC over a veth pair against the offloaded UDP blast
#      (bench/blast), iperf3's UDP blast and TCP, and a UDP ping-pong (sockperf);
#   6. guests (root, QEMU; GUESTS=0 skips it, ~10 min under TCG): bench/guests.sh — our NIC
#      against our NIC and rxe against rxe in the interop harness's guests (their kernel comes
#      from tests/interop/setup.sh, or from the target/interop that INTEROP_CACHE names);
#   7. exec (root): bench/exec.sh — Debian's ib_write_bw and ib_send_lat under `roce exec` against
#      `roce perf write` and `roce perf send --lat` over one veth pair (the verbs layer's cost).
# Then the table of the performance goals, each with its figure and whether it is met, between
# the "goals" markers of docs/benchmarks.md. From a fresh clone:
#   sudo bash bench/compare.sh            # RUNS=3 medians; GUESTS=0 to leave the guests out
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
GUESTS=${GUESTS:-1}
export RUNS
mkdir -p target/bench
log() { printf '[compare %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

command -v valgrind >/dev/null || { apt-get update -qq; apt-get install -y -qq valgrind >/dev/null; }

log "criterion: wire and engine"
cargo bench -q -p roce-wire --bench wire -- --warm-up-time 1 --measurement-time 3 >/dev/null
cargo bench -q -p roce-core --bench engine -- --warm-up-time 1 --measurement-time 3 >/dev/null

log "callgrind: instructions per byte of the engine's data path"
engine_bin=$(cargo bench -q -p roce-core --bench engine --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "engine" and m.get("executable"):
        print(m["executable"])')
instructions() {  # instructions PACKETS SIZE: callgrind's total
    ROCE_ENGINE_PACKETS=$1 ROCE_ENGINE_SIZE=$2 valgrind --tool=callgrind \
        --callgrind-out-file=/dev/null "$engine_bin" 2>&1 >/dev/null |
        awk '/Collected/{print $NF}'
}
per_packet() {  # per_packet SIZE: instructions per data packet
    local a b
    a=$(instructions 20000 "$1"); b=$(instructions 10000 "$1")
    echo $(((a - b) / 10000))
}
ins4096=$(per_packet 262144)
ins64=$(per_packet 64)

log "scale example"
scale=$(cargo run -q --release -p roce-sim --example scale 2>&1)

veth_note="not run (needs root)"
if [ "$(id -u)" = 0 ]; then
    log "veth (bench/veth.sh, RUNS=$RUNS)"
    bash bench/veth.sh >/dev/null
    veth_note="bench/veth.sh, medians of $RUNS ($(cat target/bench/veth.steady 2>/dev/null))"
fi
exec_note="not run (needs root)"
rm -f target/bench/exec.env
if [ "$(id -u)" = 0 ]; then
    log "roce exec against roce perf (bench/exec.sh, RUNS=$RUNS)"
    # Its two lines (each ratio and whether its goal is met) go to the log.
    bash bench/exec.sh | grep -E 'goal' >&2
    exec_note="bench/exec.sh, medians of $RUNS ($(cat target/bench/exec.steady 2>/dev/null))"
fi
guests_note="not run"
if [ "$GUESTS" = 1 ] && [ "$(id -u)" = 0 ]; then
    log "guests (bench/guests.sh)"
    # From HEAD: the working tree has this run's docs changes by now.
    if ROCE_REV=HEAD bash bench/guests.sh > target/bench/guests.log 2>&1; then
        guests_note="bench/guests.sh"
        # A skip exits 0 (a fresh clone has no guest kernel: tests/interop/setup.sh builds one,
        # or INTEROP_CACHE names a target/interop that has it): say why in the table and here.
        if skip=$(grep -m1 '^SKIP:' target/bench/guests.log); then
            guests_note="bench/guests.sh skipped (${skip#SKIP: })"
            log "$guests_note"
        fi
    else
        guests_note="bench/guests.sh failed: see target/bench/guests.log"
    fi
fi

log "writing docs/benchmarks.md"
python3 - "$ins4096" "$ins64" "$scale" "$veth_note" "$guests_note" "$RUNS" "$exec_note" <<'PY'
import json, os, platform, re, subprocess, sys
ins4096, ins64, scale, veth_note, guests_note, runs, exec_note = sys.argv[1:]
ins4096, ins64 = int(ins4096), int(ins64)

def crit(name):
    # criterion's directory: the group, then the function's name with '/' as '_'.
    group, _, function = name.partition("/")
    path = f"target/criterion/{group}/{function.replace('/', '_')}/new/estimates.json"
    if not function:
        path = f"target/criterion/{group}/new/estimates.json"
    return json.load(open(path))["median"]["point_estimate"] if os.path.exists(path) else None

def env(path):
    if not os.path.exists(path):
        return {}
    return dict(line.strip().split("=", 1) for line in open(path) if "=" in line)

veth = env("target/bench/veth.env")
guests = env("target/bench/guests.env")
xenv = env("target/bench/exec.env")
f = lambda key, d: float(d[key]) if key in d else None

def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""

cpu = next((l.split(":", 1)[1].strip() for l in sh("lscpu").splitlines() if l.startswith("Model name")), platform.processor())
commit = sh("git", "rev-parse", "--short", "HEAD")
date = sh("date", "-u", "+%Y-%m-%d %H:%M UTC")

def verdict(ok):
    return "—" if ok is None else ("**met**" if ok else "**not met**")

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

rows = []

def versus(goal, ours, theirs, d, digits, unit, met):
    """A row comparing ours to theirs in d: both values, their ratio, and whether met(ratio)."""
    r = ratio(f(ours, d), f(theirs, d))
    rows.append((goal,
                 "—" if r is None else f"{f(ours, d):.{digits}f} vs {f(theirs, d):.{digits}f} {unit} = {r:.2f} ×",
                 verdict(None if r is None else met(r))))

# 1. veth goodput against the offloaded UDP blast (bench/blast), both backends.
for backend in ("udp", "raw"):
    r = ratio(f(f"{backend}4096", veth), f("oblast4112", veth))
    rows.append((f"RC WRITE 64 KiB, MTU 4096, veth, {backend.upper()} backend ≥ 0.9 × the offloaded UDP blast of 4112-byte datagrams",
                 "—" if r is None else f"{f(backend + '4096', veth):.0f} MB/s = {r:.2f} × {f('oblast4112', veth):.0f} MB/s",
                 verdict(None if r is None else r >= 0.9)))
# 1b. the other way the goodput goal is met: the kernel is the limit, our userspace time per
# packet below the anchor's kernel time per datagram (both senders' CPU from getrusage).
for backend in ("udp", "raw"):
    r = ratio(f(f"{backend}4096user", veth), f("oblast4112sys", veth))
    rows.append((f"… or, {backend.upper()} backend: the client's user CPU per packet < the blast sender's system CPU per datagram",
                 "—" if r is None else f"{f(backend + '4096user', veth):.3f} vs {f('oblast4112sys', veth):.3f} µs = {r:.2f} ×",
                 verdict(None if r is None else r < 1)))
# 2. against rxe in the guests.
versus("Our NIC vs rxe in the QEMU guests: ≥ 2 × rxe's ib_write_bw goodput",
       "roce_bw", "rxe_bw", guests, 0, "MB/s", lambda r: r >= 2)
versus("… and ≤ rxe's latency for 8-byte sends",
       "roce_lat", "rxe_lat", guests, 1, "µs", lambda r: r <= 1)
versus("… on the raw backend: ≥ 2 × rxe's ib_write_bw goodput",
       "roce_raw_bw", "rxe_bw", guests, 0, "MB/s", lambda r: r >= 2)
versus("… on the raw backend: ≤ rxe's latency for 8-byte sends",
       "roce_raw_lat", "rxe_lat", guests, 1, "µs", lambda r: r <= 1)
# 2b. the verbs layer: Debian's perftest under roce exec against roce perf, same NIC, same veth.
versus("`roce exec -- ib_write_bw` 64 KiB, MTU 4096, veth ≥ 0.9 × `roce perf write`",
       "exec_bw", "perf_bw", xenv, 0, "MB/s", lambda r: r >= 0.9)
versus("`roce exec -- ib_send_lat -s 8` typical latency ≤ 1.1 × `roce perf send --lat -s 8`",
       "exec_lat", "perf_lat", xenv, 1, "µs", lambda r: r <= 1.1)
# 2c. one NIC per address shared by every process, against a NIC of the process's own.
versus("Shared NIC (`roce exec`): `ib_write_bw` ≥ 0.9 × a NIC of its own (`--private-nic`)",
       "exec_bw", "private_bw", xenv, 0, "MB/s", lambda r: r >= 0.9)
versus("Shared NIC: `ib_send_lat -s 8` ≤ 1.1 × a NIC of its own",
       "exec_lat", "private_lat", xenv, 1, "µs", lambda r: r <= 1.1)
versus("Shared NIC: two `ib_write_bw` pairs at once ≥ one pair's goodput",
       "exec_bw2", "exec_bw", xenv, 0, "MB/s", lambda r: r >= 1)
# 2d. RDMA READ against WRITE at every size, and nothing sent again (bench/veth.sh).
sizes = (4096, 65536, 1048576, 67108864, 1073741824)
reads = [ratio(f(f"read{z}", veth), f(f"write{z}", veth)) for z in sizes]
resent = [f(f"readresent{z}", veth) for z in sizes]
if None not in reads and None not in resent:
    worst = min(range(len(sizes)), key=lambda i: reads[i])
    rows.append(("RDMA READ ≥ 0.9 × WRITE goodput at every size 4 KiB–1 GiB (veth, MTU 4096; -t 256 at 4 KiB, as -Q 100 asks), nothing sent again",
                 " / ".join(f"{r:.2f}" for r in reads) + f" × (worst at {sizes[worst]} bytes); sent again: {sum(resent):.0f}",
                 verdict(min(reads) >= 0.9 and sum(resent) == 0)))
else:
    rows.append(("RDMA READ ≥ 0.9 × WRITE goodput at every size 4 KiB–1 GiB (veth, MTU 4096; -t 256 at 4 KiB, as -Q 100 asks), nothing sent again", "—", verdict(None)))
# 3. small messages on one core.
m64 = crit("write_64_messages")
rate = None if m64 is None else 1e3 / m64
rows.append(("≥ 1 M 64-byte WRITEs per second on one core (engine, both NICs on the core)",
             "—" if rate is None else f"{rate:.2f} M/s ({m64:.0f} ns per message)",
             verdict(None if rate is None else rate >= 1)))
# The payload copies' pieces (crates/roce-core/src/copy.rs) must not depend on where the
# destination lies against the source: one `memcpy` of 4 KiB 12 bytes past its source modulo
# 4 KiB is `rep movsb` at its slowest on AMD's Zen, and an optimiser that merges the pieces
# back into one copy (LLVM's loop idiom pass did, under fat LTO) brings that back.
p12, p64, m12 = crit("copy_pieces_12"), crit("copy_pieces_64"), crit("copy_memcpy_12")
rows.append(("Payload copies in 1 KiB pieces as fast 12 bytes past their source modulo 4 KiB as 64 (`copy/pieces/12` ≤ 1.5 × `copy/pieces/64`)",
             "—" if None in (p12, p64) else f"{p12:.0f} vs {p64:.0f} ns" + ("" if m12 is None else f" (one `memcpy` at 12: {m12:.0f} ns)"),
             verdict(None if None in (p12, p64) else p12 <= 1.5 * p64)))
# Busy polling, as perftest spins on its CQ and a NIC never sleeps; the blast never waits either.
v64 = f("rate64busy", veth)
w64 = f("rate64", veth)
b96 = f("oblast96pps", veth)
rows.append(("64-byte WRITEs over the veth, one QP (`roce perf write -s 64 -t 256 --busy-poll`, perftest's -Q 100) ≥ 2 M messages/s",
             "—" if v64 is None else f"{v64:.2f} M/s" + ("" if w64 is None else f"; {w64:.2f} M/s waiting on the sockets")
             + ("" if b96 is None else f" (the offloaded blast of 96-byte datagrams: {b96:.2f} M/s)"),
             verdict(None if v64 is None else v64 >= 2)))
# 3b. latency over the veth against sockperf's one-way figure, and its tails.
# A spinning NIC against a spinning socket (sockperf --nonblocked on both sides): a blocking
# socket pays the kernel's wake-up, which the busy-polling NIC does not.
ulat = f("ulatspin", veth)
for key, what in (("rlatbusy", "with `--busy-poll`"), ("rlat", "waiting on completion events")):
    t, p99, p999 = f(key, veth), f(key + "99", veth), f(key + "999", veth)
    if key == "rlatbusy":
        r = ratio(t, ulat)
        rows.append(("8-byte SEND latency over the veth with `--busy-poll` ≤ 1.2 × sockperf's spinning one-way (`--nonblocked`), UDP backend",
                     "—" if r is None else f"{t:.1f} vs {ulat:.1f} µs = {r:.2f} ×", verdict(None if r is None else r <= 1.2)))
        traw = f("rawlatbusy", veth)
        r = ratio(traw, ulat)
        rows.append(("… raw backend on both sides",
                     "—" if r is None else f"{traw:.1f} vs {ulat:.1f} µs = {r:.2f} ×", verdict(None if r is None else r <= 1.2)))
    ok = None if None in (t, p99, p999) else (p99 <= 3 * t and p999 < 100)
    # The kernel's own tails in the same mode, beside ours: sockperf spinning for the busy-polling
    # NIC, blocking for the NIC that waits on completion events (its wake-ups are the kernel's).
    anchor = "ulatspin" if key == "rlatbusy" else "ulat"
    a99, a999 = f(anchor + "99", veth), f(anchor + "999", veth)
    mode = "spinning" if key == "rlatbusy" else "blocking"
    beside = "" if None in (a99, a999) else f" (sockperf {mode}: p99 {a99:.1f}, p99.9 {a999:.1f} µs)"
    rows.append((f"… {what}: p99 ≤ 3 × the median and p99.9 < 100 µs",
                 "—" if ok is None else f"median {t:.1f}, p99 {p99:.1f} ({p99 / t:.1f} ×), p99.9 {p999:.1f} µs{beside}",
                 verdict(ok)))
# 4. scale.
idle = re.search(r"an idle QP, whole NIC: (\d+) bytes", scale)
rows.append(("10 000 QPs on one NIC, ≤ 4 KiB per idle QP",
             "—" if not idle else f"{idle.group(1)} bytes per idle QP",
             verdict(None if not idle else int(idle.group(1)) <= 4096)))
table = re.findall(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)", scale, re.M)
if table:
    worst_virtual = min(float(t[2]) for t in table)
    worst_wall = min(float(t[4]) for t in table)
    jain = min(float(t[5]) for t in table)
    rows.append(("Aggregate goodput with 1/10/100/1000 active QPs within 10 % of 1 QP (link's time)",
                 f"worst {worst_virtual:.1f} %", verdict(worst_virtual >= 90)))
    rows.append(("… in wall-clock time (the engine's CPU cost per QP)",
                 f"worst {worst_wall:.1f} %", verdict(worst_wall >= 90)))
    rows.append(("Per-QP fairness, Jain ≥ 0.95", f"worst {jain:.4f}", verdict(jain >= 0.95)))
qs = [f(f"q{q}", veth) for q in (1, 10, 100, 1000)]
if all(x is not None for x in qs):
    worst = min(x / qs[0] for x in qs[1:])
    jains = [f(f"jain{q}", veth) for q in (1, 10, 100, 1000)]
    rows.append(("Aggregate goodput with 1/10/100/1000 QPs over the veth within 10 % of 1 QP, Jain ≥ 0.95 (`roce perf write -q N`)",
                 " / ".join(f"{x:.0f}" for x in qs) + f" MB/s: worst {100 * worst:.0f} % of 1 QP; Jain ≥ {min(jains):.4f}",
                 verdict(worst >= 0.9 and min(jains) >= 0.95)))
    # The same working set through the kernel alone: the blast over N buffers of 64 KiB.
    bs = [f(f"oblastbuf{q}", veth) for q in (1, 10, 100, 1000)]
    if all(x is not None for x in bs):
        shares = [(q / qs[0]) / (b / bs[0]) for q, b in zip(qs[1:], bs[1:])]
        rows.append(("… against the offloaded blast moving the same working set (N buffers of 64 KiB, `roce-blast --buffers N`): each N-QP share of 1 QP ≥ 0.9 × the blast's N-buffer share of 1 buffer",
                     " / ".join(f"{b:.0f}" for b in bs) + " MB/s = " + " / ".join(f"{b / bs[0]:.2f}" for b in bs[1:])
                     + " × 1 buffer; ours " + " / ".join(f"{x:.2f}" for x in shares) + " × the blast's share",
                     verdict(min(shares) >= 0.9)))
# 5. CPU.
rows.append(("CPU per byte of the data path (callgrind; perf stat has no cycle counter here)",
             f"{ins4096 / 4096:.2f} instructions/byte at 4 KiB packets ({ins4096} per packet); "
             f"{ins64 / 64:.0f} instructions/byte for 64-byte WRITEs ({ins64} per message)", "reported"))

lines = [
    "<!-- goals: generated by bench/compare.sh — do not edit by hand -->",
    f"Run of {date} at commit {commit} on {cpu}, {os.cpu_count()} cores, Linux {platform.release()}; "
    f"veth: {veth_note}; roce exec: {exec_note}; guests: {guests_note}.",
    "",
    "| goal | measured | |",
    "|---|---|---|",
] + [f"| {g} | {m} | {v} |" for g, m, v in rows] + [
    "",
    "Criterion medians of this run (ns): " + ", ".join(
        f"`{n}` {crit(n):.0f}" for n in ("icrc/icrc_in_place/4096", "icrc/crc32fast/4096", "parse/repr/write_first",
                                         "write_4096/icrc_check", "write_4096/icrc_skip_rx", "write_64_messages",
                                         "copy_memcpy_12", "copy_pieces_12")
        if crit(n) is not None) + ".",
    "",
    "The scale example's output:",
    "",
    "```",
    scale.strip(),
    "```",
    "<!-- /goals -->",
]
block = "\n".join(lines)
path = "docs/benchmarks.md"
text = open(path).read()
if "<!-- goals:" in text:
    text = re.sub(r"<!-- goals:.*?<!-- /goals -->", lambda _: block, text, flags=re.S)
else:
    head, _, rest = text.partition("\n## ")
    text = head + "\n## Performance goals (bench/compare.sh)\n\n`sudo bash bench/compare.sh`\n\n" + block + "\n\n## " + rest
open(path, "w").write(text)
print(block)
PY
