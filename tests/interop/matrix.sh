#!/usr/bin/env bash
# The interop matrix: our NIC (the `roce` CLI, UDP backend, in the host namespace at 198.18.0.1)
# against the kernel's rxe running the real rdma-core tools in the guest (198.18.0.12), in both
# directions, without and with 1 % loss on the guest's eth0. Every cell is a named check; the
# results table is written to docs/interop-matrix.md (generated: do not edit by hand). The whole
# run is captured on the bridge and `roce dump --strict` must find it clean.
#
# Exit 0 when every cell passed, 1 when one failed, 0 with a `SKIP:` line when the guest cannot
# run here. ROCE_BIN picks the binary (default: target/debug/roce, built if missing).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root
[ -c /dev/net/tun ] || skip "no /dev/net/tun: cannot give the guest a tap device"
T0=$(date +%s)
ROCE_BIN=${ROCE_BIN:-$INTEROP_REPO/target/debug/roce}
if [ ! -x "$ROCE_BIN" ]; then
    (cd "$INTEROP_REPO" && cargo build -q -p roce) || die "cannot build the roce CLI"
fi
if [ "${INTEROP_SKIP_SETUP:-0}" != 1 ]; then
    mkdir -p "$INTEROP_CACHE"
    if ! bash "$INTEROP_DIR/setup.sh" >"$INTEROP_CACHE/setup.log" 2>&1; then
        tail -n 20 "$INTEROP_CACHE/setup.log" >&2
        skip "tests/interop/setup.sh failed (packages unreachable?); log: $INTEROP_CACHE/setup.log"
    fi
fi
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
guest_artifacts_present || skip "no guest kernel/initramfs in $INTEROP_CACHE/guest"

start_guest_on_bridge

RESULTS="$INTEROP_RUN/results.tsv"
# The cells with Debian's tools on both sides (ours under `roce exec`): a table of their own.
RESULTS_EXEC="$INTEROP_RUN/results-exec.tsv"
: >"$RESULTS"
: >"$RESULTS_EXEC"
CELLS_TO=$RESULTS
failures=0
# cell NAME CMD...: runs one cell; records pass/fail, its time and the tool's summary line.
# INTEROP_CELLS=REGEX runs only the cells whose name matches (then docs/interop-matrix.md is
# left as it was: a partial run is not the matrix).
cell() {
    local name=$1; shift
    local t0 out status=pass
    if [ -n "${INTEROP_CELLS:-}" ] && ! grep -qE -- "$INTEROP_CELLS" <<<"$name"; then
        return 0
    fi
    t0=$(date +%s.%N)
    out=$("$@" 2>&1) || status=FAIL
    # perftest measures the CPU clock before it reports, and gives up when the samples disagree
    # (r^2 < 0.9, common in a loaded TCG guest): the transfer worked, the timing did not. Once.
    if [ "$status" = FAIL ] && grep -q "Can't produce a report" <<<"$out"; then
        log "  $name: perftest could not time the run (CPU clock check); running it again"
        status=pass
        out=$("$@" 2>&1) || status=FAIL
    fi
    # A pingpong under loss whose one side finished every iteration and exited at once, while the
    # other side's last SEND still waited for the ACK that the loss took: its retries find no QP
    # left to answer them, and it ends in "transport retry counter exceeded". That is the
    # program's own race at exit (rxe's side meets it as well as ours), not a failure to
    # recover from loss, which would stop both short of their last iteration. Once more.
    if [ "$status" = FAIL ] && [[ $name == *"% loss"* ]] &&
        grep -q "retry counter exceeded" <<<"$out" &&
        [ "$(grep -cE '^ *[0-9]+ iters in ' <<<"$out")" = 1 ]; then
        log "  $name: one side finished and left while the other's last SEND waited for its lost ACK; running it again"
        status=pass
        out=$("$@" 2>&1) || status=FAIL
    fi
    # rping before rdma-core's pull request #1622 (Debian's is 44.0) destroys its CM event channel
    # as it ends while its event thread may call rdma_get_cm_event once more, and so exits 255
    # after every ping was done (rxe's side meets it as well as ours). Once more.
    if [ "$status" = FAIL ] && [[ $name == rping* ]] &&
        grep -q "DISCONNECT EVENT" <<<"$out" && grep -q "^rdma_get_cm_event: " <<<"$out"; then
        log "  $name: rping's own race at its end (rdma-core #1622); running it again"
        status=pass
        out=$("$@" 2>&1) || status=FAIL
    fi
    local secs figure
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    figure=$(printf '%s\n' "$out" | grep -m1 -E 'Mbit/sec|^ [0-9]+ +[0-9]+ |^figure: ' | tr -s ' ' | sed 's/^ *//; s/^figure: //' || true)
    printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$secs" "$figure" >>"$CELLS_TO"
    if [ "$status" = pass ]; then
        log "PASS $name (${secs}s) $figure"
    else
        log "FAIL $name (${secs}s)"
        printf '%s\n' "$out" | tail -n 25 | sed 's/^/    /' >&2
        failures=$((failures + 1))
    fi
}

# Waits (at most 10 s) until rxe's server listens on the out-of-band TCP port in the guest. The
# servers of perftest and the pingpongs take one connection only, so the host cannot probe by
# connecting; and a fixed pause is not always enough in a loaded TCG guest (the client then gets
# "Connection refused", and the server it missed holds the port into the next cell).
# GUEST_PORT: another port (UCX's, libfabric's).
guest_listening() {
    local port=${GUEST_PORT:-18515}
    run_in_guest -t 15 'for i in $(seq 100); do [ -n "$(ss -Hltn "sport = :'"$port"'")" ] && exit 0; sleep 0.1; done; exit 1' >/dev/null ||
        echo "rxe's server does not listen on TCP port $port after 10 s"
}

# rxe's tool runs in the guest as the server (the command line `$1`, with `timeout N` before
# the program); once it listens, ours, the rest of the arguments, runs on the host as the
# client. rxe's output follows ours, after a line "--- rxe:". A failed client ends rxe's
# program, lest it take the next cell's connection.
rxe_serves() {
    local guest=$1 job prog
    shift
    prog=$(sed -E 's/.*timeout [0-9]+ ([^ ]+).*/\1/' <<<"$guest")
    job=$(run_peer_in_guest "$guest")
    guest_listening
    if ! "$@"; then
        guest_wait "$job" 5
        run_in_guest -t 10 "killall $prog; sleep 0.5" >/dev/null || true
        return 1
    fi
    echo "--- rxe:"
    guest_wait "$job" 60
}

# Ours is the server on the host, started in the background by the arguments from `$2` on
# (bg_in_ns or bg_in_peer_ns and its command); rxe's tool, the command line `$1`, the client in
# the guest.
we_serve() {
    local guest=$1 ours rc=0
    shift
    "$@"
    ours=$INTEROP_LAST_BG
    sleep 0.5
    run_in_guest -t 70 "$guest" || rc=$?
    wait "$ours" || rc=$?
    return $rc
}

# rxe is the server in the guest; our roce pingpong is the client on the host.
pp_we_are_client() {
    local size=$1 n=$2 extra=${*:3}
    # shellcheck disable=SC2086
    rxe_serves "timeout 60 ibv_rc_pingpong -d rxe0 -g $G -s $size -n $n $extra" \
        ns timeout 60 "$ROCE_BIN" pingpong "$INTEROP_GUEST_IP" -s "$size" -n "$n" $extra --timeout 20
}

# Our roce pingpong is the server on the host; rxe is the client in the guest.
pp_we_are_server() {
    local size=$1 n=$2 extra=${*:3}
    # shellcheck disable=SC2086
    we_serve "timeout 60 ibv_rc_pingpong -d rxe0 -g $G -s $size -n $n $extra $INTEROP_HOST_IP" \
        bg_in_ns timeout 60 "$ROCE_BIN" pingpong -s "$size" -n "$n" $extra --timeout 20
}

# The raw backend plays $INTEROP_PEER_IP on $INTEROP_PEER_IF in the peer namespace, whose kernel
# owns only $RAW_TCP_IP there: the out-of-band TCP goes through that kernel address, RoCEv2 to the
# raw NIC's own address, which no kernel answers (no ICMP port unreachable).
RAW_TCP_IP=198.18.0.3
peer_ns() { ip netns exec "$INTEROP_PEER_NS" "$@"; }

pp_raw_client() {
    local size=$1 n=$2
    rxe_serves "timeout 60 ibv_rc_pingpong -d rxe0 -g $G -s $size -n $n" \
        peer_ns timeout 60 "$ROCE_BIN" pingpong "$INTEROP_GUEST_IP" --backend raw --dev "$INTEROP_PEER_IF" \
        --ip "$INTEROP_PEER_IP" -s "$size" -n "$n" --timeout 20
}

pp_raw_server() {
    local size=$1 n=$2
    we_serve "timeout 60 ibv_rc_pingpong -d rxe0 -g $G -s $size -n $n $RAW_TCP_IP" \
        bg_in_peer_ns timeout 60 "$ROCE_BIN" pingpong --backend raw --dev "$INTEROP_PEER_IF" \
        --ip "$INTEROP_PEER_IP" -s "$size" -n "$n" --timeout 20
}

# perftest: rxe's tool is the server in the guest, roce perf the client on the host.
pt_we_are_client() {
    local tool=$1 verb=$2 flags=$3
    # shellcheck disable=SC2086
    rxe_serves "timeout 60 $tool -d rxe0 -x $G ${flags/--lat /}" \
        ns timeout 60 "$ROCE_BIN" perf "$verb" "$INTEROP_GUEST_IP" $flags --timeout 20
}

# roce perf is the server on the host; rxe's tool the client in the guest.
pt_we_are_server() {
    local tool=$1 verb=$2 flags=$3
    # shellcheck disable=SC2086
    we_serve "timeout 60 $tool -d rxe0 -x $G ${flags/--lat /} $INTEROP_HOST_IP" \
        bg_in_ns timeout 60 "$ROCE_BIN" perf "$verb" $flags --timeout 20
}

pt_raw_client() {
    local tool=$1 verb=$2 flags=$3
    # shellcheck disable=SC2086
    rxe_serves "timeout 60 $tool -d rxe0 -x $G ${flags/--lat /}" \
        peer_ns timeout 60 "$ROCE_BIN" perf "$verb" "$INTEROP_GUEST_IP" --backend raw --dev "$INTEROP_PEER_IF" \
        --ip "$INTEROP_PEER_IP" $flags --timeout 20
}

pt_raw_server() {
    local tool=$1 verb=$2 flags=$3
    # shellcheck disable=SC2086
    we_serve "timeout 60 $tool -d rxe0 -x $G ${flags/--lat /} $RAW_TCP_IP" \
        bg_in_peer_ns timeout 60 "$ROCE_BIN" perf "$verb" --backend raw --dev "$INTEROP_PEER_IF" \
        --ip "$INTEROP_PEER_IP" $flags --timeout 20
}

# `roce exec`: the same unmodified Debian program as rxe's (ibverbs-utils, perftest) runs on the
# host on our NIC, through roce-emu's libibverbs.so.1 (UDP backend at $INTEROP_HOST_IP, GID 1).
# `$1` is the program with the flags both sides share, `$2` the guest's own flags (device and
# GID index), `$3` the host's (GID index 1, whatever the guest's is). EXEC_OPTS: more options of `roce exec`.
# EXEC_IP: our NIC's address (the IPv6 cells give it one of the bridge's IPv6 addresses; the
# programs' own TCP exchange stays on IPv4).
EXEC_PORT=18515
EXEC_OPTS=""
EXEC_IP=$INTEROP_HOST_IP
# shellcheck disable=SC2086
ex_ours() { ns timeout 60 "$ROCE_BIN" exec --ip "$EXEC_IP" $EXEC_OPTS -- "$@"; }

# Waits (at most 10 s) until our server listens on the out-of-band TCP port: perftest's and the
# pingpongs' servers take one connection only, so it cannot be probed by connecting.
ex_wait_listening() {
    local _
    for _ in $(seq 50); do
        [ -n "$(ns ss -Hltn "sport = :$EXEC_PORT" 2>/dev/null)" ] && return 0
        sleep 0.2
    done
    echo "nothing listens on TCP port $EXEC_PORT on the host after 10 s"
    return 1
}

# rxe's program is the server in the guest; the same program under roce exec the client.
ex_we_are_client() {
    local common=$1 guest=$2 host=$3
    # shellcheck disable=SC2086
    rxe_serves "timeout 60 $common $guest" ex_ours $common $host "$INTEROP_GUEST_IP"
}

# The program under roce exec is the server on the host; rxe's the client in the guest.
ex_we_are_server() {
    local common=$1 guest=$2 host=$3 ours rc=0
    # shellcheck disable=SC2086
    bg_in_ns timeout 60 "$ROCE_BIN" exec --ip "$EXEC_IP" $EXEC_OPTS -- $common $host
    ours=$INTEROP_LAST_BG
    ex_wait_listening || { wait "$ours"; return 1; }
    run_in_guest -t 70 "timeout 60 $common $guest $INTEROP_HOST_IP" || rc=$?
    wait "$ours" || rc=$?
    return $rc
}

# The RDMA CM cells: the programs connect through librdmacm (IB CM MADs on QP 1, rxe's kernel
# rdma_cm on one side, roce-emu's librdmacm.so.1 and the engine's CM on the other). They name
# their peer themselves and listen on no TCP port.
# Waits (at most 10 s) until rxe's program `$1` listens through rdma_cm (`rdma res show cm_id`
# lists its id in state LISTEN with its command name).
guest_cm_listening() {
    run_in_guest -t 15 "for i in \$(seq 100); do rdma res show cm_id 2>/dev/null | grep LISTEN | grep -q 'comm $1' && exit 0; sleep 0.1; done; exit 1" >/dev/null ||
        echo "rxe's $1 does not listen through rdma_cm after 10 s"
}

# Waits (at most 10 s) until our NIC's UDP socket is up on the host; the program listens just
# after it opens the device.
# (An IPv6 NIC binds [::]:4791 on its interface.)
ex_wait_nic() {
    local _ filter="src $EXEC_IP:4791"
    [[ $EXEC_IP == *:* ]] && filter="sport = :4791"
    for _ in $(seq 50); do
        if [ -n "$(ns ss -Hlun "$filter" 2>/dev/null)" ]; then
            sleep 0.3
            return 0
        fi
        sleep 0.2
    done
    echo "no NIC at $EXEC_IP:4791 on the host after 10 s"
    return 1
}

# Counts the lines of the cell's output matching `$1` and prints them as its figure.
cm_figure() { printf 'figure: %s\n' "$(grep -c -E "$1" "$2" || true) $3"; }

# rxe's program (`$1`, a command line for the guest) serves; ours, the rest, is the client.
# A failed cell ends rxe's program, lest it take the next cell's connection.
cm_we_are_client() {
    local guest=$1 job out rc=0 prog
    shift
    # The program's name: the word after `timeout 60`.
    prog=$(awk '{print $3}' <<<"$guest")
    job=$(run_peer_in_guest "$guest")
    guest_cm_listening "$prog"
    out=$(mktemp)
    "$@" >"$out" 2>&1 || rc=$?
    cat "$out"
    [ -n "${CM_COUNT:-}" ] && cm_figure "$CM_COUNT" "$out" "$CM_WHAT"
    rm -f "$out"
    if [ "$rc" != 0 ]; then
        guest_wait "$job" 5
        run_in_guest -t 10 "killall $prog; sleep 0.5" >/dev/null || true
        return 1
    fi
    echo "--- rxe:"
    guest_wait "$job" 60
}

# Ours (the arguments after `$1`) serves on the host; rxe's program, the command line `$1`,
# is the client in the guest.
cm_we_are_server() {
    local guest=$1 ours rc=0 out
    shift
    bg_in_ns timeout 60 "$@"
    ours=$INTEROP_LAST_BG
    ex_wait_nic || { wait "$ours"; return 1; }
    out=$(mktemp)
    run_in_guest -t 70 "$guest" >"$out" 2>&1 || rc=$?
    cat "$out"
    [ -n "${CM_COUNT:-}" ] && cm_figure "$CM_COUNT" "$out" "$CM_WHAT"
    rm -f "$out"
    wait "$ours" || rc=$?
    return $rc
}

# Both directions of an RDMA CM program: `$1` the cell's name, `$2` the server's flags (after
# which its own address follows), `$3` the client's (then the server's address). The `@` in
# them is the server's address: the guest's and the host's IPv4 addresses, or CM_GUEST_SELF
# (the guest's as the guest names it), CM_GUEST_PEER (as the host names it), CM_HOST_SELF and
# CM_HOST_PEER: a link-local address differs in its %scope on either side.
cm_both_ways() {
    local name=$1 server=$2 client=$3
    local gs=${CM_GUEST_SELF:-$INTEROP_GUEST_IP} gp=${CM_GUEST_PEER:-$INTEROP_GUEST_IP}
    local hs=${CM_HOST_SELF:-$INTEROP_HOST_IP} hp=${CM_HOST_PEER:-$INTEROP_HOST_IP}
    # shellcheck disable=SC2086
    [ -z "${CM_SERVER_ONLY:-}" ] && cell "$name: rxe server, roce exec client" cm_we_are_client \
        "timeout 60 ${server//@/$gs}" ns timeout 60 "$ROCE_BIN" exec --ip "$EXEC_IP" -- ${client//@/$gp}
    # shellcheck disable=SC2086
    cell "$name: roce exec server, rxe client" cm_we_are_server \
        "timeout 60 ${client//@/$hp}" "$ROCE_BIN" exec --ip "$EXEC_IP" -- ${server//@/$hs}
}

# perftest `-R` with our `roce perf -R` (perftest's rdma_cm exchange, crates/roce-oob): `$1` the
# tool, `$2` roce perf's verb, `$3` the flags both take.
pt_cm_both_ways() {
    local tool=$1 verb=$2 flags=$3
    # shellcheck disable=SC2086
    cell "$tool -R $flags: rxe server, roce client" cm_we_are_client \
        "timeout 60 $tool -R -d rxe0 $flags" \
        ns timeout 60 "$ROCE_BIN" perf "$verb" -R --ip "$INTEROP_HOST_IP" $flags --timeout 20 "$INTEROP_GUEST_IP"
    # shellcheck disable=SC2086
    cell "$tool -R $flags: roce server, rxe client" cm_we_are_server \
        "timeout 60 $tool -R -d rxe0 $flags $INTEROP_HOST_IP" \
        "$ROCE_BIN" perf "$verb" -R --ip "$INTEROP_HOST_IP" $flags --timeout 20
}

# MTU 4096: rxe's active MTU follows its netdev (9000 → 4096); every link on the path too.
mtu_9000() {
    net_mtu 9000
    run_in_guest -t 30 'ip link set eth0 mtu 9000; sleep 1; ibv_devinfo -d rxe0 | grep -q "active_mtu:.*4096"'
}

# Both directions, rxe's tool as server then ours under roce exec as server, of each
# "TOOL ARGS|GID-FLAG" after $1 (a note for the cell names, such as ", 1 % loss").
# Two of our processes on one address (one NIC, shared), each the client of its own rxe server
# in the guest, at once: the NIC steers each process's datagrams to it.
shared_we_are_clients() {
    local job a b rc=0 out
    job=$(run_peer_in_guest "timeout 60 ib_write_bw -d rxe0 -x $G -n 200 -p 18611 & \
        timeout 60 ib_write_bw -d rxe0 -x $G -n 200 -p 18612; wait")
    GUEST_PORT=18611 guest_listening
    GUEST_PORT=18612 guest_listening
    out=$(mktemp -d)
    ex_ours ib_write_bw -x 1 -n 200 -p 18611 "$INTEROP_GUEST_IP" >"$out/a" 2>&1 & a=$!
    ex_ours ib_write_bw -x 1 -n 200 -p 18612 "$INTEROP_GUEST_IP" >"$out/b" 2>&1 & b=$!
    wait "$a" || rc=1
    wait "$b" || rc=1
    cat "$out/a" "$out/b"
    rm -rf "$out"
    if [ "$rc" != 0 ]; then
        guest_wait "$job" 5 || true
        run_in_guest -t 10 "killall ib_write_bw; sleep 0.5" >/dev/null || true
        return 1
    fi
    echo "--- rxe:"
    guest_wait "$job" 60
}

exec_both_ways() {
    local note=$1 t common gid
    shift
    for t in "$@"; do
        common=${t%|*} gid=${t#*|}
        cell "$common$note: rxe server, roce exec client" ex_we_are_client \
            "$common -p $EXEC_PORT" "-d rxe0 $gid $G" "$gid 1"
        cell "$common$note: roce exec server, rxe client" ex_we_are_server \
            "$common -p $EXEC_PORT" "-d rxe0 $gid $G" "$gid 1"
    done
}
loss_on()  { run_in_guest -t 30 'tc qdisc add dev eth0 root netem loss 1%' >/dev/null; }
loss_off() { run_in_guest -t 30 'tc qdisc del dev eth0 root' >/dev/null; }

# IPv6: a ULA prefix on the bridge (host side) and the guest's eth0, no duplicate address
# detection, and permanent neighbour entries both ways for the global and the link-local
# addresses (neighbour discovery right after an address appears can take seconds). rxe lists
# eth0's IPv6 addresses in its GID table: G6 is the index of the global one, G6LL of the
# link-local one (RoCE v2 entries). Our NIC under `roce exec --ip $HOST_IP6` binds [::]:4791 on
# the bridge: GID 1 is $HOST_IP6, GID 0 the bridge's link-local address.
HOST_IP6=fd00:198:18::1
GUEST_IP6=fd00:198:18::12
ipv6_up() {
    local brmac gll p=/sys/class/infiniband/rxe0/ports/1
    ns ip -6 addr add "$HOST_IP6/64" dev "$INTEROP_BR" nodad || return 1
    brmac=$(ns cat "/sys/class/net/$INTEROP_BR/address")
    BR_LL=$(ns ip -6 -o addr show dev "$INTEROP_BR" scope link | awk '{sub(/\/.*/, "", $4); print $4; exit}')
    GUEST_LL=$(run_in_guest -t 15 "ip -6 -o addr show dev eth0 scope link" | awk '{sub(/\/.*/, "", $4); print $4; exit}')
    [ -n "$BR_LL" ] && [ -n "$GUEST_LL" ] || { log "no link-local address on $INTEROP_BR or eth0"; return 1; }
    ns ip -6 neigh replace "$GUEST_IP6" lladdr "$INTEROP_GUEST_MAC" dev "$INTEROP_BR" nud permanent
    ns ip -6 neigh replace "$GUEST_LL" lladdr "$INTEROP_GUEST_MAC" dev "$INTEROP_BR" nud permanent
    # The GID table lists the address shortly after it is added; each index once it is there.
    local out
    out=$(run_in_guest -t 30 "ip -6 addr add $GUEST_IP6/64 dev eth0 nodad || exit 1
        ip -6 neigh replace $HOST_IP6 lladdr $brmac dev eth0 nud permanent
        ip -6 neigh replace $BR_LL lladdr $brmac dev eth0 nud permanent
        gid() { grep -l -x \"\$1\" $p/gids/* 2>/dev/null | while read -r f; do n=\${f##*/}
            [ \"\$(cat $p/gid_attrs/types/\$n 2>/dev/null)\" = 'RoCE v2' ] && echo \$n; done | head -n1; }
        for i in \$(seq 50); do
            g=\$(gid $(ipv6_gid_form "$GUEST_IP6")); l=\$(gid $(ipv6_gid_form "$GUEST_LL"))
            [ -n \"\$g\" ] && [ -n \"\$l\" ] && { echo \"G6=\$g G6LL=\$l\"; exit 0; }
            sleep 0.1
        done
        exit 1") || { log "rxe0 does not list $GUEST_IP6 and $GUEST_LL as RoCE v2 GIDs: $out"; return 1; }
    G6=$(sed -n 's/.*G6=\([0-9]*\) .*/\1/p' <<<"$out")
    G6LL=$(sed -n 's/.*G6LL=\([0-9]*\).*/\1/p' <<<"$out")
    log "IPv6: $HOST_IP6 and $BR_LL on $INTEROP_BR; guest $GUEST_IP6 (GID $G6), $GUEST_LL (GID $G6LL)"
}
# The form of an IPv6 address in sysfs's GID files (8 groups of 4 hex digits).
ipv6_gid_form() {
    local a=$1 i g out=""
    local -a h=() t=() all=()
    if [[ $a == *::* ]]; then
        IFS=: read -r -a h <<<"${a%%::*}"
        IFS=: read -r -a t <<<"${a#*::}"
    else
        IFS=: read -r -a h <<<"$a"
    fi
    all=("${h[@]}")
    for ((i = ${#h[@]} + ${#t[@]}; i < 8; i++)); do all+=(0); done
    all+=("${t[@]}")
    for g in "${all[@]}"; do out+=$(printf '%04x:' "0x$g"); done
    echo "${out%:}"
}

# ibv_*_pingpong over IPv6 GIDs, both ways: `$1` a note for the cell names, `$2` rxe's GID
# index, `$3` ours, then "TOOL ARGS" each. Their TCP exchange goes over IPv4 (the server listens
# on 0.0.0.0 only); the QPs over IPv6.
exec6_both_ways() {
    local note=$1 gguest=$2 ghost=$3 t
    shift 3
    for t in "$@"; do
        cell "$t$note: rxe server, roce exec client" ex_we_are_client \
            "$t -p $EXEC_PORT" "-d rxe0 -g $gguest" "-g $ghost"
        cell "$t$note: roce exec server, rxe client" ex_we_are_server \
            "$t -p $EXEC_PORT" "-d rxe0 -g $gguest" "-g $ghost"
    done
}

# UCX: ucx_perftest over rc_verbs (ud_verbs for its wire-up), rxe0 in the guest, roce0 ours; its
# own TCP exchange on port UCX_PORT. rxe's side runs with UCX_UD_ETH_DGID_CHECK=n: UCX 1.13.1
# drops every UD datagram that rxe (Linux 6.1) delivers at its destination-GID check, from rxe
# itself as well (two ucx_perftest on the guest's rxe0 never connect with it on), so that it
# could never wire up. Our side runs with UCX's defaults.
UCX_PORT=13337
UCX_GUEST_ENV="UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=rxe0:1 UCX_UD_ETH_DGID_CHECK=n"
UCX_HOST_ENV=(UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=roce0:1)
# The client's output `$1` must have its "Final:" line: prints it as the figure.
ucx_final() {
    local final
    final=$(grep -m1 '^Final:' <<<"$1") || { echo "no Final: line from ucx_perftest's client"; return 1; }
    # Final: iters typ_lat avg_lat overall_lat bw_avg bw_overall msgrate_avg msgrate_overall
    awk '{printf "figure: %s iterations, typical latency %s us, %s MB/s\n", $2, $3, $7}' <<<"$final"
}
ucx_we_are_client() {
    local args=$1 out rc=0
    # shellcheck disable=SC2086
    out=$(GUEST_PORT=$UCX_PORT rxe_serves "$UCX_GUEST_ENV timeout 60 ucx_perftest -p $UCX_PORT" \
        ns env "${UCX_HOST_ENV[@]}" timeout 60 "$ROCE_BIN" exec --ip "$INTEROP_HOST_IP" -- \
        ucx_perftest -p "$UCX_PORT" $args "$INTEROP_GUEST_IP" 2>&1) || rc=$?
    printf '%s\n' "$out"
    [ "$rc" = 0 ] && ucx_final "${out%%--- rxe:*}"
}
ucx_we_are_server() {
    local args=$1 ours out rc=0
    bg_in_ns env "${UCX_HOST_ENV[@]}" timeout 60 "$ROCE_BIN" exec --ip "$INTEROP_HOST_IP" -- \
        ucx_perftest -p "$UCX_PORT"
    ours=$INTEROP_LAST_BG
    EXEC_PORT=$UCX_PORT ex_wait_listening || { wait "$ours"; return 1; }
    out=$(run_in_guest -t 70 "$UCX_GUEST_ENV timeout 60 ucx_perftest -p $UCX_PORT $args $INTEROP_HOST_IP") || rc=$?
    printf '%s\n' "$out"
    wait "$ours" || rc=$?
    [ "$rc" = 0 ] || return 1
    ucx_final "$out"
}

# libfabric: fi_pingpong over the verbs provider's MSG endpoints (RC QPs connected through the
# RDMA CM), every size from 64 B to 1 MiB (its default), 10 iterations each; its own TCP
# exchange on port 47592. Each side must print a row per size with as many acknowledged as
# sent (`=10`).
FI_PORT=47592
FI_ARGS="-p verbs -e msg -I 10"
fi_rows() {
    local n
    n=$(grep -cE '^[0-9]+[kmg]? +10 +=10 ' <<<"$1" || true)
    [ "$n" = 6 ] || { echo "$2: $n of 6 sizes acknowledged"; return 1; }
}
fi_figure() { awk '$1 == "1m" {printf "figure: 64 B to 1 MiB acknowledged; 1 MiB: %s MB/s\n", $6}' <<<"$1"; }
fi_we_are_client() {
    local out ours rc=0
    # shellcheck disable=SC2086
    out=$(GUEST_PORT=$FI_PORT rxe_serves "timeout 60 fi_pingpong $FI_ARGS -d rxe0" \
        ns timeout 60 "$ROCE_BIN" exec --ip "$INTEROP_HOST_IP" -- fi_pingpong $FI_ARGS -d roce0 \
        "$INTEROP_GUEST_IP" 2>&1) || rc=$?
    printf '%s\n' "$out"
    ours=${out%%--- rxe:*}
    [ "$rc" = 0 ] && fi_rows "$ours" "ours" && fi_rows "${out#*--- rxe:}" "rxe's" && fi_figure "$ours"
}
# Our fi_pingpong server: the verbs provider finds its device by binding the address that
# `localhost` resolves to (rdma_getaddrinfo("localhost", RAI_PASSIVE)), which only a NIC on
# 127.0.0.1 holds; the server runs with a private /etc/hosts naming $INTEROP_HOST_IP localhost.
fi_we_are_server() {
    local ours out rc=0 hosts="$INTEROP_RUN/hosts-localhost"
    printf '%s localhost\n' "$INTEROP_HOST_IP" >"$hosts"
    bg_in_ns unshare -m sh -c "mount --bind '$hosts' /etc/hosts && exec timeout 60 '$ROCE_BIN' exec --ip '$INTEROP_HOST_IP' -- fi_pingpong $FI_ARGS -d roce0 >'$hosts.out' 2>&1"
    ours=$INTEROP_LAST_BG
    EXEC_PORT=$FI_PORT ex_wait_listening || { wait "$ours"; cat "$hosts.out"; return 1; }
    out=$(run_in_guest -t 70 "timeout 60 fi_pingpong $FI_ARGS -d rxe0 $INTEROP_HOST_IP") || rc=$?
    printf '%s\n' "$out"
    wait "$ours" || rc=$?
    echo "--- ours:"
    cat "$hosts.out"
    [ "$rc" = 0 ] && fi_rows "$out" "rxe's" && fi_rows "$(cat "$hosts.out")" "ours" && fi_figure "$out"
}

T_READY=$(date +%s)
for size in 64 4096 65536; do
    n=20; [ "$size" = 65536 ] && n=5
    cell "ibv_rc_pingpong -s $size: rxe server, roce client" pp_we_are_client "$size" "$n"
    cell "ibv_rc_pingpong -s $size: roce server, rxe client" pp_we_are_server "$size" "$n"
done
# 1 MiB READs are asked for in pieces (half our window each): against rxe as responder, and
# rxe's whole-READ requests against us.
for t in "ib_write_bw write -n 200" "ib_read_bw read -n 200" "ib_read_bw read -s 1048576 -n 20" \
         "ib_send_bw send -n 200" \
         "ib_atomic_bw atomic -n 200" "ib_send_lat send --lat -n 100" "ib_read_lat read --lat -n 100" \
         "ib_atomic_lat atomic --lat -n 100" "ib_write_lat write --lat -n 100"; do
    read -r tool verb flags <<<"$t"
    pflags=${flags/--lat /}
    cell "$tool $pflags: rxe server, roce client" pt_we_are_client "$tool" "$verb" "$flags"
    cell "$tool $pflags: roce server, rxe client" pt_we_are_server "$tool" "$verb" "$flags"
done
pt_cm_both_ways ib_send_bw send "-n 200"
pt_cm_both_ways ib_write_bw write "-n 200"
pt_cm_both_ways ib_read_bw read "-n 200"
CELLS_TO=$RESULTS_EXEC
exec_both_ways "" \
    "ibv_rc_pingpong -s 64 -n 20|-g" "ibv_rc_pingpong -s 4096 -n 20|-g" \
    "ibv_rc_pingpong -s 65536 -n 5|-g" "ibv_rc_pingpong -s 4096 -n 20 -e|-g" \
    "ibv_rc_pingpong -s 4096 -n 20 -N|-g" "ibv_uc_pingpong -s 4096 -n 20|-g" \
    "ibv_ud_pingpong -s 1000 -n 20|-g" \
    "ib_write_bw -n 200|-x" "ib_read_bw -n 200|-x" "ib_send_bw -n 200|-x" "ib_atomic_bw -n 200|-x" \
    "ib_write_lat -n 100|-x" "ib_read_lat -n 100|-x" "ib_send_lat -n 100|-x" \
    "ib_atomic_lat -n 100|-x"
cell "ib_write_bw -n 200 twice at once, two roce exec clients on one address: rxe servers" \
    shared_we_are_clients
CM_COUNT="ping data" CM_WHAT="pings verified (rping -V)" \
    cm_both_ways "rping -C 10 -S 1024 -V" "rping -s -v -V -C 10 -S 1024 -a @" "rping -c -v -V -C 10 -S 1024 -a @"
CM_COUNT="data transfers complete" CM_WHAT="ucmatose runs complete" \
    cm_both_ways "ucmatose -c 2 -C 10" "ucmatose -c 2 -C 10 -b @" "ucmatose -c 2 -C 10 -s @"
CM_COUNT="data transfers complete" CM_WHAT="udaddy runs complete (SIDR)" \
    cm_both_ways "udaddy -c 2 -C 10" "udaddy -c 2 -C 10 -b @" "udaddy -c 2 -C 10 -s @"
# perftest 4.5-0.17's -R client connects its test QPs right after the first handshake and
# does not survive a REJ (its retry reuses the ids it destroyed): against rxe's server in a
# TCG guest, which listens again later than a native host's, it always loses that race. Our
# own client (roce perf -R, which retries) covers that direction, in the first table.
CM_SERVER_ONLY=1 cm_both_ways "ib_send_bw -R -n 200" "ib_send_bw -R -n 200" "ib_send_bw -R -n 200 @"
CM_SERVER_ONLY=1 cm_both_ways "ib_write_bw -R -n 200" "ib_write_bw -R -n 200" "ib_write_bw -R -n 200 @"
cell "ucx_perftest -t tag_bw -s 65536 -n 200 (rc_verbs): rxe server, roce exec client" \
    ucx_we_are_client "-t tag_bw -s 65536 -n 200 -w 20"
cell "ucx_perftest -t tag_bw -s 65536 -n 200 (rc_verbs): roce exec server, rxe client" \
    ucx_we_are_server "-t tag_bw -s 65536 -n 200 -w 20"
cell "ucx_perftest -t tag_lat -s 8 -n 1000 (rc_verbs): rxe server, roce exec client" \
    ucx_we_are_client "-t tag_lat -s 8 -n 1000 -w 100"
cell "ucx_perftest -t tag_lat -s 8 -n 1000 (rc_verbs): roce exec server, rxe client" \
    ucx_we_are_server "-t tag_lat -s 8 -n 1000 -w 100"
cell "fi_pingpong -p verbs -e msg -I 10: rxe server, roce exec client" fi_we_are_client
cell "fi_pingpong -p verbs -e msg -I 10: roce exec server, rxe client" fi_we_are_server
if [ -z "${INTEROP_CELLS:-}" ] || grep -qE -- "$INTEROP_CELLS" <<<"IPv6"; then
    if ipv6_up; then
        EXEC_IP=$HOST_IP6
        exec6_both_ways ", IPv6 $GUEST_IP6 (GID $G6) / $HOST_IP6 (GID 1)" "$G6" 1 \
            "ibv_rc_pingpong -s 4096 -n 20" "ibv_ud_pingpong -s 1000 -n 20"
        exec6_both_ways ", IPv6 link-local (GID $G6LL / GID 0)" "$G6LL" 0 "ibv_rc_pingpong -s 4096 -n 20"
        CM_COUNT="ping data" CM_WHAT="pings verified (rping -V)" \
            CM_GUEST_SELF=$GUEST_IP6 CM_GUEST_PEER=$GUEST_IP6 CM_HOST_SELF=$HOST_IP6 CM_HOST_PEER=$HOST_IP6 \
            cm_both_ways "rping -C 10 -S 1024 -V, IPv6 $GUEST_IP6 / $HOST_IP6" \
            "rping -s -v -V -C 10 -S 1024 -a @" "rping -c -v -V -C 10 -S 1024 -a @"
        CM_COUNT="ping data" CM_WHAT="pings verified (rping -V)" \
            CM_GUEST_SELF="$GUEST_LL%eth0" CM_GUEST_PEER="$GUEST_LL%$INTEROP_BR" \
            CM_HOST_SELF="$BR_LL%$INTEROP_BR" CM_HOST_PEER="$BR_LL%eth0" \
            cm_both_ways "rping -C 10 -S 1024 -V, IPv6 link-local" \
            "rping -s -v -V -C 10 -S 1024 -a @" "rping -c -v -V -C 10 -S 1024 -a @"
        EXEC_IP=$INTEROP_HOST_IP
    else
        printf '%s\t%s\t%s\t%s\n' "IPv6 cells" "FAIL" 0 "IPv6 addresses or rxe's IPv6 GIDs not set up" >>"$CELLS_TO"
        failures=$((failures + 1))
    fi
fi
CELLS_TO=$RESULTS
peer_ns ip addr add "$RAW_TCP_IP/24" dev "$INTEROP_PEER_IF"
for size in 64 4096 65536; do
    n=20; [ "$size" = 65536 ] && n=5
    cell "ibv_rc_pingpong -s $size: rxe server, roce client (raw backend)" pp_raw_client "$size" "$n"
    cell "ibv_rc_pingpong -s $size: roce server (raw backend), rxe client" pp_raw_server "$size" "$n"
done
for t in "ib_write_bw write -n 200" "ib_read_bw read -n 200" "ib_send_bw send -n 200" "ib_atomic_bw atomic -n 200"; do
    read -r tool verb flags <<<"$t"
    cell "$tool $flags: rxe server, roce client (raw backend)" pt_raw_client "$tool" "$verb" "$flags"
    cell "$tool $flags: roce server (raw backend), rxe client" pt_raw_server "$tool" "$verb" "$flags"
done
loss_on
for t in "ib_write_bw write -n 200" "ib_read_bw read -n 200" "ib_read_bw read -s 1048576 -n 20" \
         "ib_send_bw send -n 200"; do
    read -r tool verb flags <<<"$t"
    cell "$tool $flags, 1 % loss: rxe server, roce client" pt_we_are_client "$tool" "$verb" "$flags"
    cell "$tool $flags, 1 % loss: roce server, rxe client" pt_we_are_server "$tool" "$verb" "$flags"
done
cell "ibv_rc_pingpong -s 4096, 1 % loss: rxe server, roce client" pp_we_are_client 4096 50
cell "ibv_rc_pingpong -s 4096, 1 % loss: roce server, rxe client" pp_we_are_server 4096 50
cell "ibv_rc_pingpong -s 4096, 1 % loss: rxe server, roce client (raw backend)" pp_raw_client 4096 50
cell "ibv_rc_pingpong -s 4096, 1 % loss: roce server (raw backend), rxe client" pp_raw_server 4096 50
CELLS_TO=$RESULTS_EXEC
exec_both_ways ", 1 % loss" "ibv_rc_pingpong -s 4096 -n 50|-g" "ib_write_bw -n 200|-x" "ib_read_bw -n 200|-x"
CELLS_TO=$RESULTS
loss_off
if mtu_9000; then
    for size in 4096 65536; do
        cell "ibv_rc_pingpong -s $size -m 4096: rxe server, roce client" pp_we_are_client "$size" 10 -m 4096
        cell "ibv_rc_pingpong -s $size -m 4096: roce server, rxe client" pp_we_are_server "$size" 10 -m 4096
    done
    cell "ib_write_bw -m 4096: rxe server, roce client" pt_we_are_client ib_write_bw write "-n 200 -m 4096"
    cell "ib_write_bw -m 4096: roce server, rxe client" pt_we_are_server ib_write_bw write "-n 200 -m 4096"
    # Our port's active MTU is 4096 too (roce exec --mtu 4096), as rxe's on a 9000-byte netdev.
    CELLS_TO=$RESULTS_EXEC EXEC_OPTS="--mtu 4096"
    exec_both_ways "" "ibv_rc_pingpong -s 65536 -n 10 -m 4096|-g" "ib_write_bw -n 200 -m 4096|-x" \
        "ibv_ud_pingpong -s 4000 -n 20|-g"
    CELLS_TO=$RESULTS EXEC_OPTS=""
else
    printf '%s\t%s\t%s\t%s\n' "MTU 4096 cells" "FAIL" 0 "rxe's active MTU did not become 4096" >>"$RESULTS"
    failures=$((failures + 1))
fi
T_TESTS=$(date +%s)

guest_stop
bg_stop "$TCPDUMP_PID"
if "$ROCE_BIN" dump --strict -q "$PCAP" >"$INTEROP_RUN/dump.txt" 2>"$INTEROP_RUN/dump.err"; then
    printf '%s\t%s\t%s\t%s\n' "roce dump --strict of the bridge capture" pass 0 "$(tail -n1 "$INTEROP_RUN/dump.err")" >>"$RESULTS"
    log "PASS roce dump --strict on the bridge capture: $(tail -n1 "$INTEROP_RUN/dump.err")"
else
    printf '%s\t%s\t%s\t%s\n' "roce dump --strict of the bridge capture" FAIL 0 "$(tail -n1 "$INTEROP_RUN/dump.err")" >>"$RESULTS"
    log "FAIL roce dump --strict on the bridge capture: $(tail -n2 "$INTEROP_RUN/dump.err")"
    failures=$((failures + 1))
fi
# Wireshark's reading of the same capture: no malformed packet, and the CM MADs of the RDMA CM
# cells decoded. Two of its payload heuristics are off: RPC-over-RDMA claims the payload of
# every small RC SEND (perftest's and rping's messages) and CRTP that of some UD SENDs
# (ibv_ud_pingpong's), rxe's as much as ours, and both report them malformed.
if command -v tshark >/dev/null 2>&1; then
    tshark_rdma() { tshark --disable-protocol rpcordma --disable-protocol crtp -r "$PCAP" "$@" 2>/dev/null; }
    malformed=$(tshark_rdma -Y _ws.malformed | wc -l)
    mads=$(tshark_rdma -Y infiniband.mad.attributeid | wc -l)
    figure="$malformed malformed frames; $mads CM MADs decoded"
    if [ "$malformed" = 0 ] && { [ -n "${INTEROP_CELLS:-}" ] || [ "$mads" -gt 0 ]; }; then
        printf '%s\t%s\t%s\t%s\n' "tshark on the bridge capture" pass 0 "$figure" >>"$RESULTS"
        log "PASS tshark on the bridge capture: $figure"
    else
        printf '%s\t%s\t%s\t%s\n' "tshark on the bridge capture" FAIL 0 "$figure" >>"$RESULTS"
        log "FAIL tshark on the bridge capture: $figure"
        failures=$((failures + 1))
    fi
fi

{
    echo "# Interop matrix (generated by tests/interop/matrix.sh — do not edit)"
    echo
    echo "Our NIC: \`roce\` with the UDP backend at $INTEROP_HOST_IP, or with the raw backend playing"
    echo "$INTEROP_PEER_IP on a veth (out-of-band TCP via $RAW_TCP_IP), each in a network namespace; the"
    echo "peer: the kernel's rxe in a QEMU guest at $INTEROP_GUEST_IP (Debian 12, Linux 6.1, rdma-core 44),"
    echo "GID index $G. The raw backend checks every received ICRC in full (IPv4 ID included)."
    echo "Run of $(date -u +%Y-%m-%d) on $(uname -m), $(nproc) cores; cells in $((T_TESTS - T_READY)) s."
    echo
    echo "| cell | result | seconds | figures printed by the tools |"
    echo "|---|---|---|---|"
    while IFS=$'\t' read -r name status secs figure; do
        echo "| $name | $status | $secs | $figure |"
    done <"$RESULTS"
    echo
    echo "## Debian's tools on both sides"
    echo
    echo "The same unmodified Debian program on both ends (ibverbs-utils $(dpkg-query -W -f '${Version}' ibverbs-utils 2>/dev/null || echo '?'),"
    echo "perftest $(dpkg-query -W -f '${Version}' perftest 2>/dev/null || echo '?') on the host): on rxe in the guest, and under \`roce exec\` on our NIC"
    echo "on the host (roce-emu's libibverbs.so.1, UDP backend at $INTEROP_HOST_IP, GID index 1)."
    echo "Middleware: UCX $(dpkg-query -W -f '${Version}' ucx-utils 2>/dev/null || echo '?') (ucx_perftest over rc_verbs; rxe's side with"
    echo "UCX_UD_ETH_DGID_CHECK=n, without which UCX drops rxe's UD datagrams, rxe's own too) and libfabric"
    echo "$(dpkg-query -W -f '${Version}' libfabric-bin 2>/dev/null || echo '?') (fi_pingpong, verbs provider, MSG endpoints; our server with \`localhost\` naming"
    echo "$INTEROP_HOST_IP, the address its verbs provider binds to find the device). IPv6: our NIC at $HOST_IP6"
    echo "(GID 1; GID 0 the bridge's link-local address), rxe's eth0 at $GUEST_IP6 (GID ${G6:-?}) and its link-local"
    echo "address (GID ${G6LL:-?}); the pingpongs' TCP exchange stays on IPv4, rping connects over IPv6."
    echo
    echo "| cell | result | seconds | figures printed by the tools |"
    echo "|---|---|---|---|"
    while IFS=$'\t' read -r name status secs figure; do
        echo "| $name | $status | $secs | $figure |"
    done <"$RESULTS_EXEC"
    echo
    echo "Not yet in the matrix: several QPs (-q), -a and -D, the raw backend over IPv6. See docs/interop.md."
} >"$INTEROP_RUN/interop-matrix.md"
if [ -z "${INTEROP_CELLS:-}" ]; then
    cp "$INTEROP_RUN/interop-matrix.md" "$INTEROP_REPO/docs/interop-matrix.md"
fi
log "matrix: docs/interop-matrix.md; artifacts: $INTEROP_RUN; total $(( $(date +%s) - T0 ))s"
[ "$failures" -eq 0 ] || { log "interop matrix FAILED: $failures cell(s)"; exit 1; }
log "interop matrix passed"
