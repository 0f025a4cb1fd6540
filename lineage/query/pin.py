"""Which snapshot of the lineage tables a question reads: the one the latest finished build left.

A build commits each model table on its own and appends its ``build_state`` row last (lineage.batch.build),
so a table read at its current snapshot while a build runs may already hold that build's rows while
another does not yet. Every table is therefore read as of the commit time of the latest finished build's
``build_state`` commit (Iceberg time travel), the same for the CLI and the read API's index.
"""

from __future__ import annotations

from typing import Any

STATE_TABLE = "build_state"
# build_state modes written while a build is still under way (lineage.batch.build FULL_PENDING,
# EXTRACT_PENDING): the model tables are not consistent at such a snapshot.
PENDING_MODES = ("full-pending", "re-extract-pending")
# Each build_state commit's summary names the mode of the row it appends (lineage.batch.build
# MODE_PROPERTY); a commit without it (an earlier version's, a compaction's) is read instead.
MODE_PROPERTY = "lineage.build-mode"


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
    snapshot = state.current_snapshot()
    while snapshot is not None:
        mode = commit_mode(state, snapshot)
        if mode is not None and mode not in PENDING_MODES:
            return snapshot
        parent = snapshot.parent_snapshot_id
        snapshot = state.snapshot_by_id(parent) if parent is not None else None
    return None


def empty_arrow(table: Any, columns: Any = None) -> Any:
    """No rows, in ``table``'s Arrow schema (a table created after the snapshot asked for)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    empty = schema_to_pyarrow(table.schema()).empty_table()
    return empty.select(list(columns)) if columns else empty
