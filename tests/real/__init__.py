"""The real-cluster tier: tests on a real kube-apiserver, etcd, kubelet and containerd."""
