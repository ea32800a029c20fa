"""The console the commands print human text on, and how a view refreshes on it.

Lines are never wrapped (``soft_wrap``): a hint is a command to paste. Names and messages are
printed as written (no ``:emoji:`` codes, whose table rich would also import). Where the output is
not a terminal (a pipe, a log file, CI) there is no width to fit, so tables and trees take the
width of their content (a PodDisruptionBudget's long message stays on its node's line) instead of
being squeezed into 80 columns; and a live view prints only its last state, ending its line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

# Wide enough for any table or tree the commands print; only used where nothing has a width.
UNBOUNDED = 4096


def human_console() -> Console:
    from rich.console import Console

    terminal = Console().is_terminal
    return Console(soft_wrap=True, width=None if terminal else UNBOUNDED, emoji=False)


@contextlib.contextmanager
def refreshing(on: Console) -> Iterator[Callable[[RenderableType], None]]:
    """Yields ``show(view)``: on a terminal the view is redrawn in place; elsewhere the last view
    is printed once when the block ends (rich's live display would leave it without a newline,
    running into whatever is printed next)."""
    if on.is_terminal:
        from rich.live import Live

        with Live(console=on, auto_refresh=False) as live:
            yield lambda view: live.update(view, refresh=True)
        return
    last: list[RenderableType] = []
    try:
        yield last.append
    finally:
        if last:
            on.print(last[-1])
