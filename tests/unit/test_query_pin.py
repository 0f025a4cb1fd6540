"""The query core reads every lineage table as the latest finished build left it (lineage.query.pin), on a
real SQL catalog in a temporary folder written through pyiceberg (no Spark): a build under way, with some
tables already committed, is not seen until its build_state row is."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from lineage.io.catalog import open_catalog
from lineage.query.pin import MODE_PROPERTY
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
