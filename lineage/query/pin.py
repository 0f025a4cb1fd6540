"""Which snapshot of the lineage tables a question reads: the one the latest finished build left.

A build commits each model table on its own and appends its ``build_state`` row last (lineage.batch.build),
so a table read at its current snapshot while a build runs may already hold that build's rows while
another does not yet. Every table is therefore read as of the commit time of the latest finished build's
``build_state`` commit (Iceberg time travel), the same for the CLI and the read API's index; or at a later
snapshot of the same rows, when every commit since only rewrote files (:func:`read_snapshot`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

STATE_TABLE = "build_state"
# build_state modes written while a build is still under way (lineage.batch.build FULL_PENDING,
# EXTRACT_PENDING): the model tables are not consistent at such a snapshot.
PENDING_MODES = ("full-pending", "re-extract-pending")
# Each build_state commit's summary names the mode of the row it appends (lineage.batch.build
# MODE_PROPERTY); a commit without it (an earlier version's, a compaction's) is read instead.
MODE_PROPERTY = "lineage.build-mode"
# Iceberg's operation of a commit that added and removed files without changing the table's rows:
# compaction (data files, position deletes folded in) and manifest rewrites (lineage.batch.maintain).
REPLACE = "replace"


def commit_mode(state: Any, snapshot: Any) -> str | None:
    """The mode of the newest ``build_state`` row as of ``snapshot`` (None: no row)."""
    summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    if summary.get(MODE_PROPERTY):
        return str(summary[MODE_PROPERTY])
    rows = state.scan(snapshot_id=snapshot.snapshot_id, selected_fields=("mode", "built_at")).to_arrow()
    if not rows.num_rows:
        return None
    return str(max(rows.to_pylist(), key=lambda r: r["built_at"])["mode"])


def finished_build(state: Any) -> Any:
    """The ``build_state`` snapshot of the latest finished build (None before the first one): metadata
    only when the commits carry their mode, as every build of this version writes them."""
    for snapshot in _ancestry(state):
        mode = commit_mode(state, snapshot)
        if mode is not None and mode not in PENDING_MODES:
            return snapshot
    return None


def _ancestry(table: Any) -> Iterator[Any]:
    """The table's current snapshot, then its parent, and so on back to the first."""
    snapshot = table.current_snapshot()
    while snapshot is not None:
        yield snapshot
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None


def read_snapshot(table: Any, at_ms: int) -> Any:
    """The snapshot of ``table`` a question reads as of ``at_ms`` (a finished build's commit time): the one
    current then, or a later one of the current ancestry when every commit after it up to that one only
    rewrote files (:data:`REPLACE`). Such a snapshot holds the same rows; after maintenance it holds them
    compacted, without the position deletes of the builds before (at tier M a question read ``runs`` twice
    as fast). None when the table had no snapshot then."""
    pinned = table.snapshot_as_of_timestamp(at_ms, inclusive=True)
    if pinned is None:
        return None
    later = []  # the current snapshot's ancestors newer than the pinned one, newest first
    for snapshot in _ancestry(table):
        if snapshot.snapshot_id == pinned.snapshot_id:
            break
        later.append(snapshot)
    else:  # not an ancestor of the current one (a rollback since): as it was
        return pinned
    for newer in reversed(later):
        if _operation(newer) != REPLACE:
            break
        pinned = newer
    return pinned


def _operation(snapshot: Any) -> str | None:
    operation = snapshot.summary.operation if snapshot.summary is not None else None
    return None if operation is None else str(getattr(operation, "value", operation))


def empty_arrow(table: Any, columns: Any = None) -> Any:
    """No rows, in ``table``'s Arrow schema (a table created after the snapshot asked for)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    empty = schema_to_pyarrow(table.schema()).empty_table()
    return empty.select(list(columns)) if columns else empty
