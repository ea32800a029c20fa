"""How a node workflow's steps fail: the errors its steps raise and what an activity's failure
means for the node (it is gone, or the step failed). Shared by the node workflow and its gate;
no I/O."""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError

NODE_GONE = "NodeGone"  # the ApplicationError type of fleetwright.errors.NodeGoneError


class NodeFailedError(Exception):
    """A stage (or a bounded wait before it) failed on this node; the message says which and why."""


class GateFailedError(NodeFailedError):
    """The node gate failed (a check Failed) or was aborted while held: the node
    stays cordoned, even on an abort, since its health is not known to be good."""


class NodeDeletedError(Exception):
    """The Node was deleted: nothing is left to update, show or undo on it."""


def activity_failure(error: ActivityError) -> Exception:
    """What an activity's failure means for this node: it is gone, or this step failed."""
    cause = error.cause
    name = error.activity_type
    if isinstance(cause, ApplicationError) and cause.type == NODE_GONE:
        return NodeDeletedError(f"node deleted during {name.rsplit('.', 1)[-1]}: {_cause(error)}")
    return NodeFailedError(f"{name}: {_cause(error)}")


def _cause(error: ActivityError) -> str:
    """The innermost failure message (the activity's own words, not the wrapper's)."""
    cause: BaseException = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return str(cause)
