# shellcheck shell=bash
# Shared helpers of the rxe interop harness (tests/interop/). Source this file; it does not run
# anything by itself. See docs/interop.md for the layout and how to use the hooks.
#
# Network layout (everything lives in one network namespace that the harness creates):
#
#   netns $INTEROP_NS (default roce-interop-host)
#     bridge $INTEROP_BR  198.18.0.1/24  <- host side; a UDP-backend peer binds here
#       +- tap   $INTEROP_TAP            <- QEMU guest eth0 = 198.18.0.12/24, rxe0 on it
#       +- veth  $INTEROP_PEER_IF-br     <- other end: $INTEROP_PEER_IF in netns $INTEROP_PEER_NS
#   netns $INTEROP_PEER_NS (default roce-interop-peer)
#     veth $INTEROP_PEER_IF  no IPv4, IPv6 off  <- raw-backend peer; it plays 198.18.0.2 itself
#                                                 (own ARP), the kernel there stays silent
#
# Only 198.18.0.0/15 addresses are used, and only inside the namespace.
#
# A second guest (bench/guests.sh: rxe against rxe, our NIC against our NIC) joins the same
# bridge through $INTEROP_TAP2 as 198.18.0.13; `guest2 FUNCTION ARGS...` runs any of the guest
# helpers below (guest_boot, run_in_guest, run_peer_in_guest, guest_wait, guest_stop, ...) on it.

INTEROP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INTEROP_REPO=$(cd "$INTEROP_DIR/../.." && pwd)
: "${INTEROP_CACHE:=$INTEROP_REPO/target/interop}"
: "${INTEROP_NS:=roce-interop-host}"
: "${INTEROP_PEER_NS:=roce-interop-peer}"
: "${INTEROP_BR:=rbr0}"
: "${INTEROP_TAP:=rtap0}"
: "${INTEROP_PEER_IF:=rpeer0}"
: "${INTEROP_HOST_IP:=198.18.0.1}"
: "${INTEROP_PEER_IP:=198.18.0.2}"
: "${INTEROP_GUEST_IP:=198.18.0.12}"
: "${INTEROP_GUEST_MAC:=52:54:00:12:00:0c}"
: "${INTEROP_GUEST_MEM:=1024}"
: "${INTEROP_GUEST_CPUS:=1}"       # vCPUs per guest
: "${INTEROP_NICE:=10}"            # QEMU's niceness: the guests yield to other work on the host
: "${INTEROP_TAP2:=rtap1}"         # the second guest's tap, its address and MAC
: "${INTEROP_GUEST2_IP:=198.18.0.13}"
: "${INTEROP_GUEST2_MAC:=52:54:00:12:00:0d}"
: "${INTEROP_BOOT_TIMEOUT:=180}"   # seconds from QEMU start to the readiness marker
: "${INTEROP_ACCEL:=auto}"         # auto | kvm | tcg
INTEROP_READY_MARKER="ROCE-INTEROP-READY"

# Per-run state (a fresh directory under the cache for every boot).
INTEROP_RUN=""
INTEROP_QEMU_PID=""
INTEROP_BG_PIDS=()
# The second guest's state; guest2 swaps it with the first guest's (see guest2).
INTEROP_RUN2=""
INTEROP_QEMU2_PID=""
INTEROP_BOOT2_T0=""
INTEROP_BOOT2_SECS=""

log()  { printf '[interop %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()  { log "ERROR: $*"; exit 1; }
# A skip is loud and exits 0: the caller cannot run here, which is not a failure of rxe or of us.
skip() { printf '\nSKIP: %s\n\n' "$*"; exit 0; }

need_root() { [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, tap devices)"; }

ns() { ip netns exec "$INTEROP_NS" "$@"; }

# ---------------------------------------------------------------------------------------------
# Clean-up: everything this process started or created. Safe to call more than once.
interop_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ "$rc" = 0 ] || log "exit status $rc: cleaning up"
    # Every background process was started as the leader of its own process group (setsid), so
    # killing the group also ends what it started (pipelines, sleeps).
    local p
    for p in $INTEROP_QEMU_PID $INTEROP_QEMU2_PID "${INTEROP_BG_PIDS[@]}"; do
        kill -TERM -- "-$p" 2>/dev/null || true
    done
    for p in $INTEROP_QEMU_PID $INTEROP_QEMU2_PID "${INTEROP_BG_PIDS[@]}"; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.3; done
        kill -KILL -- "-$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    INTEROP_QEMU_PID=""; INTEROP_QEMU2_PID=""; INTEROP_BG_PIDS=()
    if [ -n "$INTEROP_RUN" ] && [ "$(readlink "$INTEROP_CACHE/current" 2>/dev/null)" = "$INTEROP_RUN" ]; then
        rm -f "$INTEROP_CACHE/current"
    fi
    net_down
    exit "$rc"
}

interop_traps() {
    trap interop_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# ---------------------------------------------------------------------------------------------
# Host side of the network.
ns_exists() { grep -qx "$1" <<<"$(ip netns list 2>/dev/null | awk '{print $1}')"; }

# Deleting the namespaces takes the bridge, the tap and the veth pair with them.
net_down() {
    local n
    for n in "$INTEROP_NS" "$INTEROP_PEER_NS"; do
        ns_exists "$n" && { ip netns delete "$n" 2>/dev/null || true; }
    done
    return 0
}

net_up() {
    if ns_exists "$INTEROP_NS" || ns_exists "$INTEROP_PEER_NS"; then
        log "removing stale namespaces $INTEROP_NS / $INTEROP_PEER_NS"
        net_down
    fi
    ip netns add "$INTEROP_NS"
    ip netns add "$INTEROP_PEER_NS"
    ns ip link set lo up
    ns ip link add "$INTEROP_BR" type bridge
    ns ip link set "$INTEROP_BR" type bridge stp_state 0 forward_delay 0
    # The UDP backend sends GSO batches; the kernel would cut them only after the bridge, so the
    # capture on the bridge would show frames of up to 64 KiB. With the offload off they are cut before
    # it, and `roce dump --strict` checks each segment's ICRC against the IPv4 ID it carries.
    ns ethtool -K "$INTEROP_BR" tx-udp-segmentation off >/dev/null
    ns ip addr add "$INTEROP_HOST_IP/24" dev "$INTEROP_BR"
    ns ip tuntap add dev "$INTEROP_TAP" mode tap
    ns ip link set "$INTEROP_TAP" master "$INTEROP_BR"
    ns ip link add "$INTEROP_PEER_IF" type veth peer name "$INTEROP_PEER_IF-br"
    ns ip link set "$INTEROP_PEER_IF-br" master "$INTEROP_BR"
    ns ip link set "$INTEROP_PEER_IF" netns "$INTEROP_PEER_NS"
    ip netns exec "$INTEROP_PEER_NS" sysctl -qw "net.ipv6.conf.$INTEROP_PEER_IF.disable_ipv6=1"
    ip netns exec "$INTEROP_PEER_NS" ip link set lo up
    ip netns exec "$INTEROP_PEER_NS" ip link set "$INTEROP_PEER_IF" up
    # The raw-backend peer hands the kernel GSO batches too: cut before the bridge (see above).
    ip netns exec "$INTEROP_PEER_NS" ethtool -K "$INTEROP_PEER_IF" tx-udp-segmentation off >/dev/null
    local l
    for l in "$INTEROP_TAP" "$INTEROP_PEER_IF-br" "$INTEROP_BR"; do
        ns ip link set "$l" up
    done
    log "netns $INTEROP_NS: $INTEROP_BR $INTEROP_HOST_IP/24, tap $INTEROP_TAP;" \
        "netns $INTEROP_PEER_NS: $INTEROP_PEER_IF (raw peer)"
}

# net_add_tap TAP: one more tap on the bridge (for a second guest).
net_add_tap() {
    ns ip tuntap add dev "$1" mode tap
    ns ip link set "$1" master "$INTEROP_BR"
    ns ip link set "$1" up
}

# net_mtu MTU: sets the MTU of the bridge, the tap and the veth pair (the guest's eth0 is set
# from inside the guest: run_in_guest "ip link set eth0 mtu MTU").
net_mtu() {
    ns ip link set "$INTEROP_TAP" mtu "$1"
    ns ip link set "$INTEROP_PEER_IF-br" mtu "$1"
    ns ip link set "$INTEROP_BR" mtu "$1"
    ip netns exec "$INTEROP_PEER_NS" ip link set "$INTEROP_PEER_IF" mtu "$1"
}

# ---------------------------------------------------------------------------------------------
# Guest.
guest_artifacts_present() {
    [ -s "$INTEROP_CACHE/guest/vmlinuz" ] && [ -s "$INTEROP_CACHE/guest/initramfs.cpio.gz" ]
}

# Prints kvm or tcg. /dev/kvm can exist and open, yet not run a guest (nested set-ups where
# QEMU aborts on an MSR or the vCPU never prints a line), so the probe boots the guest kernel
# for a few seconds and looks for its first console line. The answer is cached per host kernel.
pick_accel() {
    case "$INTEROP_ACCEL" in
        kvm|tcg) echo "$INTEROP_ACCEL"; return ;;
    esac
    local cache
    cache="$INTEROP_CACHE/accel-$(uname -r)"
    if [ -s "$cache" ]; then cat "$cache"; return; fi
    local accel=tcg probe="$INTEROP_CACHE/accel-probe.log"
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
        rm -f "$probe"
        timeout 10 qemu-system-x86_64 -accel kvm -cpu host -machine q35 -m 256 -display none \
            -nodefaults -serial "file:$probe" -no-reboot -kernel "$INTEROP_CACHE/guest/vmlinuz" \
            -append "console=ttyS0 panic=-1" >/dev/null 2>&1 </dev/null || true
        grep -q 'Linux version' "$probe" 2>/dev/null && accel=kvm
    fi
    echo "$accel" >"$cache"
    echo "$accel"
}

# new_run: makes a fresh run directory (console log, 9p share, captures) and sets INTEROP_RUN.
# Only the newest runs are kept ($INTEROP_KEEP_RUNS, default 10).
new_run() {
    mkdir -p "$INTEROP_CACHE/runs"
    local old
    find "$INTEROP_CACHE/runs" -mindepth 1 -maxdepth 1 -type d | sort |
        head -n "-${INTEROP_KEEP_RUNS:-10}" | while read -r old; do rm -rf "$old"; done
    INTEROP_RUN="$INTEROP_CACHE/runs/$(date +%Y%m%d-%H%M%S)-$$"
    mkdir -p "$INTEROP_RUN"
}

# guest_boot [EXTRA_KERNEL_ARGS]: boots the guest in the namespace, waits for the readiness
# marker, and leaves the guest running. Sets INTEROP_RUN (run dir with console.log and share/).
guest_boot() {
    guest_start "$@" || return $?
    guest_wait_ready
}

# guest_start [EXTRA_KERNEL_ARGS]: starts QEMU and returns at once (two guests boot side by side:
# guest_start, guest2 guest_start, then guest_wait_ready for each).
guest_start() {
    local extra=${1:-}
    guest_artifacts_present || die "no guest in $INTEROP_CACHE/guest: run tests/interop/setup.sh"
    command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run tests/interop/setup.sh"
    [ -n "$INTEROP_RUN" ] || new_run
    rm -rf "$INTEROP_RUN/share"
    mkdir -p "$INTEROP_RUN/share/q"
    local accel cpu
    accel=$(pick_accel)
    if [ "$accel" = kvm ]; then cpu=host; else cpu=max; fi
    local console="$INTEROP_RUN/console.log"
    : >"$console"
    log "booting guest ($accel), console: $console"
    INTEROP_BOOT_T0=$(date +%s.%N)
    setsid ip netns exec "$INTEROP_NS" nice -n "$INTEROP_NICE" qemu-system-x86_64 \
        -accel "$accel" -cpu "$cpu" -machine q35 -smp "$INTEROP_GUEST_CPUS" -m "$INTEROP_GUEST_MEM" \
        -nographic -serial "file:$console" -monitor none -no-reboot \
        -kernel "$INTEROP_CACHE/guest/vmlinuz" -initrd "$INTEROP_CACHE/guest/initramfs.cpio.gz" \
        -append "console=ttyS0 panic=-1 quiet loglevel=4 interop.ip=$INTEROP_GUEST_IP/24 $extra" \
        -netdev "tap,id=n0,ifname=$INTEROP_TAP,script=no,downscript=no" \
        -device "virtio-net-pci,netdev=n0,mac=$INTEROP_GUEST_MAC" \
        -virtfs "local,path=$INTEROP_RUN/share,mount_tag=share,security_model=none,id=share" \
        </dev/null >"$INTEROP_RUN/qemu.log" 2>&1 &
    INTEROP_QEMU_PID=$!
}

# guest_wait_ready: waits for the readiness marker of the guest that guest_start started
# (returns 2 when QEMU exited, 3 when the guest's set-up failed, 4 on timeout).
guest_wait_ready() {
    local console="$INTEROP_RUN/console.log"
    local deadline=$(( $(date +%s) + INTEROP_BOOT_TIMEOUT ))
    while ! grep -q "$INTEROP_READY_MARKER" "$console" 2>/dev/null; do
        if ! kill -0 "$INTEROP_QEMU_PID" 2>/dev/null; then
            log "QEMU exited early; qemu.log:"; cat "$INTEROP_RUN/qemu.log" >&2
            log "console tail:"; tail -n 30 "$console" >&2
            INTEROP_QEMU_PID=""
            return 2
        fi
        if grep -q "ROCE-INTEROP-FAILED" "$console"; then
            log "guest set-up failed; console tail:"; tail -n 40 "$console" >&2
            return 3
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "no readiness marker within ${INTEROP_BOOT_TIMEOUT}s; console tail:"
            tail -n 40 "$console" >&2
            return 4
        fi
        sleep 0.5
    done
    INTEROP_BOOT_SECS=$(awk -v a="$INTEROP_BOOT_T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    log "guest ready after ${INTEROP_BOOT_SECS}s (rxe0 on eth0, $INTEROP_GUEST_IP)"
}

# run_peer_in_guest CMD...: starts CMD (a shell command line, run by the guest's sh in /tmp) in
# the guest in the background and prints a job id at once. Use guest_wait JOB to collect it.
# This is the hook for the interop matrix: the rxe side of a test is started with it, the
# host-side peer (roce CLI in $INTEROP_NS) is started next, then both are waited for.
run_peer_in_guest() {
    [ -n "$INTEROP_RUN" ] || die "guest not booted"
    # Called in $(...) by the callers, so the id cannot come from a counter in this shell.
    local id
    id="j$(date +%s%N)"
    printf '%s\n' "$*" >"$INTEROP_RUN/share/q/$id.tmp"
    mv "$INTEROP_RUN/share/q/$id.tmp" "$INTEROP_RUN/share/q/$id.sh"
    echo "$id"
}

# guest_wait JOB [TIMEOUT_S]: waits for a job; prints its output; returns its exit status
# (124 on timeout; the guest job keeps running then).
guest_wait() {
    local id=$1 timeout=${2:-120} q="$INTEROP_RUN/share/q"
    local deadline=$(( $(date +%s) + timeout ))
    while [ ! -f "$q/$id.rc" ]; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "guest job $id timed out after ${timeout}s: $(cat "$q/$id.cmd" 2>/dev/null)"
            cat "$q/$id.out" 2>/dev/null || true
            return 124
        fi
        if [ -n "$INTEROP_QEMU_PID" ] && ! kill -0 "$INTEROP_QEMU_PID" 2>/dev/null; then
            log "guest died while job $id ran"; tail -n 20 "$INTEROP_RUN/console.log" >&2
            return 125
        fi
        sleep 0.2
    done
    cat "$q/$id.out" 2>/dev/null || true
    return "$(cat "$q/$id.rc")"
}

# run_in_guest [-t TIMEOUT_S] CMD...: runs CMD in the guest and waits for it.
run_in_guest() {
    local timeout=120
    if [ "${1:-}" = -t ]; then timeout=$2; shift 2; fi
    local id
    id=$(run_peer_in_guest "$@")
    guest_wait "$id" "$timeout"
}

# guest_stop: powers the guest off (kills QEMU if it does not go within 10 s).
guest_stop() {
    [ -n "$INTEROP_QEMU_PID" ] || return 0
    run_peer_in_guest 'sync; poweroff -f' >/dev/null || true
    local _
    for _ in $(seq 1 50); do kill -0 "$INTEROP_QEMU_PID" 2>/dev/null || break; sleep 0.2; done
    kill -TERM -- "-$INTEROP_QEMU_PID" 2>/dev/null || true
    wait "$INTEROP_QEMU_PID" 2>/dev/null || true
    INTEROP_QEMU_PID=""
}

# guest2 FUNCTION ARGS...: runs a guest helper of this file on the second guest (tap
# $INTEROP_TAP2, $INTEROP_GUEST2_IP, run directory $INTEROP_RUN/guest2 with its own share/ and
# console.log). It swaps the two guests' variables around the call rather than shadowing them
# with locals, so that the EXIT trap, should it fire inside, still sees both QEMU pids.
guest2() {
    [ -n "$INTEROP_RUN" ] || new_run
    [ -n "$INTEROP_RUN2" ] || INTEROP_RUN2="$INTEROP_RUN/guest2"
    mkdir -p "$INTEROP_RUN2"
    _guest_swap
    local rc=0
    "$@" || rc=$?
    _guest_swap
    return "$rc"
}
_guest_swap() {
    local t
    t=$INTEROP_RUN; INTEROP_RUN=$INTEROP_RUN2; INTEROP_RUN2=$t
    t=$INTEROP_TAP; INTEROP_TAP=$INTEROP_TAP2; INTEROP_TAP2=$t
    t=$INTEROP_GUEST_IP; INTEROP_GUEST_IP=$INTEROP_GUEST2_IP; INTEROP_GUEST2_IP=$t
    t=$INTEROP_GUEST_MAC; INTEROP_GUEST_MAC=$INTEROP_GUEST2_MAC; INTEROP_GUEST2_MAC=$t
    t=$INTEROP_QEMU_PID; INTEROP_QEMU_PID=$INTEROP_QEMU2_PID; INTEROP_QEMU2_PID=$t
    t=${INTEROP_BOOT_T0:-}; INTEROP_BOOT_T0=$INTEROP_BOOT2_T0; INTEROP_BOOT2_T0=$t
    t=${INTEROP_BOOT_SECS:-}; INTEROP_BOOT_SECS=$INTEROP_BOOT2_SECS; INTEROP_BOOT2_SECS=$t
}

# bg_in_ns CMD...: starts a host-side process in $INTEROP_NS as the leader of a new process
# group, remembered for clean-up. Prints nothing; the pid is in INTEROP_LAST_BG.
# bg_in_peer_ns CMD...: the same in $INTEROP_PEER_NS (the raw-backend peer's namespace).
bg_in_ns() {
    setsid ip netns exec "$INTEROP_NS" "$@" &
    INTEROP_LAST_BG=$!
    INTEROP_BG_PIDS+=("$INTEROP_LAST_BG")
}
bg_in_peer_ns() {
    setsid ip netns exec "$INTEROP_PEER_NS" "$@" &
    INTEROP_LAST_BG=$!
    INTEROP_BG_PIDS+=("$INTEROP_LAST_BG")
}

# bg_stop PID: ends a process started with bg_in_ns (and its group) and waits for it.
bg_stop() {
    kill -TERM -- "-$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# capture_start FILE [FILTER]: tcpdump on the bridge into FILE (pcap); pid in INTEROP_LAST_BG.
capture_start() {
    local file=$1 filter=${2:-udp port 4791 or tcp port 18515 or arp or icmp}
    bg_in_ns tcpdump -i "$INTEROP_BR" -nn -U -s 0 -Z root -w "$file" "$filter" 2>"$file.log"
    local _
    for _ in $(seq 1 50); do grep -q 'listening on' "$file.log" 2>/dev/null && break; sleep 0.1; done
}

# start_guest_on_bridge: what every harness script does first — checks that namespaces can be
# made, brings up the bridge, starts a run directory and a bridge capture, boots the guest.
# Sets PCAP (the capture), TCPDUMP_PID and G (the guest's RoCEv2 GID index); skips when QEMU
# cannot run here, dies when the guest does not come up.
start_guest_on_bridge() {
    interop_traps
    ip netns add roce-interop-probe.$$ 2>/dev/null || skip "cannot create network namespaces"
    ip netns delete roce-interop-probe.$$
    net_up
    new_run
    PCAP="$INTEROP_RUN/bridge.pcap"
    capture_start "$PCAP"
    TCPDUMP_PID=$INTEROP_LAST_BG
    local rc=0
    guest_boot || rc=$?
    case $rc in
        0) ;;
        2) skip "QEMU could not run the guest here (see $INTEROP_RUN/qemu.log)" ;;
        *) die "guest did not become ready (rc=$rc)" ;;
    esac
    G=$(cat "$INTEROP_RUN/share/gid-index")
}
