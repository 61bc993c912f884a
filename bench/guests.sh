#!/usr/bin/env bash
# Our NIC against our NIC vs the kernel's rxe against rxe, in the same pair of QEMU guests that
# the interop harness boots (tests/interop/lib.sh: Debian 12's kernel, rxe0 on eth0), side by
# side in one run, medians of RUNS runs:
#   - RC WRITE goodput, 64 KiB messages, path MTU 4096 and 1024: ib_write_bw between the two rxe
#     devices, then `roce perf write` (UDP backend) between two copies of our static binary;
#   - 8-byte SEND latency: ib_send_lat -s 8 (t_typical), then `roce perf send --lat -s 8`;
#   - ours again on the raw backend (WRITE at MTU 4096, and the latency).
# Guest 1 (198.18.0.12) is the server, guest 2 (198.18.0.13) the client, both on one bridge in a
# network namespace of this script's own. Before the runs, one cross pair (ib_write_bw on rxe in
# guest 1, `roce perf write` in guest 2) proves that the two stacks agree on the wire.
# Writes the results into docs/benchmarks.md between the "guests" markers.
#   sudo RUNS=3 bash bench/guests.sh
# Knobs: RUNS (3), BW_ITERS (ib_write_bw / roce perf write -n, 1000), LAT_ITERS (1000), the
# harness's INTEROP_* variables (INTEROP_GUEST_CPUS, INTEROP_GUEST_MEM, INTEROP_ACCEL, names),
# ROCE_REV (build that commit, from a `git archive` of it, instead of the working tree),
# ROCE_STATIC (a static roce binary to use instead of building one), DOC (the file that gets the
# block, docs/benchmarks.md).
# Exit 0 with a `SKIP:` line when it cannot run here (no root, no QEMU, no guest artifacts).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
T_START=$(date +%s)

# Names of our own, so that this never meets the interop CI's roce-interop-host/-peer.
: "${INTEROP_NS:=roce-bench-guests}"
: "${INTEROP_PEER_NS:=roce-bench-guests-peer}"
: "${INTEROP_BR:=rgbr0}"
: "${INTEROP_TAP:=rgtap0}"
: "${INTEROP_TAP2:=rgtap1}"
: "${INTEROP_PEER_IF:=rgpeer0}"
export INTEROP_NS INTEROP_PEER_NS INTEROP_BR INTEROP_TAP INTEROP_TAP2 INTEROP_PEER_IF
# shellcheck source=tests/interop/lib.sh
. "$REPO/tests/interop/lib.sh"

RUNS=${RUNS:-3}
BW_ITERS=${BW_ITERS:-1000}
LAT_ITERS=${LAT_ITERS:-1000}
SIZE=65536
MTUS=(4096 1024)
DOC=${DOC:-$REPO/docs/benchmarks.md}
TOOL_TIMEOUT=90   # seconds for one tool in the guest (rxe retries for ever when a peer is gone)

need_root
[ -c /dev/net/tun ] || skip "no /dev/net/tun: cannot give the guests tap devices"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (run tests/interop/setup.sh)"
guest_artifacts_present || skip "no guest kernel/initramfs in $INTEROP_CACHE/guest (run tests/interop/setup.sh)"
command -v python3 >/dev/null || skip "python3 missing (it reads the JSON results)"

# Our binary goes into the guests through their 9p share. A static one runs whatever the guest's
# userland is; the host's dynamic release build would need the same glibc in the guest.
if [ -n "${ROCE_STATIC:-}" ]; then
    [ -x "$ROCE_STATIC" ] || die "ROCE_STATIC=$ROCE_STATIC is not an executable"
    SOURCE="prebuilt $ROCE_STATIC"
else
    command -v cargo >/dev/null || skip "no cargo to build the static roce binary (or set ROCE_STATIC)"
    TRIPLE=x86_64-unknown-linux-gnu
    grep -qx "$TRIPLE" <<<"$(rustup target list --installed 2>/dev/null || echo "$TRIPLE")" ||
        skip "rust target $TRIPLE not installed"
    SRC=$REPO
    SOURCE=$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo "working tree")
    if [ -n "${ROCE_REV:-}" ]; then
        # A copy of the commit's files (no worktree: nothing changes in the repository).
        SOURCE=$(git -C "$REPO" rev-parse --short "$ROCE_REV^{commit}") || die "no commit $ROCE_REV"
        SRC=$(mktemp -d /tmp/roce-bench-src.XXXXXX)
        git -C "$REPO" archive "$SOURCE" | tar -x -C "$SRC"
    fi
    log "building a static roce from $SOURCE (target/static)"
    # --target keeps crt-static away from build scripts and proc macros; a target dir of its own
    # keeps the normal release build's artefacts as they are.
    rc=0
    (cd "$SRC" && RUSTFLAGS='-C target-feature=+crt-static' cargo build -q --release --locked \
        -p roce --target "$TRIPLE" --target-dir "$REPO/target/static") || rc=$?
    [ "$SRC" = "$REPO" ] || rm -rf "$SRC"
    [ "$rc" = 0 ] || die "cannot build the static roce binary"
    ROCE_STATIC=$REPO/target/static/$TRIPLE/release/roce
fi
if command -v readelf >/dev/null && grep -q 'program interpreter' <<<"$(readelf -l "$ROCE_STATIC")"; then
    die "$ROCE_STATIC is dynamically linked"
fi

# ---------------------------------------------------------------------------------------------
# The guest pair. No bridge capture here (the interop scripts take one): tcpdump would take CPU
# from the two guests that are being measured.
interop_traps
ip netns add "roce-bench-probe.$$" 2>/dev/null || skip "cannot create network namespaces"
ip netns delete "roce-bench-probe.$$"
net_up
net_add_tap "$INTEROP_TAP2"
new_run
ACCEL=$(pick_accel)
# Both guests boot at once: under TCG a boot takes 10-20 s of one core each.
guest_start
guest2 guest_start
rc=0; guest_wait_ready || rc=$?
[ "$rc" = 0 ] || { [ "$rc" = 2 ] && skip "QEMU could not run the guest here (see $INTEROP_RUN/qemu.log)"; die "guest 1 did not become ready (rc=$rc)"; }
rc=0; guest2 guest_wait_ready || rc=$?
[ "$rc" = 0 ] || die "guest 2 did not become ready (rc=$rc)"
G1_IP=$INTEROP_GUEST_IP
G2_IP=$INTEROP_GUEST2_IP

# Helpers for the guests' jobs, sourced by every job in both guests.
for share in "$INTEROP_RUN/share" "$INTEROP_RUN2/share"; do
    cp "$ROCE_STATIC" "$share/roce"
    cat >"$share/bench.sh" <<'GUEST'
# Sourced by bench/guests.sh's jobs in the guest (busybox sh).
# cpu_around CMD...: runs CMD between two readings of the guest's CPU time (/proc/stat's first
# line: user nice system idle iowait irq softirq, in ticks), printed as "cpu-before" and
# "cpu-after" lines. One vCPU: that is where the tool and the kernel's work for it went.
cpu_around() {
    echo "cpu-before $(head -1 /proc/stat)"
    "$@"; rc=$?
    echo "cpu-after $(head -1 /proc/stat)"
    return "$rc"
}
# client CMD...: runs a client, again while its server is not listening yet (the server's job
# starts up to 200 ms late and needs a moment under TCG); at most 20 tries.
client() {
    i=0
    while :; do
        "$@" >/tmp/client.out 2>&1; rc=$?
        if [ "$rc" = 0 ] || [ "$i" -ge 20 ] || ! grep -qi "couldn't connect" /tmp/client.out; then
            cat /tmp/client.out; return "$rc"
        fi
        i=$((i + 1)); sleep 0.5
    done
}
# rxe_gid: index of rxe0's RoCE v2 GID ::ffff:a.b.c.d (one grep over the 1024 entries).
rxe_gid() {
    p=/sys/class/infiniband/rxe0/ports/1
    for f in $(grep -l '^0000:0000:0000:0000:0000:ffff:' $p/gids/* 2>/dev/null); do
        n=${f##*/}
        [ "$(cat $p/gid_attrs/types/"$n" 2>/dev/null)" = "RoCE v2" ] && { echo "$n"; return 0; }
    done
    return 1
}
# rxe_off: removes rxe0 and unloads rdma_rxe: its kernel socket holds UDP port 4791 on every
# address, which our NIC's UDP backend needs.
rxe_off() {
    rdma link delete rxe0 2>/dev/null
    # The device goes away asynchronously: the module can be busy for a moment.
    i=0
    until rmmod rdma_rxe 2>/dev/null; do
        [ "$i" -lt 50 ] || { rmmod rdma_rxe; return 1; }
        i=$((i + 1)); sleep 0.1
    done
}
# rxe_on: loads rdma_rxe again, adds rxe0 on eth0 and waits for its IPv4 GID and MTU 4096.
rxe_on() {
    insmod "/usr/lib/modules/$(uname -r)/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" || return 1
    rdma link add rxe0 type rxe netdev eth0 || return 1
    i=0
    until rxe_gid >/dev/null && ibv_devinfo -d rxe0 2>/dev/null | grep -q 'active_mtu:.*4096'; do
        [ "$i" -lt 100 ] || return 1
        i=$((i + 1)); sleep 0.1
    done
    rxe_gid
}
GUEST
done

# Jumbo frames everywhere, so that rxe's active MTU becomes 4096 (it needs netdev MTU >= IB MTU
# + 80); both path MTUs are then offered by the tools.
net_mtu 9000
ns ip link set "$INTEROP_TAP2" mtu 9000
# Socket buffers: our UDP backend asks for 8 MiB each way (a window of 128 64-KiB WRITEs is 8 MiB
# in flight) and the kernel caps that at rmem_max/wmem_max, 208 KiB by default, which drops
# datagrams and costs retransmissions. rxe takes its packets in softirq, without a socket buffer.
# shellcheck disable=SC2016 # expanded by the guest's shell
SETUP='. /share/bench.sh; ip link set eth0 mtu 9000 && cp /share/roce /tmp/roce &&
    sysctl -qw net.core.rmem_max=8388608 net.core.wmem_max=8388608 &&
    i=0; until ibv_devinfo -d rxe0 | grep -q "active_mtu:.*4096"; do [ $i -lt 100 ] || exit 1; i=$((i+1)); sleep 0.1; done;
    rxe_gid'
G1=$(run_in_guest -t 60 "$SETUP") || die "guest 1 set-up failed: $G1"
G2=$(guest2 run_in_guest -t 60 "$SETUP") || die "guest 2 set-up failed: $G2"
log "guests ready: $G1_IP (GID $G1), $G2_IP (GID $G2), $ACCEL, $INTEROP_GUEST_CPUS vCPU and $INTEROP_GUEST_MEM MiB each"

# ---------------------------------------------------------------------------------------------
# The cells. Each prints one figure on standard output (MB/s = 10^6 bytes/s, or µs) and the
# tools' output on standard error; the server runs in guest 1, the client in guest 2.

# perftest prints MB/sec as 2^20 bytes per second; ours (and this table) use 10^6.
mib_to_mb() { awk '{printf "%.1f", $1 * 1.048576}'; }

# perftest cells. perftest measures the CPU clock before it reports and gives up when its samples
# disagree ("Can't produce a report", frequent in a loaded TCG guest): the transfer worked, the
# timing did not. Such a run is repeated, twice at most.
perftest_pair() {  # perftest_pair TOOL ARGS...: prints the client's output
    local tool=$1; shift
    local args="$*" try out rc job
    for try in 1 2 3; do
        job=$(run_peer_in_guest ". /share/bench.sh; cpu_around timeout $TOOL_TIMEOUT $tool -d rxe0 -x $G1 $args")
        sleep 0.5
        rc=0
        out=$(guest2 run_in_guest -t $((TOOL_TIMEOUT + 30)) \
            ". /share/bench.sh; client cpu_around timeout $TOOL_TIMEOUT $tool -d rxe0 -x $G2 $args $G1_IP") || rc=$?
        guest_wait "$job" $((TOOL_TIMEOUT + 10)) >"$INTEROP_RUN/server.out" || rc=$?
        printf '%s\n' "$out" >&2
        if [ "$rc" = 0 ]; then cpu_split "$out"; printf '%s\n' "$out"; return 0; fi
        grep -q "Can't produce a report" <<<"$out$(cat "$INTEROP_RUN/server.out")" || break
        log "  $tool: perftest could not time the run (CPU clock check); again ($try)"
    done
    log "  $tool $args failed (rc=$rc); server said:"; sed 's/^/    /' "$INTEROP_RUN/server.out" >&2
    return 1
}
rxe_write() {  # rxe_write MTU: BW average of ib_write_bw's client, MB/s
    local out
    out=$(perftest_pair ib_write_bw -F -s "$SIZE" -m "$1" -n "$BW_ITERS") || return 1
    awk -v s="$SIZE" '$1 == s && NF >= 5 {print $4; exit}' <<<"$out" | mib_to_mb
}
rxe_lat() {  # typical 8-byte SEND latency of ib_send_lat's client, µs
    local out
    out=$(perftest_pair ib_send_lat -F -s 8 -n "$LAT_ITERS") || return 1
    awk '$1 == 8 && NF >= 7 {print $5; exit}' <<<"$out"
}

# roce perf cells: server ARGS in guest 1, client ARGS in guest 2, then FIELD of the client's JSON.
roce_pair() {  # roce_pair FIELD ARGS... (RAW=1: both NICs on the raw backend, on eth0, playing
    # $G1_RAW and $G2_RAW, addresses no guest kernel has; the out-of-band TCP still goes to $G1_IP)
    local field=$1; shift
    local args="$*" out rc=0 job server="" client=""
    if [ "${RAW:-0}" = 1 ]; then
        server="--backend raw --dev eth0 --ip $G1_RAW"; client="--backend raw --dev eth0 --ip $G2_RAW"
    fi
    job=$(run_peer_in_guest ". /share/bench.sh; cpu_around timeout $TOOL_TIMEOUT /tmp/roce perf $args $server --json")
    sleep 0.5
    out=$(guest2 run_in_guest -t $((TOOL_TIMEOUT + 30)) \
        ". /share/bench.sh; client cpu_around timeout $TOOL_TIMEOUT /tmp/roce perf ${args/ / $G1_IP } $client --json") || rc=$?
    guest_wait "$job" $((TOOL_TIMEOUT + 10)) >"$INTEROP_RUN/server.out" || rc=$?
    printf '%s\n' "$out" >&2
    if [ "$rc" != 0 ]; then
        log "  roce perf $args failed (rc=$rc); server said:"; sed 's/^/    /' "$INTEROP_RUN/server.out" >&2
        return 1
    fi
    cpu_split "$out"
    # The figure, then the packets our client retransmitted.
    python3 -c 'import json,sys
f = sys.argv[1]
r = [json.loads(l) for l in sys.stdin.read().splitlines() if l.startswith("{")][-1]
print("%.1f" % r[f] if f.startswith("bw") else "%.2f" % r[f], r["retransmitted_packets"])' "$field" <<<"$out"
}
# cpu_split CLIENT_OUTPUT: the CPU ticks of the client's guest and of the server's
# ($INTEROP_RUN/server.out) between their cpu_around readings, as "user system softirq idle"
# (nice counted as user, iowait as idle, irq as softirq), one line each, into
# $INTEROP_RUN/cpu.last for `cell` (which runs this in a subshell and cannot take variables).
cpu_split() {
    local side
    for side in "$1" "$(cat "$INTEROP_RUN/server.out")"; do
        awk '$1 == "cpu-before" {for (i = 3; i <= 9; i++) b[i] = $i}
             $1 == "cpu-after" {for (i = 3; i <= 9; i++) a[i] = $i}
             END {for (i = 3; i <= 9; i++) t[i] = a[i] - b[i]
                  print t[3] + t[4], t[5], t[8] + t[9], t[6] + t[7]}' <<<"$side"
    done >"$INTEROP_RUN/cpu.last"
}
ours_write() { roce_pair bw_avg_mb_s write -s "$SIZE" -m "$1" -n "$BW_ITERS"; }
# --busy-poll: ib_send_lat polls its CQ in a loop (perftest's default), so ours does too.
ours_lat() { roce_pair t_typical_us send --lat -s 8 -n "$LAT_ITERS" --busy-poll; }
# The raw backend: its receive ring is read in place, so a spinning poll makes no system call
# (each one an emulated crossing under TCG).
ours_raw_write() { RAW=1 ours_write "$1"; }
ours_raw_lat() { RAW=1 ours_lat; }
G1_RAW=198.18.0.22; G2_RAW=198.18.0.23

both_guests() {  # both_guests CMD: the same job in both guests, at the same time
    local j1 j2 rc=0
    j1=$(run_peer_in_guest ". /share/bench.sh; $1")
    j2=$(guest2 run_peer_in_guest ". /share/bench.sh; $1")
    guest_wait "$j1" 60 >&2 || rc=1
    guest2 guest_wait "$j2" 60 >&2 || rc=1
    return "$rc"
}

# Frames the host dropped on the way into the guests: when a guest's virtio-net receive ring is
# full, QEMU stops reading the tap and the tap's queue overflows (the loss in these runs).
tap_drops() {
    local n=0 t
    for t in "$INTEROP_TAP" "$INTEROP_TAP2"; do
        n=$((n + $(ns cat "/sys/class/net/$t/statistics/tx_dropped")))
    done
    echo "$n"
}

# add4 "A B C D" "E F G H": the sums, element by element.
add4() { awk -v a="$1" -v b="$2" 'BEGIN{split(a, x, " "); split(b, y, " "); print x[1]+y[1], x[2]+y[2], x[3]+y[3], x[4]+y[4]}'; }

# Timed cell: appends its figure to R[KEY], its wall time to W[KEY], the frames dropped at the
# taps during it to D[KEY] and, when the cell prints a second number (our retransmitted packets),
# that to X[KEY].
declare -A R W X D CPU_C CPU_S
cell() {  # cell KEY FUNCTION ARGS...
    local key=$1; shift
    local t0 out v x d0 c s
    t0=$(date +%s.%N)
    d0=$(tap_drops)
    rm -f "$INTEROP_RUN/cpu.last"
    out=$("$@") || die "cell $key ($*) failed"
    if [ -f "$INTEROP_RUN/cpu.last" ]; then
        { read -r c; read -r s; } <"$INTEROP_RUN/cpu.last"
        CPU_C[$key]=$(add4 "${CPU_C[$key]:-0 0 0 0}" "$c")
        CPU_S[$key]=$(add4 "${CPU_S[$key]:-0 0 0 0}" "$s")
    fi
    read -r v x <<<"$out"
    [ -n "$v" ] || die "cell $key ($*) printed no figure"
    R[$key]+="$v "
    [ -z "$x" ] || X[$key]+="$x "
    D[$key]+="$(( $(tap_drops) - d0 )) "
    W[$key]+="$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}') "
    log "  $key: $v${x:+ (retransmitted: $x)}, dropped at the taps: $(( $(tap_drops) - d0 ))"
}

# ---------------------------------------------------------------------------------------------
# Cross pair, once: rxe in guest 1 serves ib_write_bw, our NIC in guest 2 is the client.
T_READY=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "cross pair: ib_write_bw on rxe ($G1_IP) <- roce perf write ($G2_IP)"
guest2 run_in_guest -t 60 '. /share/bench.sh; rxe_off' >&2 || die "cannot unload rxe in guest 2"
job=$(run_peer_in_guest "timeout $TOOL_TIMEOUT ib_write_bw -d rxe0 -x $G1 -F -s $SIZE -m 4096 -n $BW_ITERS")
sleep 0.5
CROSS=$(guest2 run_in_guest -t $((TOOL_TIMEOUT + 30)) \
    ". /share/bench.sh; client timeout $TOOL_TIMEOUT /tmp/roce perf write $G1_IP -s $SIZE -m 4096 -n $BW_ITERS --json") ||
    { printf '%s\n' "$CROSS" >&2; guest_wait "$job" 5 >&2 || true; die "cross pair failed: rxe and our NIC do not agree"; }
CROSS_SERVER=$(guest_wait "$job" $((TOOL_TIMEOUT + 10))) ||
    { printf '%s\n' "$CROSS_SERVER" >&2; die "cross pair: ib_write_bw (server, rxe) failed"; }
printf '%s\n%s\n' "$CROSS" "$CROSS_SERVER" >&2
CROSS_MB=$(python3 -c 'import json,sys
print("%.1f" % [json.loads(l) for l in sys.stdin.read().splitlines() if l.startswith("{")][-1]["bw_avg_mb_s"])' <<<"$CROSS")
CROSS_RXE=$(awk -v s="$SIZE" '$1 == s && NF >= 5 {print $4; exit}' <<<"$CROSS_SERVER" | mib_to_mb)
log "cross pair passed: roce perf $CROSS_MB MB/s, ib_write_bw (server) ${CROSS_RXE:-?} MB/s"
G2=$(guest2 run_in_guest -t 60 '. /share/bench.sh; rxe_on') || die "cannot load rxe again in guest 2"

# The runs interleave the two stacks, so that a change in the host's load (it is shared) falls on
# both. rxe is unloaded for our runs and loaded again afterwards (see rxe_off).
for run in $(seq "$RUNS"); do
    log "run $run/$RUNS: rxe <-> rxe"
    for mtu in "${MTUS[@]}"; do cell "rxe_write_$mtu" rxe_write "$mtu"; done
    cell rxe_lat rxe_lat
    both_guests rxe_off || die "cannot unload rxe"
    log "run $run/$RUNS: roce <-> roce"
    for mtu in "${MTUS[@]}"; do cell "ours_write_$mtu" ours_write "$mtu"; done
    cell ours_lat ours_lat
    log "run $run/$RUNS: roce <-> roce, raw backend"
    cell ours_raw_write_4096 ours_raw_write 4096
    cell ours_raw_lat ours_raw_lat
    if [ "$run" -lt "$RUNS" ]; then
        both_guests rxe_on || die "cannot load rxe again"
        G1=$(run_in_guest -t 30 '. /share/bench.sh; rxe_gid'); G2=$(guest2 run_in_guest -t 30 '. /share/bench.sh; rxe_gid')
    fi
done
T_DONE=$(date +%s)
# Where packets could have been lost inside the guests, over the whole run (both stacks): drops
# in eth0's qdisc, UDP receive errors (InErrors, RcvbufErrors) and the input backlog's drops.
# shellcheck disable=SC2016 # expanded by the guest's shell
COUNTERS='q=$(tc -s qdisc show dev eth0 | sed -n "s/.*(dropped \([0-9]*\),.*/\1/p" | awk "{s+=\$1} END{print s+0}")
    u=$(awk "/^Udp:/ && \$2 ~ /^[0-9]/ {print \$4, \$6}" /proc/net/snmp)
    s=0; while read -r _ d _; do s=$((s + 0x$d)); done </proc/net/softnet_stat
    echo "qdisc drops $q, UDP InErrors ${u% *}, RcvbufErrors ${u#* }, backlog drops $s"'
C1=$(run_in_guest -t 30 "$COUNTERS") || C1="unknown"
C2=$(guest2 run_in_guest -t 30 "$COUNTERS") || C2="unknown"
log "guest 1: $C1; guest 2: $C2"
guest2 guest_stop
guest_stop

# ---------------------------------------------------------------------------------------------
# The block in docs/benchmarks.md.
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
med() { median <<<"${R[$1]}"; }
# The ratio unrounded, for the verdicts (1.003 is not within "≤ 1" because it prints as 1.00),
# and as printed.
exact() { awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN{printf "%.9f", a/b}'; }
ratio() { printf '%.2f' "$(exact "$1" "$2")"; }
all() { sed 's/ $//; s/ /, /g' <<<"${R[$1]}"; }
xs() { sed 's/ $//; s/ /, /g' <<<"${X[$1]:-}"; }
ds() { sed 's/ $//; s/ /, /g' <<<"${D[$1]:-}"; }
secs() { median <<<"${W[$1]}"; }
# cpu KEY C|S: where the client's (C) or the server's (S) guest CPU went over all runs of KEY.
cpu() {
    local v
    if [ "$2" = C ]; then v=${CPU_C[$1]:-}; else v=${CPU_S[$1]:-}; fi
    awk -v v="$v" 'BEGIN{n = split(v, t, " "); s = t[1] + t[2] + t[3] + t[4]
        if (n < 4 || s <= 0) {print "?"; exit}
        printf "user %.0f %%, kernel %.0f %%, softirq %.0f %%, idle %.0f %%", 100*t[1]/s, 100*t[2]/s, 100*t[3]/s, 100*t[4]/s}'
}
verdict() {  # verdict VALUE OP LIMIT
    if awk -v v="$1" -v l="$3" "BEGIN{exit !(v $2 l)}"; then echo met; else echo "not met"; fi
}
R4=$(ratio ours_write_4096 rxe_write_4096)
R1=$(ratio ours_write_1024 rxe_write_1024)
RL=$(ratio ours_lat rxe_lat)
R4R=$(ratio ours_raw_write_4096 rxe_write_4096)
RLR=$(ratio ours_raw_lat rxe_lat)
# The medians for bench/compare.sh's goals table.
mkdir -p "$INTEROP_REPO/target/bench"
cat > "$INTEROP_REPO/target/bench/guests.env" <<ENV
rxe_bw=$(med rxe_write_4096)
roce_bw=$(med ours_write_4096)
rxe_lat=$(med rxe_lat)
roce_lat=$(med ours_lat)
roce_raw_bw=$(med ours_raw_write_4096)
roce_raw_lat=$(med ours_raw_lat)
ENV
CPU_MODEL=$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)
KVER=$(cat "$INTEROP_CACHE/guest/kernel-version" 2>/dev/null || echo "?")
table=$(cat <<TXT
<!-- guests: generated by bench/guests.sh — do not edit by hand -->
Run of $(date -u '+%Y-%m-%d %H:%M UTC'). Host: $(uname -m), $CPU_MODEL, $(nproc) cores, load average
$LOAD_START at the start and $(cut -d' ' -f1-3 /proc/loadavg) at the end (the host is shared; QEMU runs at nice $INTEROP_NICE).
Guests: two QEMU guests under $ACCEL, $INTEROP_GUEST_CPUS vCPU and $INTEROP_GUEST_MEM MiB each, Debian 12 kernel $KVER,
eth0 MTU 9000 on one bridge, net.core.rmem_max and wmem_max 8 MiB. Guest 1 ($G1_IP) serves,
guest 2 ($G2_IP) is the client, whose figures are taken. Medians of $RUNS runs; each run measures
rxe, unloads rdma_rxe (its socket holds UDP port 4791), measures ours, loads rxe again. Our
binary: a static release build of \`$SOURCE\`. MB/s are 10^6 bytes of payload per second
(perftest's MB/sec, 2^20 bytes per second, converted).

| measurement | rxe ↔ rxe | ours ↔ ours | ours / rxe | goal |
|---|---|---|---|---|
| RC WRITE goodput, 64 KiB, path MTU 4096 | $(med rxe_write_4096) MB/s | $(med ours_write_4096) MB/s | $R4 | ≥ 2: $(verdict "$(exact ours_write_4096 rxe_write_4096)" '>=' 2) |
| RC WRITE goodput, 64 KiB, path MTU 1024 | $(med rxe_write_1024) MB/s | $(med ours_write_1024) MB/s | $R1 | ≥ 2: $(verdict "$(exact ours_write_1024 rxe_write_1024)" '>=' 2) |
| 8-byte SEND latency, typical (half the round trip) | $(med rxe_lat) µs | $(med ours_lat) µs | $RL | ≤ 1: $(verdict "$(exact ours_lat rxe_lat)" '<=' 1) |
| … ours on the raw backend: RC WRITE goodput, 64 KiB, path MTU 4096 | $(med rxe_write_4096) MB/s | $(med ours_raw_write_4096) MB/s | $R4R | ≥ 2: $(verdict "$(exact ours_raw_write_4096 rxe_write_4096)" '>=' 2) |
| … ours on the raw backend: 8-byte SEND latency | $(med rxe_lat) µs | $(med ours_raw_lat) µs | $RLR | ≤ 1: $(verdict "$(exact ours_raw_lat rxe_lat)" '<=' 1) |

- All runs, rxe / ours: WRITE MTU 4096 $(all rxe_write_4096) / $(all ours_write_4096) MB/s; MTU 1024
  $(all rxe_write_1024) / $(all ours_write_1024) MB/s; latency $(all rxe_lat) / $(all ours_lat) µs; ours on
  the raw backend, WRITE MTU 4096 $(all ours_raw_write_4096) MB/s, latency $(all ours_raw_lat) µs.
- Packets our client retransmitted, per run: WRITE MTU 4096 $(xs ours_write_4096); MTU 1024 $(xs ours_write_1024);
  latency $(xs ours_lat); raw backend: WRITE $(xs ours_raw_write_4096), latency $(xs ours_raw_lat).
- Frames the host dropped at the guests' taps (tx_dropped), per run, rxe / ours:
  WRITE MTU 4096 $(ds rxe_write_4096) / $(ds ours_write_4096); MTU 1024 $(ds rxe_write_1024) / $(ds ours_write_1024); latency $(ds rxe_lat) / $(ds ours_lat).
- In the guests, over the whole run: guest 1 $C1; guest 2 $C2.
- Where each guest's one vCPU went while the tools ran (/proc/stat, all runs; "kernel" is
  system time outside softirq, where rxe does its work), client / server:
  - rxe WRITE MTU 4096: $(cpu rxe_write_4096 C) / $(cpu rxe_write_4096 S);
  - ours WRITE MTU 4096: $(cpu ours_write_4096 C) / $(cpu ours_write_4096 S);
  - rxe latency: $(cpu rxe_lat C) / $(cpu rxe_lat S);
  - ours latency: $(cpu ours_lat C) / $(cpu ours_lat S);
  - ours on the raw backend, WRITE MTU 4096: $(cpu ours_raw_write_4096 C) / $(cpu ours_raw_write_4096 S);
  - ours on the raw backend, latency: $(cpu ours_raw_lat C) / $(cpu ours_raw_lat S).
- Cross pair before the runs (ib_write_bw on rxe serving, \`roce perf write\` as its client, MTU
  4096): passed, $CROSS_MB MB/s.
- Wall time per cell (median, guest job overhead included), rxe / ours: WRITE MTU 4096
  $(secs rxe_write_4096) / $(secs ours_write_4096) s, MTU 1024 $(secs rxe_write_1024) / $(secs ours_write_1024) s, latency $(secs rxe_lat) / $(secs ours_lat) s. The whole script: $(( $(date +%s) - T_START )) s,
  of which $(( T_DONE - T_READY )) s of measurement.

\`\`\`sh
# rxe <-> rxe: server in guest 1, client in guest 2 (the same with $G1_IP); G = the ::ffff:IPv4 GID (1)
ib_write_bw -d rxe0 -x G -F -s $SIZE -m 4096 -n $BW_ITERS      # and -m 1024
ib_send_lat -d rxe0 -x G -F -s 8 -n $LAT_ITERS
# ours <-> ours, UDP backend: server in guest 1, client in guest 2 (the same with $G1_IP)
roce perf write -s $SIZE -m 4096 -n $BW_ITERS --json           # and -m 1024; bw_avg_mb_s
roce perf send --lat -s 8 -n $LAT_ITERS --json --busy-poll     # t_typical_us
# ours <-> ours, raw backend on eth0: the same with --backend raw --dev eth0 --ip $G1_RAW (guest 1)
# and --ip $G2_RAW (guest 2), MTU 4096 only
\`\`\`
<!-- /guests -->
TXT
)
python3 - "$table" "$DOC" <<'PY'
import re, sys
block, path = sys.argv[1], sys.argv[2]
text = open(path).read()
if "<!-- guests:" in text:
    text = re.sub(r"<!-- guests:.*?<!-- /guests -->", lambda _: block, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n## Our NIC vs rxe in QEMU guests\n\n`sudo bash bench/guests.sh` (RUNS=3 by default)\n\n" + block + "\n"
open(path, "w").write(text)
PY
echo "$table"
log "done in $(( $(date +%s) - T_START ))s; guests' logs in $INTEROP_RUN"
