"""Everything fleetwright runs on one machine for the tests, the demo, the chaos suite and the
benchmarks: the infrastructure (real etcd, kube-apiserver, kube-controller-manager and kwok on
loopback, the real node, Temporal servers, PostgreSQL, the simulated kubelet) and, above it, the
stack (``stack``) that adds the CRDs, the webhook, the worker and the controller. Never used by the
product against a real cluster. The infrastructure starts processes and writes files; it reaches
the Kubernetes API only through ``fleetwright.kube``."""
