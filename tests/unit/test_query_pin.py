"""The query core reads every lineage table as the latest finished build left it (lineage.query.pin), on a
real SQL catalog in a temporary folder written through pyiceberg (no Spark): a build under way, with some
tables already committed, is not seen until its build_state row is."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from lineage.io.catalog import open_catalog
from lineage.query.pin import MODE_PROPERTY, read_snapshot
from lineage.query.store import LineageStore
from lineage.settings import Settings

STATE = pa.schema([pa.field("mode", pa.string()), pa.field("built_at", pa.timestamp("us", tz="UTC"))])
DATASETS = pa.schema([pa.field("dataset_id", pa.string())])


@pytest.fixture
def settings(empty_catalog: Settings) -> Settings:
    return empty_catalog


def _table(settings: Settings, name: str, schema: pa.Schema) -> object:
    catalog = open_catalog(settings.catalog)
    catalog.create_namespace_if_not_exists("lineage")
    return catalog.create_table_if_not_exists(("lineage", name), schema)


def _dataset(settings: Settings, dataset_id: str) -> None:
    time.sleep(0.005)  # commits a few milliseconds apart: pinning is by commit time
    table = _table(settings, "datasets", DATASETS)
    table.append(pa.table({"dataset_id": [dataset_id]}, schema=DATASETS))  # type: ignore[attr-defined]


def _state(settings: Settings, mode: str, *, summary: bool = True) -> None:
    time.sleep(0.005)
    table = _table(settings, "build_state", STATE)
    row = pa.table({"mode": [mode], "built_at": [datetime.now(UTC)]}, schema=STATE)
    table.append(row, snapshot_properties={MODE_PROPERTY: mode} if summary else {})  # type: ignore[attr-defined]


def _seen(settings: Settings) -> list[str]:
    return sorted(LineageStore(settings).arrow("datasets").column("dataset_id").to_pylist())


def test_tables_are_read_as_the_latest_finished_build_left_them(settings: Settings) -> None:
    _dataset(settings, "a")
    assert _seen(settings) == ["a"]  # no build_state yet: the current snapshots
    _state(settings, "full")
    _dataset(settings, "b")  # a build under way: its datasets commit is not its last
    assert _seen(settings) == ["a"]
    _state(settings, "incremental")
    assert _seen(settings) == ["a", "b"]
    _state(settings, "full-pending")  # a full refresh under way rewrites the table
    _dataset(settings, "c")
    assert _seen(settings) == ["a", "b"]
    _state(settings, "full", summary=False)  # a commit without the summary: its rows are read instead
    assert _seen(settings) == ["a", "b", "c"]
    _table(settings, "later", DATASETS)  # created after the finished build: empty as of it
    assert LineageStore(settings).arrow("later").num_rows == 0


# -- read_snapshot: the pinned snapshot, or a later one that only rewrote its files ------------------------
@dataclass
class _Summary:
    operation: str


@dataclass
class _Snapshot:
    snapshot_id: int
    parent_snapshot_id: int | None
    timestamp_ms: int
    summary: _Summary | None


class _History:
    """A table's snapshots, each a child of the one before (``operations`` in commit order, 10 ms apart)."""

    def __init__(self, *operations: str | None, current: int | None = None) -> None:
        self.snapshots = [
            _Snapshot(i, i - 1 if i else None, 10 * i, _Summary(op) if op else None)
            for i, op in enumerate(operations)
        ]
        self.current = len(operations) - 1 if current is None else current

    def snapshot_as_of_timestamp(self, at_ms: int, inclusive: bool = True) -> _Snapshot | None:
        before = [s for s in self.snapshots[: self.current + 1] if s.timestamp_ms <= at_ms]
        return before[-1] if before else None

    def current_snapshot(self) -> _Snapshot:
        return self.snapshots[self.current]

    def snapshot_by_id(self, snapshot_id: int) -> _Snapshot:
        return self.snapshots[snapshot_id]


def _read_at(history: _History, at_ms: int) -> int | None:
    found = read_snapshot(history, at_ms)
    return None if found is None else found.snapshot_id


def test_a_question_reads_past_commits_that_only_rewrote_files() -> None:
    # build (append, overwrite), then maintenance (compaction, manifest rewrite): the same rows, compacted
    assert _read_at(_History("append", "overwrite", "replace", "replace"), at_ms=10) == 3
    # a compaction, then the next build's first commit, then another compaction: up to the build's commit
    assert _read_at(_History("append", "replace", "overwrite", "replace"), at_ms=0) == 1
    # the build's own commit is the newest: itself; before the table's first snapshot: none
    assert _read_at(_History("append", "overwrite"), at_ms=10) == 1
    assert _read_at(_History("append", "replace"), at_ms=-1) is None
    # a commit without a summary is not known to keep the rows
    assert _read_at(_History("append", None, "replace"), at_ms=0) == 0


def test_after_a_rollback_the_pinned_snapshot_is_read_as_it_was() -> None:
    history = _History("append", "overwrite", "replace", current=1)
    history.snapshots[1] = _Snapshot(1, None, 10, _Summary("overwrite"))  # current: not a child of snapshot 0
    assert _read_at(history, at_ms=0) == 0
