# Shared by bench/exec.sh, bench/middleware.sh and bench/veth.sh (sourced, not run): two
# network namespaces joined by a veth pair, waiting for a TCP listener in one, perftest's result
# rows, the median of numbers, and installing what a script needs.
#   veth_pair NAME_A NAME_B IP_A IP_B
# creates namespaces NAME_A (device va, IP_A/24) and NAME_B (vb, IP_B/24), MTU 9000 so that
# RoCE's 4096-byte packets cross whole, lo up in both, and removes both when the script exits;
# sets A and B and defines `ina CMD…` and `inb CMD…` to run CMD in either.
#   scratch VAR [-d]
# sets VAR to a new temporary file (directory, with -d), removed with the namespaces.
#   need_root
# ends the script with a SKIP line (status 0) unless it runs as root, as namespaces need.
#   steady CMD…
# runs CMD, a goodput cell that prints its figures, with `$STEADY_BLAST cores` (bench/blast) sampling
# how far apart CPUs 0 and 1 are meanwhile; while they were far apart (a cache line's round
# trip over STEADY_FAR_NS, 150) in more than STEADY_FAR % (25) of the samples, runs it again,
# at most STEADY_TRIES (3) times in all, ours and the anchors alike; prints the last run's
# output, and appends "far-percent tries" to $STEADY_LOG if set. On a guest whose host moves
# its two vCPUs between cores that share a cache and cores that do not, a cell in the far state
# moves about half the bytes (docs/benchmarks.md, "Two vCPUs, near and far"). Without a second
# CPU it runs CMD once. Latency cells are not wrapped: the sampler's spinning would be in
# their tails.

need_root() { [ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 0; }; }

SCRATCH=()
scratch() { printf -v "$1" '%s' "$(mktemp "${@:2}")"; SCRATCH+=("${!1}"); }
veth_pair() {
    A=$1; B=$2
    trap 'rm -rf ${SCRATCH[@]+"${SCRATCH[@]}"}; ip netns delete "$A" 2>/dev/null || true; ip netns delete "$B" 2>/dev/null || true' EXIT INT TERM
    ip netns add "$A"; ip netns add "$B"
    ip -n "$A" link add va type veth peer name vb netns "$B"
    local x ns dev ip
    for x in "$A va $3" "$B vb $4"; do
        read -r ns dev ip <<<"$x"
        ip -n "$ns" addr add "$ip/24" dev "$dev"; ip -n "$ns" link set "$dev" mtu 9000 up; ip -n "$ns" link set lo up
    done
}
ina() { ip netns exec "$A" "$@"; }
inb() { ip netns exec "$B" "$@"; }
# The median of the numbers on stdin, one a line.
median() { sort -g | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
# Waits (at most 10 s) until namespace b listens on TCP port $1 (18515 by default, perftest's):
# perftest's server takes one connection only, so it cannot be probed by connecting.
listening() {
    local port=${1:-18515}
    for _ in $(seq 100); do
        [ -n "$(inb ss -Hltn "sport = :$port")" ] && return 0
        sleep 0.1
    done
    echo "nothing listens on TCP port $port in $B" >&2
    return 1
}
# perftest's result row: the line after the "#bytes" header; column $1 of it.
row() { awk -v c="$1" 'found && $1 ~ /^[0-9]+$/ {print $c; exit} /#bytes/ {found=1}'; }
# `need COMMAND PACKAGE...`: installs Debian's PACKAGEs when COMMAND is missing.
need() {
    command -v "$1" >/dev/null && return 0
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${@:2}" >/dev/null
}
# steady CMD…: see the top of this file.
steady() {
    local tries=0 far out samples watch
    while :; do
        tries=$((tries + 1))
        samples=$(mktemp)
        if [ "$(nproc)" -ge 2 ]; then
            "$STEADY_BLAST" cores --round-trips 1000 --every-ms 50 >"$samples" 2>/dev/null & watch=$!
        else
            watch=''
        fi
        out=$("$@")
        if [ -n "$watch" ]; then kill "$watch" 2>/dev/null; wait "$watch" 2>/dev/null || true; fi
        far=$(awk -v t="${STEADY_FAR_NS:-150}" '{n++; if ($2 > t) f++} END{printf "%.0f", n ? 100 * f / n : 0}' "$samples")
        rm -f "$samples"
        if [ "$far" -le "${STEADY_FAR:-25}" ] || [ "$tries" -ge "${STEADY_TRIES:-3}" ]; then
            break
        fi
    done
    [ -n "${STEADY_LOG:-}" ] && echo "$far $tries" >>"$STEADY_LOG"
    printf '%s\n' "$out"
}
# steady_summary LOG: one sentence on a script's `steady` cells, from its STEADY_LOG.
steady_summary() {
    awk -v t="${STEADY_FAR_NS:-150}" -v f="${STEADY_FAR:-25}" '
        {n++; if ($2 > 1) again++; if ($1 > f) kept_far++}
        END {if (!n) exit; printf "Goodput cells: %d, of which %d measured again because CPUs 0 and 1 were far apart (a cache line'"'"'s round trip over %d ns) in more than %d %% of a run (bench/lib.sh, steady), %d still far at the last try.", n, again, t, f, kept_far}' "$1"
}
