"""The build's metadata-only "nothing new" check (lineage.batch.build.up_to_date) on a real SQL catalog in a
temporary folder, written through pyiceberg (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lineage.batch.build import (
    BUILT_SNAPSHOT_PROPERTY,
    FORMAT_PROPERTY,
    MODE_PROPERTY,
    STATE_TABLE,
    build_format,
    has_new_events,
    up_to_date,
)
from lineage.io.catalog import open_catalog
from lineage.settings import Settings

RAW = pa.schema([pa.field("event_json", pa.string())])
STATE = pa.schema([pa.field("mode", pa.string())])


@pytest.fixture
def settings(empty_catalog: Settings) -> Settings:
    return empty_catalog


def _append_raw(settings: Settings) -> int:
    catalog = open_catalog(settings.catalog)
    catalog.create_namespace_if_not_exists("raw")
    table = catalog.create_table_if_not_exists(("raw", "events"), RAW)
    table.append(pa.table({"event_json": ["{}"]}, schema=RAW))
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def _record(settings: Settings, summary: dict[str, str]) -> None:
    catalog = open_catalog(settings.catalog)
    catalog.create_namespace_if_not_exists("lineage")
    table = catalog.create_table_if_not_exists(("lineage", STATE_TABLE), STATE)
    table.append(pa.table({"mode": [summary.get(MODE_PROPERTY)]}, schema=STATE), snapshot_properties=summary)


def _built(snapshot: int, mode: str = "incremental", fmt: str | None = None) -> dict[str, str]:
    return {
        MODE_PROPERTY: mode,
        FORMAT_PROPERTY: fmt or build_format(),
        BUILT_SNAPSHOT_PROPERTY: str(snapshot),
    }


def test_a_lake_built_up_to_the_raw_tables_current_snapshot_is_up_to_date(settings: Settings) -> None:
    assert up_to_date(settings) is None  # no catalog, no tables yet
    current = _append_raw(settings)
    assert up_to_date(settings) is None  # never built
    _record(settings, _built(current))
    assert up_to_date(settings) == current
    # The continuous build asks without Spark when the metadata says it all.
    assert has_new_events(None, settings) is False  # type: ignore[arg-type]


def test_new_raw_snapshots_an_unfinished_build_or_another_format_are_not(settings: Settings) -> None:
    current = _append_raw(settings)
    _record(settings, _built(current, mode="full-pending"))
    assert up_to_date(settings) is None
    _record(settings, _built(current, fmt="an earlier version"))
    assert up_to_date(settings) is None
    _record(settings, {MODE_PROPERTY: "full"})  # a commit without the snapshot (an earlier version's)
    assert up_to_date(settings) is None
    _record(settings, _built(current, mode="full"))
    assert up_to_date(settings) == current
    newer = _append_raw(settings)
    assert newer != current and up_to_date(settings) is None
