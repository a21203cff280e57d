#!/bin/bash
# A worker of the test cluster: containerd (Debian's 1.6 with runc and the CNI
# plugins), kubelet and kube-proxy, as kind's node does but without systemd.
# Its rights come from `docker run` (see kube_test_cluster.py: every capability but
# CAP_SYS_RESOURCE, which this VM lacks, so --privileged cannot be used).
# Configuration files were put in /etc by kube_test_cluster.py.
set -euo pipefail
: "${NODE_NAME:?}" "${NODE_IP:?}" "${CLUSTER_CIDR:?}"
logs=/var/log/kube-test
mkdir -p "$logs"

# 1. /sys and the cgroup v1 hierarchies are mounted read-only without --privileged:
# /sys takes a plain remount, each cgroup mount only a bind remount.
mount -o remount,rw /sys
findmnt -rn -t cgroup -o TARGET | while read -r target; do
    mount -o remount,bind,rw "$target"
done
# 2. With a private cgroup namespace, kubelet's pods go under /kubelet in every
# hierarchy (cgroupRoot in kubelet.yaml), as kind does.
for dir in /sys/fs/cgroup/*; do
    [[ -d $dir && ! -L $dir ]] || continue
    [[ $(stat -fc %T "$dir") == cgroup* ]] || continue
    mkdir -p "$dir/kubelet"
    if [[ -e $dir/cpuset.cpus ]]; then
        cat "$dir/cpuset.cpus" > "$dir/kubelet/cpuset.cpus"
        cat "$dir/cpuset.mems" > "$dir/kubelet/cpuset.mems"
    fi
done
# 3. Mount propagation for volumes, forwarding for pods, a machine id for kubelet.
mount --make-rshared /
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
[[ -s /etc/machine-id ]] || tr -d - < /proc/sys/kernel/random/uuid > /etc/machine-id

# 4. The pod network (what kind's kindnetd does): the CNI bridge serves this
# worker's own /24 (/etc/cni/net.d); a route to each other worker's /24 via that
# worker; pod traffic leaving the pod range is masqueraded.
for route in ${POD_ROUTES:-}; do            # CIDR@GATEWAY ...
    ip route replace "${route%@*}" via "${route#*@}"
done
iptables -t nat -C POSTROUTING -s "$CLUSTER_CIDR" ! -d "$CLUSTER_CIDR" -j MASQUERADE 2>/dev/null \
    || iptables -t nat -A POSTROUTING -s "$CLUSTER_CIDR" ! -d "$CLUSTER_CIDR" -j MASQUERADE

# 5. The image store (/var/lib/containerd) may be the cache an earlier test cluster's
# worker left (kube_test_cluster.py, image_stores): its images stay; its pods'
# containers and sandboxes, dead since that worker went, are removed by a containerd
# without the CRI before the real one's CRI loads them (else this kubelet would find
# sandboxes of pods no API server knows). A restarted worker's dead ones go the same way.
store=/var/lib/containerd
if [[ -e $store/io.containerd.metadata.v1.bolt/meta.db ]]; then
    clean=/run/containerd-clean
    printf 'version = 2\nstate = "%s"\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "%s.sock"\n' \
        "$clean" "$clean" > "$clean.toml"
    containerd --config "$clean.toml" >"$logs/containerd-clean.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        [[ -S $clean.sock ]] && break
        sleep 0.1
    done
    ctr -a "$clean.sock" -n k8s.io containers ls -q \
        | xargs -r ctr -a "$clean.sock" -n k8s.io containers rm >>"$logs/containerd-clean.log" 2>&1 \
        || echo "worker $NODE_NAME: the old containers were not all removed (see $logs)" >&2
    kill "$pid" && wait "$pid" || true
    rm -rf "$store/io.containerd.grpc.v1.cri/sandboxes" "$store/io.containerd.grpc.v1.cri/containers"
fi

# 6. containerd, then kubelet and kube-proxy.
containerd --config /etc/containerd/config.toml >"$logs/containerd.log" 2>&1 &
for _ in $(seq 300); do
    [[ -S /run/containerd/containerd.sock ]] && break
    sleep 0.1
done
kubelet --config=/etc/kubernetes/kubelet.yaml --kubeconfig=/etc/kubernetes/kubelet.kubeconfig \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" >"$logs/kubelet.log" 2>&1 &
kube-proxy --config=/etc/kubernetes/kube-proxy.yaml --hostname-override="$NODE_NAME" \
    >"$logs/kube-proxy.log" 2>&1 &

status=0
wait -n || status=$?
echo "worker $NODE_NAME: a process exited ($status); logs in $logs" >&2
exit 1
