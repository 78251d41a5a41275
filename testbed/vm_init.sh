#!/bin/busybox sh
# PID 1 of the MCO TCG test node (testbed/vm.py): load the virtio modules, mount the node's
# root disk read-only, mount cgroup2 with the cpu, io and memory controllers enabled for child
# groups, run the command of the payload in the root disk, print its result to the serial
# console, power off. Lines starting with MCO-VM- are read by the host.
/bin/busybox --install -s /bin
export PATH=/bin

finish() {  # exit status (or a word saying what failed)
  [ -s /newroot/run/mco/result.json ] && echo "MCO-VM-RESULT $(cat /newroot/run/mco/result.json)"
  echo "MCO-VM-EXIT $1"
  poweroff -f
  sleep 60  # poweroff -f returns only when it failed; the host's timeout ends the VM
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "MCO-VM-INIT $(cut -d' ' -f1 /proc/uptime)"

while read -r module; do
  insmod "/modules/$module.ko" || finish "insmod-$module"
done < /modules/order
waited=0
while [ ! -b /dev/vda ]; do
  [ "$waited" -ge 100 ] && finish "no-root-disk"
  sleep 0.1
  waited=$((waited + 1))
done

mount -t ext4 -o ro,noload /dev/vda /newroot || finish "mount-root"
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup || finish "mount-cgroup2"
echo "+cpu +io +memory" > /newroot/sys/fs/cgroup/cgroup.subtree_control || finish "subtree-control"
mount --bind /payload /newroot/mnt
mkdir -p /newroot/run/mco
ip link set lo up

# argv: env -i, the environment lines, then the command lines (one argument a line)
set -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root MCO_VM_RESULT=/run/mco/result.json
while IFS= read -r line; do set -- "$@" "$line"; done < /payload/env
while IFS= read -r line; do set -- "$@" "$line"; done < /payload/command
echo "MCO-VM-START $(cut -d' ' -f1 /proc/uptime)"
chroot /newroot "$@" < /dev/null
finish $?
