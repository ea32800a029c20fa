"""The on-node agent: runs one stage of a NodeWright-compatible package against a mounted host root.

It owns the on-node half of the package format (docs/package-format.md): validating
``config.json``, the ``root_dir/`` overlay, running step scripts in a chroot of the host,
idempotence flags, the version history, interrupts and host logs.

It must stay standalone: stdlib only (no pydantic, temporalio, kubernetes, nor other fleetwright
packages), because it ships alone in a small image that runs privileged on every node.
"""

__version__ = "0.2.0"
