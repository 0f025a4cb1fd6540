"""The soak benchmark's pure parts: batch counting from a checkpoint, growth slopes, the report's cells."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import soak


def test_committed_batches_come_from_the_newest_commit_id(tmp_path: Path) -> None:
    assert soak.committed_batches(tmp_path) == 0
    commits = tmp_path / "commits"
    commits.mkdir()
    for name in ("7", "8", "9", ".9.crc", "metadata"):  # Spark deleted 0-6 already
        (commits / name).write_text("v1")
    assert soak.committed_batches(tmp_path) == 10


def test_slope_is_growth_per_thousand_batches() -> None:
    assert soak.slope_per_1000([(0, 5.0), (500, 55.0), (1000, 105.0)]) == pytest.approx(100.0)
    assert soak.slope_per_1000([(100, 3.0), (100, 9.0)]) is None  # no spread in x


def _sample(batches: int, files: int, mib: float, rows: int, rate: float | None) -> dict:
    point = {
        "batches": batches,
        "raw": {
            "data_files": files,
            "data_files_on_disk": files,
            "snapshots": batches,
            "metadata_bytes": int(mib * soak.MIB),
            "rows": rows,
        },
        "lineage_data_files": 40,
    }
    if rate is not None:
        point["landed_per_s"] = rate
    return point


def test_report_cells_and_section() -> None:
    grows = {
        "label": "unmaintained",
        "maintenance_on": False,
        "command": "python -m benchmarks.soak --no-maintain",
        "sent": 9000,
        "machine": {"cpu_model": "cpu", "usable_cpus": 2, "memory_gib": 24.0, "os": "Debian"},
        "samples": [
            _sample(0, 0, 0.0, 0, None),
            _sample(500, 500, 10.0, 4000, 9.0),
            _sample(1000, 1000, 20.0, 8000, 8.0),
        ],
        "builds": [{"at_batch": 100, "work_s": 30.0}, {"at_batch": 900, "work_s": 50.0}],
        "maintenance": [],
        "cli": [{"at_batch": 100, "median_s": 0.5}, {"at_batch": 900, "median_s": 0.9}],
    }
    flat = {**grows, "label": "maintained", "maintenance_on": True, "maintenance": [{"work_s": 20.0}]}
    flat["samples"] = [_sample(0, 0, 0.0, 0, None), _sample(1000, 12, 1.0, 8000, 8.5)]
    cells = soak.summary_rows(grows)
    assert cells["raw.events data files (current snapshot)"] == "0 → 1,000"
    assert cells["… growth per 1,000 batches"] == "1,000"
    assert cells["raw.events metadata folder (MiB)"] == "0.0 → 20.0"
    assert cells["build seconds (first → last third, median)"] == "30.0 → 50.0 (2 builds)"
    assert cells["maintenance runs, median seconds"] == "0, -"
    section = soak.render(soak.load_sorted([grows, flat]), "chart.png")
    header = next(line for line in section.splitlines() if line.startswith("| measurement"))
    assert header.index("maintained (maintenance)") < header.index("unmaintained (no maintenance)")
    assert "| maintenance runs, median seconds | 1, 20.0 | 0, - |" in section


def test_folder_stats_leave_out_hadoop_checksums(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "00000-0-x.parquet").write_bytes(b"P" * 10)
    (tmp_path / "a" / ".00000-0-x.parquet.crc").write_bytes(b"c" * 4)
    (tmp_path / "v1.metadata.json").write_bytes(b"{}")
    assert soak.folder_stats(tmp_path) == (2, 12)
    assert soak.folder_stats(tmp_path / "missing") == (0, 0)


def test_a_slow_build_does_not_starve_maintenance() -> None:
    due: dict[str, int | None] = {"build": 70, "maintain": 35}
    assert soak.next_job(30, due, None) is None
    assert soak.next_job(40, due, None) == "maintain"
    assert soak.next_job(95, due, "build") == "maintain"  # the build ran long: both due, maintenance next
    assert soak.next_job(95, due, "maintain") == "build"
    assert soak.next_job(95, {"build": 70, "maintain": None}, "build") == "build"  # without maintenance
