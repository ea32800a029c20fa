"""The whole local fleetwright stack on one machine: the local control plane, Temporal, the CRDs,
the admission webhook, the worker and the controller, and the simulated kubelet's reboots. What
``fleetwright cluster up``, ``fleetwright demo`` and the chaos suite run."""
