"""benchmarks.steps: per-step seconds and scans read back from build logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import steps
from lineage.io.scans import Files, describe

LOG = """\
2026-12-01 10:00:00,000 INFO lineage.batch.build: build lease taken
some line without a timestamp
2026-12-01 10:00:12,500 INFO lineage.batch.build: build step event_facts committed
2026-12-01 10:00:14,000 INFO lineage.batch.build: build step runs committed (scans: {runs})
2026-12-01 10:00:14,250 INFO lineage.batch.build: build step alias_nodes committed (scans: no Iceberg scan)
"""


def _log(tmp_path: Path, name: str, runs_scan: str) -> Path:
    path = tmp_path / name
    path.write_text(LOG.format(runs=runs_scan))
    return path


def test_a_log_gives_each_step_its_gap_and_the_scans_describe_wrote() -> None:
    tally = {
        "lake.lineage.runs": Files(read=15, skipped=0, rows=1_234_567, bytes=3 * 2**20),
        "lake.lineage.event_facts": Files(read=2, skipped=64, rows=10, bytes=2**19),
    }
    parsed = steps.parse_log(LOG.format(runs=describe(tally)).splitlines())
    assert [(s.name, s.seconds) for s in parsed] == [
        ("event_facts", 12.5),
        ("runs", 1.5),
        ("alias_nodes", 0.25),
    ]
    assert parsed[1].scans == [
        steps.Scan("lake.lineage.event_facts", 2, 66, 10, 0.5),
        steps.Scan("lake.lineage.runs", 15, 15, 1_234_567, 3.0),
    ]
    assert parsed[0].scans == [] and parsed[2].scans == []


def test_older_scan_entries_without_rows_are_read_and_unknown_ones_refused() -> None:
    assert steps.parse_scans("lake.lineage.column_paths 4/56 files") == [
        steps.Scan("lake.lineage.column_paths", 4, 56, None, None)
    ]
    with pytest.raises(ValueError, match="not a scan entry"):
        steps.parse_scans("lake.lineage.runs some/other format")


def test_several_logs_give_a_median_per_step_and_the_first_scans(tmp_path: Path) -> None:
    first = _log(tmp_path, "build-1.log", "lake.lineage.runs 1/15 files 100 rows 0.1 MiB")
    second = _log(tmp_path, "build-2.log", "lake.lineage.runs 15/15 files 900 rows 2.0 MiB")
    text = steps.main([first, second])
    lines = text.splitlines()
    assert lines[0].startswith("# 2 build log(s)")
    runs = next(line for line in lines if line.startswith("runs "))
    assert "median    1.5 s" in runs and "reads: runs 1/15 100 rows 0.1 MiB" in runs
    assert lines[-1] == "sum of medians: 14.2 s"  # 12.5 + 1.5 + 0.25, rounded


def test_a_log_without_build_steps_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "ingest.log"
    empty.write_text("2026-12-01 10:00:00,000 INFO x: nothing built\n")
    with pytest.raises(SystemExit, match="no 'build step"):
        steps.main([empty])
