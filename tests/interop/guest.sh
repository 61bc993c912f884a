#!/usr/bin/env bash
# The rxe guest by hand (needs tests/interop/setup.sh first; root).
#   guest.sh up            boot the guest and keep it (and the namespaces) until Ctrl-C
#   guest.sh run CMD...    boot, run CMD in the guest (sh -c), print its output, tear down;
#                          exits with CMD's status
#   guest.sh exec CMD...   run CMD in the guest that a `guest.sh up` elsewhere keeps running
# Host-side peers run in the namespace: ip netns exec roce-interop-host CMD (198.18.0.1), or
# ip netns exec roce-interop-peer CMD (raw peer on rpeer0). See docs/interop.md.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
mode=${1:-up}
[ $# -gt 0 ] && shift

case "$mode" in
    exec)
        [ $# -gt 0 ] || usage
        INTEROP_RUN=$(readlink "$INTEROP_CACHE/current" 2>/dev/null) ||
            die "no running guest (start one with: tests/interop/guest.sh up)"
        [ -d "$INTEROP_RUN/share/q" ] || die "no running guest in $INTEROP_RUN"
        rc=0
        run_in_guest -t "${INTEROP_EXEC_TIMEOUT:-600}" "$*" || rc=$?
        exit "$rc"
        ;;
    up|run)
        need_root
        [ "$mode" = up ] || [ $# -gt 0 ] || usage
        interop_traps
        net_up
        rc=0
        guest_boot || rc=$?
        [ "$rc" = 0 ] || die "guest did not become ready (rc=$rc)"
        if [ "$mode" = run ]; then
            rc=0
            run_in_guest -t "${INTEROP_EXEC_TIMEOUT:-600}" "$*" || rc=$?
            guest_stop
            exit "$rc"
        fi
        ln -sfn "$INTEROP_RUN" "$INTEROP_CACHE/current"
        grep -E 'active_mtu|GID\[' "$INTEROP_RUN/share/guest-info.txt"
        log "guest up: $INTEROP_GUEST_IP (rxe0, GID index $(cat "$INTEROP_RUN/share/gid-index"))." \
            "Commands: $0 exec CMD; host side: ip netns exec $INTEROP_NS CMD. Ctrl-C stops."
        while kill -0 "$INTEROP_QEMU_PID" 2>/dev/null; do sleep 1; done
        rm -f "$INTEROP_CACHE/current"
        die "guest stopped"
        ;;
    *) usage ;;
esac
