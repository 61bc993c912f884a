#!/usr/bin/env bash
# Smoke test of the rxe interop harness: boots the guest and proves that rxe works.
#   A. loopback on the guest's rxe0: ibv_rc_pingpong (sizes 64, 4096, 65536) and ib_send_bw;
#   B. rxe on the wire: the guest's ibv_rc_pingpong talks to a scripted out-of-band peer on the
#      host (198.18.0.1, TCP 18515); rxe then sends RoCEv2 SEND_ONLY to 198.18.0.1:4791, which the
#      host captures on the bridge (nobody ACKs, so rxe retransmits until the client is stopped);
#   C. iproute2's tc can put netem (loss 1%) on the guest's eth0 (the matrix needs it);
#   D. netdev MTU 9000 in the guest: rxe's active MTU becomes 4096, pingpong with -m 4096.
# Exit 0 on success, 1 on failure, and 0 with a `SKIP:` line when the guest cannot run here.
#   INTEROP_SKIP_SETUP=1   do not run setup.sh first (the cache must be complete)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
[ -c /dev/net/tun ] || skip "no /dev/net/tun: cannot give the guest a tap device"
command -v ip >/dev/null || skip "no ip(8) on the host"
T0=$(date +%s)

if [ "${INTEROP_SKIP_SETUP:-0}" != 1 ]; then
    mkdir -p "$INTEROP_CACHE"
    if ! bash "$INTEROP_DIR/setup.sh" >"$INTEROP_CACHE/setup.log" 2>&1; then
        tail -n 20 "$INTEROP_CACHE/setup.log" >&2
        skip "tests/interop/setup.sh failed (packages unreachable?); log: $INTEROP_CACHE/setup.log"
    fi
    tail -n 1 "$INTEROP_CACHE/setup.log" >&2
fi
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
guest_artifacts_present || skip "no guest kernel/initramfs in $INTEROP_CACHE/guest"
T_SETUP=$(date +%s)

start_guest_on_bridge
grep -E 'active_mtu|GID\[' "$INTEROP_RUN/share/guest-info.txt" | sed 's/^[[:space:]]*/  guest: /' >&2

failures=0
check() {  # check NAME CMD...: runs CMD, counts a failure instead of stopping.
    local name=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    if "$@"; then
        t1=$(date +%s.%N)
        log "PASS $name ($(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')s)"
    else
        log "FAIL $name"
        failures=$((failures + 1))
    fi
}

ping_guest() { ns busybox ping -c 2 -W 2 "$INTEROP_GUEST_IP" >/dev/null; }

# Server and client of ibv_rc_pingpong, both on rxe0, over the guest's own address.
rc_loopback() {
    local size=$1 mtu=$2 n=${3:-20} out
    out=$(run_in_guest -t 90 "
        ibv_rc_pingpong -d rxe0 -g $G -s $size -m $mtu -n $n >/tmp/srv.$size.$mtu 2>&1 &
        srv=\$!
        sleep 0.5
        timeout 60 ibv_rc_pingpong -d rxe0 -g $G -s $size -m $mtu -n $n $INTEROP_GUEST_IP; crc=\$?
        wait \$srv; src=\$?
        echo '--- server:'; cat /tmp/srv.$size.$mtu
        echo \"client_rc=\$crc server_rc=\$src\"
        [ \$crc = 0 ] && [ \$src = 0 ]") || { printf '%s\n' "$out" >&2; return 1; }
    printf '%s\n' "$out" | grep -E 'bytes in|iters in' | sed 's/^/  /' >&2
    # A here-string, not `printf | grep -q`: grep -q exits at the first match, and under
    # pipefail the printf it leaves behind fails with SIGPIPE now and then.
    grep -q "$((size * n * 2)) bytes in" <<<"$out"
}

send_bw_loopback() {
    local out
    out=$(run_in_guest -t 120 "
        ib_send_bw -d rxe0 -x $G -n 200 -s 4096 >/tmp/bw.srv 2>&1 &
        srv=\$!
        sleep 1
        timeout 90 ib_send_bw -d rxe0 -x $G -n 200 -s 4096 $INTEROP_GUEST_IP; crc=\$?
        wait \$srv; src=\$?
        echo \"client_rc=\$crc server_rc=\$src\"
        [ \$crc = 0 ] && [ \$src = 0 ]") || { printf '%s\n' "$out" >&2; return 1; }
    printf '%s\n' "$out" | awk '/#bytes/{getline; print "  ib_send_bw: " $0}' >&2
}

# B: the host answers ibv_rc_pingpong's out-of-band exchange like a server at 198.18.0.1 with
# QPN 0x11, PSN 0; the guest's rxe then puts RoCEv2 requests on the wire towards the host.
wire_to_host() {
    local msg a b c d
    IFS=. read -r a b c d <<<"$INTEROP_HOST_IP"
    msg=$(printf '0000:000011:000000:00000000000000000000ffff%02x%02x%02x%02x' "$a" "$b" "$c" "$d")
    bg_in_ns sh -c "(printf '%s\0' '$msg'; sleep 8) | busybox nc -l -p 18515 >/dev/null"
    local oob=$INTEROP_LAST_BG
    sleep 0.5
    local out
    out=$(run_in_guest -t 60 "timeout 6 ibv_rc_pingpong -d rxe0 -g $G -s 64 -n 1 $INTEROP_HOST_IP; echo client_rc=\$?") || true
    printf '%s\n' "$out" | grep -E 'remote address|local address' | sed 's/^/  /' >&2
    bg_stop "$oob"
    sleep 1
    local n
    n=$(tcpdump -nn -r "$PCAP" \
        "udp dst port 4791 and src host $INTEROP_GUEST_IP and dst host $INTEROP_HOST_IP" 2>/dev/null | wc -l)
    # BTH opcode = first byte of the UDP payload = byte 28 of the IPv4 packet (no IP options).
    local ops
    ops=$(tcpdump -nn -x -r "$PCAP" \
        "udp dst port 4791 and src host $INTEROP_GUEST_IP" 2>/dev/null |
        awk '/^\t0x0010:/{print substr($8,1,2)}' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
    log "  RoCEv2 packets from rxe on the bridge: $n (BTH opcode counts: $ops)"
    [ "$n" -ge 1 ] && grep -q ' 04' <<<"$ops"
}

mtu_4096_loopback() {
    run_in_guest -t 30 'ip link set eth0 mtu 9000; sleep 1; ibv_devinfo -d rxe0 | grep active_mtu' |
        sed 's/^[[:space:]]*/  /' >&2
    run_in_guest -t 10 'ibv_devinfo -d rxe0 | grep -q "active_mtu:.*4096"' &&
        rc_loopback 65536 4096 10
}

# The matrix runs with and without 1% loss on the guest's eth0: netem must be there.
netem_in_guest() {
    run_in_guest -t 30 'tc qdisc add dev eth0 root netem loss 1% && tc qdisc show dev eth0 &&
        tc qdisc del dev eth0 root' | sed 's/^/  /' >&2
}

T_READY=$(date +%s)
check "host pings guest over the bridge" ping_guest
check "A1 ibv_rc_pingpong loopback -s 64 -m 1024" rc_loopback 64 1024
check "A2 ibv_rc_pingpong loopback -s 4096 -m 1024" rc_loopback 4096 1024
check "A3 ibv_rc_pingpong loopback -s 65536 -m 1024" rc_loopback 65536 1024 10
check "A4 ib_send_bw loopback" send_bw_loopback
check "B  rxe sends RoCEv2 to the host (captured on $INTEROP_BR)" wire_to_host
check "C  tc netem loss 1% on the guest's eth0" netem_in_guest
check "D  MTU 9000: active_mtu 4096, ibv_rc_pingpong -m 4096" mtu_4096_loopback
T_TESTS=$(date +%s)

guest_stop
bg_stop "$TCPDUMP_PID"
log "timing: setup $((T_SETUP - T0))s, boot to rxe ready ${INTEROP_BOOT_SECS}s, tests $((T_TESTS - T_READY))s, total $(( $(date +%s) - T0 ))s"
log "artifacts: $INTEROP_RUN (console.log, guest-info.txt in share/, bridge.pcap)"
if [ "$failures" -ne 0 ]; then
    log "smoke test FAILED: $failures check(s)"
    exit 1
fi
log "smoke test passed"
