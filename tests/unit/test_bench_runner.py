"""The benchmark runner's pieces that need no broker and no Spark: result shapes, seed-lake checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.runner import check_seed_lake, failure, full_builds, incremental_builds
from benchmarks.tier import Lake, StageError


def _run(work_s: float, **extra: Any) -> dict[str, Any]:
    return {"work_s": work_s, "startup_s": 7.0, "peak_mib": 2000.0 + work_s, **extra}


def test_full_and_re_extract_builds_have_the_same_shape() -> None:
    summary = full_builds([_run(90.0, new_events=30_000), _run(100.0, new_events=30_000), _run(110.0)])
    assert set(summary) == {"runs", "seconds", "events", "events_per_s", "startup_s", "peak_mib"}
    assert summary["seconds"] == {"median": 100.0, "min": 90.0, "max": 110.0, "n": 3}
    assert summary["events"] == 30_000
    assert summary["events_per_s"] == 300.0


def test_incremental_and_history_builds_have_the_same_shape() -> None:
    full_s = {"median": 100.0, "min": 90.0, "max": 110.0, "n": 3}
    runs = [_run(20.0, new_events=9_890), _run(30.0, new_events=9_890)]
    summary = incremental_builds(runs, [_run(12.0)], full_s)
    assert set(summary) == {"runs", "seconds", "new_events", "share_of_full", "peak_mib", "delta_ingest"}
    assert summary["share_of_full"] == 0.25
    assert summary["delta_ingest"]["seconds"]["median"] == 12.0
    assert incremental_builds([], [], full_s)["share_of_full"] is None


def test_a_failed_measurement_keeps_its_error() -> None:
    try:
        raise StageError("build-re-extract-1 failed (exit 1)")
    except StageError as exc:
        result = failure(exc)
    assert result["status"] == "failed"
    assert result["error"] == "build-re-extract-1 failed (exit 1)"
    assert "StageError" in result["traceback"]


def _checkpoint(lake: Lake, batches: dict[int, dict[str, int]]) -> None:
    offsets = lake.checkpoint / "offsets"
    offsets.mkdir(parents=True)
    for batch, partitions in batches.items():
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
        body = json.dumps({"bench.S": {str(p): o for p, o in enumerate(partitions.values())}})
        (offsets / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{body}")
    (offsets / ".1.crc").write_text("not a batch")


def test_a_lake_knows_how_much_of_its_topic_it_ingested(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    assert lake.ingested("bench.S") is None
    _checkpoint(lake, {0: {"a": 100, "b": 90}, 1: {"a": 8_000, "b": 7_500, "c": 7_900, "d": 8_100}})
    assert lake.ingested("bench.S") == 31_500
    assert lake.ingested("bench.M") is None


def test_a_seed_lake_that_ingested_the_deltas_already_is_refused(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    _checkpoint(lake, {0: {"a": 16_000, "b": 16_346}})
    check_seed_lake(lake, "bench.S", 32_346)  # the base part alone: fine
    check_seed_lake(Lake(tmp_path / "no-checkpoint"), "bench.S", 32_346)
    with pytest.raises(StageError, match="--stages ingest --keep"):
        check_seed_lake(lake, "bench.S", 32_000)
