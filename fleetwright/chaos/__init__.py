"""The chaos suite: real rollouts on the local control plane while faults are injected, watched by
an invariant checker. Test tooling that sits at the top with the CLI; the product never imports it.
"""
