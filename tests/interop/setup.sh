#!/usr/bin/env bash
# Prepares the rxe interop harness on a fresh Debian 12 machine (as root):
#   1. installs the host tools (QEMU, busybox, cpio, kmod, iproute2, tcpdump) with apt-get;
#   2. downloads (apt-get download, never installed on the host) Debian 12's kernel, rdma-core's
#      user space, perftest, iproute2 and their shared-library dependencies;
#   3. builds a guest: the package's vmlinuz plus an initramfs with busybox, the kernel modules
#      rxe needs (resolved from modules.dep), the tools, their libraries and /init.
# Everything goes to $INTEROP_CACHE (default target/interop/). A re-run reuses the cache; it
# rebuilds the initramfs only when this script or guest-init.sh changed.
#   INTEROP_FORCE=1    rebuild the initramfs even if it looks current
#   INTEROP_KEEP_STAGE=1  keep the unpacked packages and the initramfs tree (about 500 MB)
#   INTEROP_NO_APT=1   do not install host packages (fail if missing)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STAGE="$INTEROP_CACHE/stage"        # every downloaded .deb unpacked
DEBS="$INTEROP_CACHE/debs"
GUEST="$INTEROP_CACHE/guest"
ROOT="$INTEROP_CACHE/initramfs-root"

# Packages whose files go into the guest, plus all their Depends/Pre-Depends (only the shared
# libraries that the chosen binaries really load are copied in). rdma-core itself is not needed:
# iproute2 provides the `rdma` tool, and rdma-core only brings udev rules and services.
GUEST_PKGS=(ibverbs-utils ibverbs-providers libibverbs1 perftest rdmacm-utils librdmacm1
    libnl-3-200 libnl-route-3-200 iproute2 tcpdump libgcc-s1 ucx-utils libucx0 libfabric-bin
    libfabric1)
# Binaries (paths inside the packages) to copy in with their libraries.
GUEST_BIN_GLOBS=(/usr/bin/ibv_* /usr/bin/ib_* /usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy
    /usr/bin/rdma_client /usr/bin/rdma_server /usr/bin/rdma_xclient /usr/bin/rdma_xserver
    /usr/bin/riostream /usr/bin/rstream /usr/bin/mckey /usr/bin/cmtime
    /bin/ip /sbin/ip /sbin/tc /sbin/rdma /usr/bin/rdma /bin/ss /sbin/bridge /usr/bin/tcpdump
    /usr/sbin/tcpdump /usr/bin/ucx_perftest /usr/bin/ucx_info /usr/bin/fi_pingpong /usr/bin/fi_info)
# Libraries loaded with dlopen (no binary names them, so ldd does not find them): UCX's transport
# modules (libuct_ib: rc_verbs, ud_verbs; libuct_rdmacm) and, should a Debian release build them
# as modules, libfabric's providers (Debian 12's are inside libfabric.so.1). Copied with their
# own libraries.
GUEST_DLOPEN_GLOBS=(/usr/lib/x86_64-linux-gnu/ucx/*.so* /usr/lib/x86_64-linux-gnu/libfabric/*.so*)
# Kernel modules (names); their dependencies are added from modules.dep.
GUEST_MODULES=(virtio_pci virtio_net 9pnet_virtio 9p crc32_generic crc32_pclmul
    udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_cm rdma_ucm rdma_rxe sch_netem veth)

HOST_TOOLS=(qemu-system-x86_64:qemu-system-x86 busybox:busybox-static cpio:cpio depmod:kmod
    ip:iproute2 tcpdump:tcpdump gzip:gzip dpkg-deb:dpkg ethtool:ethtool)

apt_updated=0
apt_update_once() {
    if [ "$apt_updated" = 0 ]; then
        log "apt-get update"
        apt-get update -qq
        apt_updated=1
    fi
}

# `staged GLOB...`: the files of the unpacked packages that match each path glob, as paths
# inside the guest (the stage's prefix cut), one a line.
staged() {
    local g f
    shopt -s nullglob
    for g in "$@"; do
        for f in "$STAGE"$g; do
            [ -f "$f" ] && printf '%s\n' "${f#"$STAGE"}"
        done
    done
    shopt -u nullglob
}

install_host_tools() {
    local missing=() t
    for t in "${HOST_TOOLS[@]}"; do
        command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t#*:}")
    done
    # busybox-static specifically: the dynamic busybox would need the host's libc in the guest.
    [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || missing+=(busybox-static)
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "${INTEROP_NO_APT:-0}" = 1 ] && die "missing host packages: ${missing[*]}"
    apt_update_once
    log "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
}

# Prints the dependency closure (Depends + Pre-Depends) of the given packages, one a line.
closure() {
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances "$@" | grep -v '^[ <]' | sed 's/:amd64$//' | sort -u
}

download_debs() {
    mkdir -p "$DEBS"
    if ! apt-cache show linux-image-amd64 >/dev/null 2>&1; then apt_update_once; fi
    local kpkg
    kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    [ -n "$kpkg" ] || die "cannot resolve linux-image-amd64"
    local pkgs=("$kpkg") p
    mapfile -t -O 1 pkgs < <(closure "${GUEST_PKGS[@]}")
    local need=()
    for p in "${pkgs[@]}"; do
        compgen -G "$DEBS/${p}_*.deb" >/dev/null || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        log "apt-get download ${#need[@]} packages into $DEBS"
        (cd "$DEBS" && apt-get -o APT::Sandbox::User=root download "${need[@]}" >/dev/null) || {
            apt_update_once
            (cd "$DEBS" && apt-get -o APT::Sandbox::User=root download "${need[@]}" >/dev/null)
        }
    else
        log "all ${#pkgs[@]} packages already in $DEBS"
    fi
    # Drop packages that are no longer wanted (e.g. the previous kernel ABI after an update).
    local d keep=" ${pkgs[*]} "
    for d in "$DEBS"/*.deb; do
        p=${d##*/}; p=${p%%_*}
        case "$keep" in *" $p "*) ;; *) log "dropping $p (no longer needed)"; rm -f "$d" ;; esac
    done
    KPKG=$kpkg
    PKG_LIST=("${pkgs[@]}")
}

unpack_debs() {
    local stamp="$STAGE/.unpacked" list
    list=$(cd "$DEBS" && ls -1 ./*.deb | sort | sha256sum | cut -c1-16)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$list" ]; then
        return 0
    fi
    log "unpacking $(ls -1 "$DEBS"/*.deb | wc -l) packages into $STAGE"
    rm -rf "$STAGE"
    mkdir -p "$STAGE"
    local d
    for d in "$DEBS"/*.deb; do
        dpkg-deb -x "$d" "$STAGE"
    done
    echo "$list" >"$stamp"
}

# Copies a file from the stage into the initramfs, under /usr (the initramfs is /usr-merged).
put() {
    local src=$1 dst=${2:-$1}
    case "$dst" in
        /usr/*) ;;
        /lib/*|/lib64/*|/bin/*|/sbin/*) dst=/usr$dst ;;
    esac
    mkdir -p "$ROOT$(dirname "$dst")"
    cp -L "$STAGE$src" "$ROOT$dst"
}

# Shared libraries that a staged ELF file needs, as absolute paths inside the stage. Dies when
# one cannot be found there (the loader then stops listing, and the guest would lack the rest).
needed_libs() {
    local out
    out=$(chroot "$STAGE" /lib64/ld-linux-x86-64.so.2 --list "$1" 2>&1) ||
        die "$1: $(tail -n1 <<<"$out")"
    awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' <<<"$out"
}

# The links that packages' maintainer scripts make with update-alternatives, which unpacking
# does not run: libpsm-infinipath1's libpsm_infinipath.so.1 (libfabric1 links to it).
stage_alternatives() {
    local d=$STAGE/usr/lib/x86_64-linux-gnu f
    for f in "$STAGE"/usr/lib/libpsm1/libpsm_infinipath.so.1.*; do
        [ -e "$f" ] && [ ! -e "$d/libpsm_infinipath.so.1" ] &&
            ln -s "../libpsm1/${f##*/}" "$d/libpsm_infinipath.so.1"
    done
    return 0
}

# modules.dep order: dependencies before dependants.
module_order() {
    local kver=$1 moddir="$STAGE/lib/modules/$1"
    declare -A seen=()
    local out=()
    visit() {
        local rel=$1 dep
        [ -n "${seen[$rel]:-}" ] && return 0
        seen[$rel]=1
        for dep in $(awk -F': *' -v m="$rel" '$1==m{print $2}' "$moddir/modules.dep"); do
            visit "$dep"
        done
        out+=("$rel")
    }
    local m rel
    for m in "${GUEST_MODULES[@]}"; do
        rel=$(awk -F: -v m="$m" '{n=$1; sub(/.*\//,"",n); sub(/\.ko.*/,"",n); gsub(/-/,"_",n)
              x=m; gsub(/-/,"_",x); if (n==x) {print $1; exit}}' "$moddir/modules.dep")
        if [ -z "$rel" ]; then
            grep -q "/${m}.ko" "$moddir/modules.builtin" && continue
            die "module $m not in $kver"
        fi
        visit "$rel"
    done
    printf '%s\n' "${out[@]}"
}

guest_inputs() {
    (cat "$INTEROP_DIR/setup.sh" "$INTEROP_DIR/guest-init.sh"; printf '%s\n' "${PKG_LIST[@]}"
        ls "$DEBS") | sha256sum | cut -c1-16
}

guest_current() {
    [ "${INTEROP_FORCE:-0}" != 1 ] && guest_artifacts_present &&
        [ "$(cat "$GUEST/.inputs" 2>/dev/null)" = "$(guest_inputs)" ]
}

build_initramfs() {
    local kver=${KPKG#linux-image-}
    local inputs
    inputs=$(guest_inputs)
    log "building the initramfs ($kver)"
    [ -f "$STAGE/lib/modules/$kver/modules.dep" ] || depmod -b "$STAGE" "$kver"

    rm -rf "$ROOT"
    mkdir -p "$ROOT"/usr/{bin,sbin,lib,lib64} "$ROOT"/{etc,proc,sys,dev,tmp,run,root,share}
    ln -s usr/bin "$ROOT/bin"; ln -s usr/sbin "$ROOT/sbin"
    ln -s usr/lib "$ROOT/lib"; ln -s usr/lib64 "$ROOT/lib64"

    # Tools and the libraries they load.
    local f libs=() bins=()
    mapfile -t bins < <(staged "${GUEST_BIN_GLOBS[@]}")
    # libibverbs loads its provider with dlopen: add rxe's by hand, and its libraries.
    local prov
    prov=$(cd "$STAGE" && ls usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so)
    [ -n "$prov" ] || die "no rxe provider in ibverbs-providers"
    local mods=()
    mapfile -t mods < <(staged "${GUEST_DLOPEN_GLOBS[@]}")
    [ ${#mods[@]} -gt 0 ] || die "no UCX modules in libucx0"
    stage_alternatives
    local needed
    for f in "${bins[@]}" "/$prov" "${mods[@]}"; do
        put "$f"
        needed=$(needed_libs "$f") || exit 1
        mapfile -t -O "${#libs[@]}" libs <<<"$needed"
    done
    for f in $(printf '%s\n' "${libs[@]}" | sort -u); do
        put "$f"
    done
    put /lib64/ld-linux-x86-64.so.2
    # glibc loads libgcc_s with dlopen to unwind a thread it cancels or exits (rping's threads):
    # no binary names it, so it is added by hand.
    local gcc_s
    gcc_s=$(cd "$STAGE" && ls lib/x86_64-linux-gnu/libgcc_s.so.1 usr/lib/x86_64-linux-gnu/libgcc_s.so.1 2>/dev/null | head -n1 || true)
    [ -n "$gcc_s" ] || die "no libgcc_s.so.1 in the unpacked packages (libgcc-s1)"
    put "/$gcc_s"
    mkdir -p "$ROOT/etc/libibverbs.d"
    cp "$STAGE/etc/libibverbs.d/rxe.driver" "$ROOT/etc/libibverbs.d/"
    [ -d "$STAGE/usr/lib/tc" ] && cp -r "$STAGE/usr/lib/tc" "$ROOT/usr/lib/"   # netem tables
    [ -d "$STAGE/etc/iproute2" ] && cp -r "$STAGE/etc/iproute2" "$ROOT/etc/"
    echo "${#bins[@]} binaries, ${#mods[@]} dlopen'd modules, $(printf '%s\n' "${libs[@]}" | sort -u | wc -l) libraries" >&2

    # busybox for everything else (applets never shadow a real tool).
    cp /bin/busybox "$ROOT/usr/bin/busybox"
    local a
    for a in $(/bin/busybox --list); do
        [ -e "$ROOT/usr/bin/$a" ] || [ -e "$ROOT/usr/sbin/$a" ] || ln -s busybox "$ROOT/usr/bin/$a"
    done
    ln -sf ../bin/busybox "$ROOT/usr/sbin/modprobe"
    # Debian's busybox-static runs its own applet for a bare command name even when a real tool
    # of that name comes first in PATH (ip, tc, ...). Shell functions win over applets, so the
    # guest's shells source this file to get iproute2's ip/tc and the other real tools.
    mkdir -p "$ROOT/etc/interop"
    {
        echo "# generated by tests/interop/setup.sh: real tools over busybox applets"
        for a in $(/bin/busybox --list); do
            [ "$a" = busybox ] && continue
            for f in "$ROOT/usr/sbin/$a" "$ROOT/usr/bin/$a"; do
                if [ -f "$f" ] && [ ! -L "$f" ]; then
                    echo "$a() { ${f#"$ROOT"} \"\$@\"; }"
                    break
                fi
            done
        done
    } >"$ROOT/etc/interop/profile"

    # Kernel modules, in load order.
    local mdst="$ROOT/usr/lib/modules/$kver"
    mkdir -p "$mdst" "$ROOT/etc/interop"
    module_order "$kver" >"$ROOT/etc/interop/modules.order"
    while read -r f; do
        mkdir -p "$mdst/$(dirname "$f")"
        cp "$STAGE/lib/modules/$kver/$f" "$mdst/$f"
    done <"$ROOT/etc/interop/modules.order"
    cp "$STAGE/lib/modules/$kver"/modules.{order,builtin} "$mdst/" 2>/dev/null || true
    depmod -b "$ROOT/usr" "$kver" 2>/dev/null || true   # so that modprobe works for what is there
    echo "$(wc -l <"$ROOT/etc/interop/modules.order") modules:" \
        "$(xargs -n1 basename <"$ROOT/etc/interop/modules.order" | sed 's/\.ko.*//' | tr '\n' ' ')" >&2

    printf 'root:x:0:0:root:/root:/bin/sh\ntcpdump:x:0:0::/:/bin/false\n' >"$ROOT/etc/passwd"
    printf 'root:x:0:\n' >"$ROOT/etc/group"
    printf '127.0.0.1 localhost\n%s guest\n' "$INTEROP_GUEST_IP" >"$ROOT/etc/hosts"
    install -m 0755 "$INTEROP_DIR/guest-init.sh" "$ROOT/init"

    mkdir -p "$GUEST"
    (cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -1 >"$GUEST/initramfs.cpio.gz.tmp"
    mv "$GUEST/initramfs.cpio.gz.tmp" "$GUEST/initramfs.cpio.gz"
    cp "$STAGE/boot/vmlinuz-$kver" "$GUEST/vmlinuz"
    echo "$inputs" >"$GUEST/.inputs"
    echo "$kver" >"$GUEST/kernel-version"
    log "guest: $GUEST/vmlinuz ($(du -h "$GUEST/vmlinuz" | cut -f1)), initramfs $(du -h "$GUEST/initramfs.cpio.gz" | cut -f1)"
}

main() {
    [ "$(id -u)" = 0 ] || die "run as root"
    mkdir -p "$INTEROP_CACHE"
    local t0 t1 t2 t3
    t0=$(date +%s)
    install_host_tools
    t1=$(date +%s)
    download_debs
    t2=$(date +%s)
    if guest_current; then
        log "guest in $GUEST is current ($(cat "$GUEST/kernel-version"))"
    else
        unpack_debs
        build_initramfs
        if [ "${INTEROP_KEEP_STAGE:-0}" != 1 ]; then
            rm -rf "$STAGE" "$ROOT"
        fi
    fi
    t3=$(date +%s)
    log "setup done: host tools $((t1 - t0))s, download $((t2 - t1))s, unpack+initramfs $((t3 - t2))s"
}

main "$@"
