"""A run's liveness as of the reader's clock: what grows with time is derived here, never stored.

The build stores, for a run reported RUNNING, its deadline ``lost_after`` (last event + the job's threshold)
and ``inferred_state`` as of the last build that touched it (``LOST`` once the deadline had passed then,
else ``RUNNING``; :func:`lineage.transforms.model_runs.run_liveness`). Between builds a RUNNING run's
deadline may pass: every reader (CLI, read API, graph page, demo) shows the run through :func:`as_of`, so
it is LOST as soon as its deadline has passed, whatever the build's schedule. The SQL a lake user writes
for the same answer is in docs/sql.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

RUNNING = "RUNNING"
LOST = "LOST"


def _utc(value: datetime) -> datetime:
    # A naive datetime is UTC (the lake's timestamps are read as UTC), never the local zone.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def as_of(row: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """The run ``row`` (a ``lineage.runs`` row as a dict) as of ``now`` (default: the current time, UTC).

    Returns a new dict with ``silent_seconds`` (seconds since the last event, for a run reported RUNNING;
    else None) and ``inferred_state`` ``LOST`` for a stored ``RUNNING`` run whose ``lost_after`` is ``now``
    or earlier (the stored ``liveness_reason`` says when it turns LOST and why, so it holds either way).
    Terminal runs, runs known only as parents and stored LOST runs are unchanged. A row without the
    liveness columns (a partial read) is returned with ``silent_seconds`` None.
    """
    at = _utc(now or datetime.now(UTC))
    out = dict(row)
    last = row.get("last_event_at")
    running = row.get("reported_state") == RUNNING
    out["silent_seconds"] = (at - _utc(last)).total_seconds() if running and last is not None else None
    deadline = row.get("lost_after")
    if running and row.get("inferred_state") == RUNNING and deadline is not None and _utc(deadline) <= at:
        out["inferred_state"] = LOST
    return out


def stored_states(wanted: Iterable[str]) -> list[str]:
    """The stored ``inferred_state`` values a run may have to be in ``wanted`` as of a reader's clock: a run
    LOST now may still be stored RUNNING (its deadline passed after the last build)."""
    states = list(dict.fromkeys(wanted))
    if LOST in states and RUNNING not in states:
        states.append(RUNNING)
    return states
