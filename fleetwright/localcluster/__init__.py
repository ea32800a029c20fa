"""The local control plane launcher: real etcd, kube-apiserver, kube-controller-manager and kwok on
loopback, for the tests and the demo. It starts processes and writes files; it never talks to the
Kubernetes API through the client library (that is ``fleetwright.kube``'s job)."""
