"""The lab: fleetwright's development and build modules, which a checkout carries and the controller
image leaves out.

The local stack and real node (``local``), the chaos suite, the image builder (``images``), package
testing, the chart's values-schema generator (``chart``) and the local CA (``certs``) serve the
``cluster``, ``demo``, ``chaos`` and ``package`` commands and the tests; the runtime never imports
them (a contract in ``.importlinter``). Owns their names, once, and whether this installation has
them; it must not import them.
"""

from __future__ import annotations

from importlib.util import find_spec

MODULES = (
    "fleetwright.local",
    "fleetwright.chaos",
    "fleetwright.images",
    "fleetwright.packagetest",
    "fleetwright.chart",
    "fleetwright.certs",
)


def installed() -> bool:
    """Whether every lab module is importable here (a checkout: yes; the controller image: no)."""
    return all(find_spec(name) is not None for name in MODULES)
