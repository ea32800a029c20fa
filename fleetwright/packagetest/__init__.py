"""Package testing: NodeWright-format packages run by the real agent against throwaway host roots.

It owns what ``fleetwright package test`` and the test suite need to run a package without a node:
a small root filesystem per OS flavour whose host tools are recording fakes (``hostroot``,
``toolbox``, ``flavours``, the scripts in ``fakes/``), a simulated reboot (``boot``), and running
the agent on it stage by stage as the stage Job would (``runner``). It is never shipped to nodes
and must never act on a real host: everything it does stays inside a root it built.
"""


class HostRootError(Exception):
    """A throwaway root cannot be built (for example busybox-static is not installed)."""
