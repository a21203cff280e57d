#!/bin/bash
# The test cluster's control plane: etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler as plain processes (no kubeadm, no static pods). Unprivileged.
# Certificates and kubeconfigs were put in /etc/kubernetes by kube_test_cluster.py.
# Exits when one of them does, so `docker ps` shows a broken control plane.
set -euo pipefail
: "${NODE_IP:?}" "${SERVICE_CIDR:?}" "${CLUSTER_CIDR:?}"
pki=/etc/kubernetes/pki
logs=/var/log/kube-test
mkdir -p "$logs" /var/lib/etcd

# Only the API server (localhost) talks to etcd.
etcd --name control-plane --data-dir /var/lib/etcd/data \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster control-plane=http://127.0.0.1:2380 --log-level warn >"$logs/etcd.log" 2>&1 &

kube-apiserver --advertise-address="$NODE_IP" --bind-address=0.0.0.0 --secure-port=6443 \
    --etcd-servers=http://127.0.0.1:2379 \
    --tls-cert-file=$pki/apiserver.crt --tls-private-key-file=$pki/apiserver.key \
    --client-ca-file=$pki/ca.crt \
    --kubelet-client-certificate=$pki/apiserver-kubelet-client.crt \
    --kubelet-client-key=$pki/apiserver-kubelet-client.key \
    --kubelet-preferred-address-types=InternalIP \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file=$pki/sa.pub --service-account-signing-key-file=$pki/sa.key \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false >"$logs/kube-apiserver.log" 2>&1 &
apiserver=$!

# The controllers load their settings from the API once at start: wait for it.
until kubectl --kubeconfig=/etc/kubernetes/scheduler.kubeconfig get --raw /readyz >/dev/null 2>&1; do
    kill -0 $apiserver 2>/dev/null || { echo "control plane: kube-apiserver exited; logs in $logs" >&2; exit 1; }
    sleep 0.2
done

# The in-tree hostPath provisioner (--enable-hostpath-provisioner) makes each volume
# a directory under /tmp/hostpath_pv: one Docker volume mounted there here and on
# both workers, so the volumes are ReadWriteMany across workers. A worker that stops
# answering is declared lost after 20 s (the default is 40 s), so the provider's
# worker-loss test sees nodes come back within its 90 s.
kube-controller-manager --kubeconfig=/etc/kubernetes/controller-manager.kubeconfig \
    --authentication-kubeconfig=/etc/kubernetes/controller-manager.kubeconfig \
    --authorization-kubeconfig=/etc/kubernetes/controller-manager.kubeconfig \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false \
    --root-ca-file=$pki/ca.crt --service-account-private-key-file=$pki/sa.key \
    --cluster-signing-cert-file=$pki/ca.crt --cluster-signing-key-file=$pki/ca.key \
    --use-service-account-credentials=true --cluster-cidr="$CLUSTER_CIDR" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --enable-hostpath-provisioner=true \
    --node-monitor-grace-period=20s >"$logs/kube-controller-manager.log" 2>&1 &

kube-scheduler --kubeconfig=/etc/kubernetes/scheduler.kubeconfig \
    --authentication-kubeconfig=/etc/kubernetes/scheduler.kubeconfig \
    --authorization-kubeconfig=/etc/kubernetes/scheduler.kubeconfig \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false >"$logs/kube-scheduler.log" 2>&1 &

status=0
wait -n || status=$?
echo "control plane: a process exited ($status); logs in $logs" >&2
exit 1
