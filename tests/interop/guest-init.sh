#!/bin/sh
# /init of the interop guest (busybox sh). Built into the initramfs by tests/interop/setup.sh.
# Loads the modules, brings up eth0 with the address given as interop.ip=ADDR/LEN on the kernel
# command line, adds rxe0 on eth0, prints the device and its GID table, prints the readiness
# marker, then runs the jobs that the host drops into the 9p share (see lib.sh, run_peer_in_guest).
export PATH=/usr/sbin:/usr/bin
export HOME=/root
umask 022
# iproute2's ip/tc instead of busybox's applets of the same name (see setup.sh).
. /etc/interop/profile

# stage NAME: one console line with the guest's uptime, to see where boot time goes.
stage() { echo "interop: $(cut -d' ' -f1 /proc/uptime)s $*"; }

fail() {
    echo "ROCE-INTEROP-FAILED: $*"
    sleep 1
    poweroff -f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /tmp /run /share
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
echo /usr/sbin/modprobe >/proc/sys/kernel/modprobe 2>/dev/null

stage "init started"
# Modules, dependencies first (order computed from modules.dep when the initramfs was built).
while read -r m; do
    [ -n "$m" ] || continue
    insmod "/usr/lib/modules/$(uname -r)/$m" 2>/tmp/insmod.err ||
        grep -q 'File exists' /tmp/insmod.err || echo "insmod $m: $(cat /tmp/insmod.err)"
done </etc/interop/modules.order

stage "modules loaded"
ip_arg=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^interop\.ip=//p')
[ -n "$ip_arg" ] || ip_arg=198.18.0.12/24

ip link set lo up
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -e /sys/class/net/eth0 ] || fail "no eth0"
ip addr add "$ip_arg" dev eth0 || fail "ip addr"
ip link set eth0 up || fail "eth0 up"
i=0
while [ "$(cat /sys/class/net/eth0/operstate)" != up ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done

mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 share /share || fail "9p mount"

stage "eth0 up, share mounted"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add"
i=0
while ! ibv_devices 2>/dev/null | grep -q rxe0 && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done

# The GID table fills in asynchronously (the IPv4-mapped entry appears once the port is up).
i=0
while ! grep -q '0000:0000:0000:0000:0000:ffff' /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null &&
    [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done

stage "rxe0 added, GID table filled"
# Prints "INDEX: GID TYPE NDEV" for the non-empty entries of rxe0's GID table (1024 entries:
# one grep over all of them, as a process per entry costs seconds under TCG).
gid_table() {
    p=/sys/class/infiniband/rxe0/ports/1
    grep -H . $p/gids/* 2>/dev/null | grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$' |
        while IFS= read -r l; do
            n=${l%%:*}; n=${n##*/}; v=${l#*:}
            echo "$n: $v $(cat "$p/gid_attrs/types/$n" 2>/dev/null) $(cat "$p/gid_attrs/ndevs/$n" 2>/dev/null)"
        done
}

{
    echo "== uname"; uname -a
    echo "== ip addr"; ip addr show eth0
    echo "== rdma link"; rdma link show
    echo "== ibv_devices"; ibv_devices
    echo "== ibv_devinfo -v"; ibv_devinfo -v -d rxe0
    echo "== GID table (index: gid type ndev)"
    gid_table
} >/tmp/guest-info.txt 2>&1
cat /tmp/guest-info.txt
cp /tmp/guest-info.txt /share/guest-info.txt

# Index of the RoCE v2 GID that carries our IPv4 address (::ffff:a.b.c.d).
v4gid=$(gid_table | awk '$2 ~ /^0000:0000:0000:0000:0000:ffff:/ && $3 == "RoCE" && $4 == "v2" {print $1; exit}')
v4gid=${v4gid%:}
[ -n "$v4gid" ] || fail "no RoCE v2 IPv4 GID on rxe0"
echo "$v4gid" >/share/gid-index
stage "device info written"
echo "ROCE-INTEROP-READY gid_index=$v4gid ip=$ip_arg"

# Job loop: the host writes q/ID.sh; we rename it to q/ID.cmd, run it in the background with
# output in q/ID.out and, when it ends, its exit status in q/ID.rc.
cd /tmp || fail "no /tmp"
while :; do
    for f in /share/q/*.sh; do
        [ -e "$f" ] || continue
        id=${f##*/}; id=${id%.sh}
        mv "$f" "/share/q/$id.cmd" || continue
        (
            cd /tmp || exit 1
            sh -c ". /etc/interop/profile; . /share/q/$id.cmd" >"/share/q/$id.out" 2>&1 </dev/null
            echo $? >"/share/q/$id.rc.tmp"
            mv "/share/q/$id.rc.tmp" "/share/q/$id.rc"
        ) &
    done
    usleep 200000
done
