"""BENCHMARKS.md rendering from results files (a tier-S results file of an earlier run, runs trimmed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from benchmarks.report import history_line, load_results, render

RESOURCES = Path(__file__).parent.parent / "resources" / "bench"


def _results(tmp_path: Path, **stages: dict[str, Any]) -> dict[str, dict[str, Any]]:
    shutil.copy(RESOURCES / "S.json", tmp_path / "S.json")
    m = json.loads((RESOURCES / "S.json").read_text())
    m["tier"] = "M"
    m["stages"]["build"]["full"]["events"] = 1_000_000
    m["stages"].update(stages)
    (tmp_path / "M.json").write_text(json.dumps(m))
    return load_results(tmp_path)


QUERIES = {
    "status": "ok",
    "nodes": {"hub": {"name": "dataset:s3a://b/hub", "why": "read by 90 jobs"}},
    "rows": [
        {"query": "upstream", "node": "hub", "depth": d, "nodes": 3 * d, "edges": 4 * d, "runs": 5,
         "p50_s": 0.8 + d / 100, "p95_s": 0.9 + d / 10, "min_s": 0.7, "max_s": 2.0, "peak_mib": 150.0}
        for d in (1, 3, 10)
    ],
    "p95_max_s": 1.9,
    "p50_median_s": 0.83,
    "peak_mib_max": 150.0,
    "sql": [{"query": "one-table aggregate over runs", "sql": "SELECT 1", "rows": 4, "runs": 5, "p50_s": 0.61,
             "p95_s": 0.72, "min_s": 0.55, "max_s": 0.75, "peak_mib": 180.0}],
}  # fmt: skip


def test_query_rows_and_their_goal_are_reported(tmp_path: Path) -> None:
    text = render(_results(tmp_path, queries=QUERIES), "BENCHMARKS.png")
    assert "### CLI queries" in text
    assert "| upstream | hub | 10 | 30 / 40 | 0.90 | 1.90 | 0.70 - 2.00 | 150 |" in text
    assert "`lineage sql`, tier M: an embedded DuckDB reading the Iceberg tables" in text
    assert "| one-table aggregate over runs | 4 | 0.61 | 0.72 | 0.55 - 0.75 | 180 |" in text
    assert "| CLI query p95 ≤ 1 s on tier M (worst of the 12 queries) | 1.90 s | **not met** |" in text
    assert "0.83 s / worst 1.90 s, 150 MiB (see below)" in text


def test_tuning_notes_are_embedded_and_single_runs_are_marked(tmp_path: Path) -> None:
    results = _results(tmp_path)
    results["M"]["stages"]["build"]["full"]["seconds"] = {
        "median": 1800.0,
        "min": 1800.0,
        "max": 1800.0,
        "n": 1,
    }
    text = render(results, "BENCHMARKS.png", "## Profiling and changes\n\nbefore and after")
    assert "## Profiling and changes\n\nbefore and after" in text
    assert "**1,800.0** (1 run)" in text
    assert "| full build of 1M events ≤ 120 s (tier M) | 1,800 s | **not met** |" in text
    assert "Not measured yet (stage `queries`)." in text


def test_rentgen_endpoint_rows_are_reported_next_to_the_cli(tmp_path: Path) -> None:
    results = _results(tmp_path, queries=QUERIES)
    results["S"]["stages"]["rentgen"]["endpoint"] = {
        "status": "ok",
        "granularity": "JOB",
        "command": "python -m data_rentgen.server --host 127.0.0.1 --port <free port>",
        "ready_s": 4.2,
        "server_peak_mib": 210.0,
        "rows": [
            {"query": "downstream", "node": "hub", "depth": 3, "datasets": 40, "jobs": 12, "relations": 61,
             "runs": 10, "p50_s": 0.0412, "p95_s": 0.0533, "min_s": 0.038, "max_s": 0.06}
        ],
        "p95_max_s": 0.0533,
        "p50_median_s": 0.0412,
    }  # fmt: skip
    text = render(results, "BENCHMARKS.png")
    assert "Data.Rentgen's lineage endpoint, tier S: `GET /v1/datasets/lineage` at granularity `JOB`" in text
    assert "| downstream | hub | 3 | 40 / 12 / 61 | 0.041 | 0.053 | 0.038 - 0.060 |" in text
    assert "0.041 s / worst 0.053 s, server 210 MiB (see below)" in text
    assert text.index("### CLI queries") < text.index("Data.Rentgen's lineage endpoint, tier S")


READ_API = {
    "status": "ok",
    "ready_s": 6.0,
    "index_bytes": 300 * 2**20,
    "index_load_s": 4.5,
    "server_rss_mib": 1200.0,
    "rows": [
        {"query": q, "node": "hub", "depth": d, "nodes": 5 * d, "edges": 6 * d, "runs": 100,
         "p50_ms": 2.0 * d, "p95_ms": 3.0 * d, "max_ms": 9.0 * d, "name": "dataset:s3a://b/hub"}
        for q in ("upstream", "downstream") for d in (1, 10)
    ],
    "marquez_rows": [
        {"query": "lineage depth 2", "node": "hub", "path": "/api/v1/lineage?nodeId=x&depth=2", "items": 42,
         "bytes": 123456, "runs": 20, "p50_ms": 7.5, "p95_ms": 9.25, "max_ms": 12.0},
    ],
    "cli_history_rows": [
        {"query": "versions", "node": "most-written", "why": "w", "args": ["versions", "x"], "entries": 11,
         "first_s": 0.4, "runs": 10, "p50_s": 0.31, "p95_s": 0.36, "min_s": 0.29, "max_s": 0.37,
         "peak_mib": 61.0},
    ],
}  # fmt: skip


def _run(events_per_s: float, p50: float, p99: float) -> dict[str, Any]:
    return {"events_per_s": events_per_s, "p50_ms": p50, "p99_ms": p99, "peak_rss_mib": 90.0,
            "service_cpu_us_per_event": 100.0, "statuses": {"200": 10}, "events": 10}  # fmt: skip


def test_read_api_rows_sit_beside_rentgen_and_the_service_goals_are_judged(tmp_path: Path) -> None:
    from benchmarks.intake import median_run

    results = _results(tmp_path, queries={**QUERIES, "read_api": READ_API})
    results["M"]["stages"]["rentgen"] = {"status": "ok", "endpoint": {"status": "ok", "rows": [
        {"query": "downstream", "node": "hub", "depth": 10, "datasets": 1, "jobs": 1, "relations": 1,
         "runs": 10, "p50_s": 0.1, "p95_s": 0.15, "min_s": 0.1, "max_s": 0.2}]}}  # fmt: skip
    scenarios = (("single", 4000.0, 30.0), ("batch", 25000.0, 90.0), ("rate", 1000.0, 60.0))
    ours = {mode: median_run([_run(e, 2.0, p99), _run(e * 1.2, 3.0, p99 + 10)]) for mode, e, p99 in scenarios}
    intake = {
        "command": "python -m benchmarks.intake",
        "started": "2026-11-25T05:00:00+0000",
        "settings": {"duration": "15.0", "concurrency": "32", "batch_concurrency": "4", "batch_size": "500",
                     "rate": "1000.0"},
        "kafka_broker": ["kafka_2.13-3.9.2.jar"],
        "ours": ours,
        "theirs": {"single": median_run([_run(400.0, 50.0, 120.0)])},
        "ratio_single": 11.0,
    }  # fmt: skip
    text = render(results, "BENCHMARKS.png", intake=intake)
    assert "Read API, tier M (`lineage serve`, intake off, on the same lake)" in text
    assert (
        "32 clients sending one event per request (single), 4 clients sending 500 events per request" in text
    )
    assert "held 300.0 MiB and loaded in 4.50 s" in text
    assert "The CLI asking the same server, tier M: `lineage --api URL" in text
    assert "| versions | most-written (w) | 11 | 10 | 0.31 | 0.36 | 0.29 - 0.37 | 61 |" in text
    assert "| downstream | hub | 10 | 50 / 60 | 20.00 | 30.00 | 90.00 | 150.0 | 5x |" in text
    assert "| upstream | hub | 10 | 50 / 60 | 20.00 | 30.00 | 90.00 | - | - |" in text
    assert "Marquez's paths, tier M, the same server: milliseconds per request over 20 requests" in text
    assert "| lineage depth 2 | hub | 42 | 123,456 | 7.50 | 9.25 | 12.00 |" in text
    # the median of two runs, with their spread; statuses summed
    assert (
        "| single | ours | 4,400 [4,000 - 4,800] | 2.5 [2.0 - 3.0] | 35.0 [30.0 - 40.0] | 90 [90 - 90] |"
        in (text)
    )
    assert "| single | Data.Rentgen http2kafka | 400 | 50.0 | 120.0 | 90 | 100 | 200: 10 |" in text
    assert "| intake ≥ 10x Data.Rentgen's http2kafka events/s (single events) | 11.0x | met |" in text
    assert "| intake ≥ 20,000 events/s with batch requests | 27,500 | met |" in text
    assert "| intake p99 ≤ 50 ms for single events at 1,000 events/s | 65.0 ms | **not met** |" in text
    assert (
        "deepest lineage of the most-read dataset, tier M | 30.0 ms (upstream or downstream) | met |" in text
    )
    assert "every question (p95) | 5x at the least (1 questions, tier M) | **not met** |" in text
    assert (
        "| memory of the read index at tier M (reported, no goal) | 300 MiB of Arrow tables, server RSS"
        in text
    )
    assert text.index("### CLI queries") < text.index("Read API, tier M") < text.index("### HTTP intake")


def _tier(tier: str, build: dict[str, Any]) -> dict[str, Any]:
    """A hand-made results file of one tier: only what the report needs, and the build stage."""
    return {"tier": tier, "seed": 42, "repeat": 3, "stages": {"build": {"status": "ok", **build}}}


def _seconds(median: float) -> dict[str, float]:
    return {"median": median, "min": median - 1, "max": median + 1, "n": 3}


def _build(history_s: float | None) -> dict[str, Any]:
    build: dict[str, Any] = {
        "full": {"seconds": _seconds(80.0), "events": 30_000, "peak_mib": _seconds(2800.0)},
        "re_extract": {"seconds": _seconds(95.0), "events": 30_000, "peak_mib": _seconds(3100.0)},
        "incremental": {"seconds": _seconds(40.0), "share_of_full": 0.5, "peak_mib": _seconds(2700.0)},
    }
    if history_s is not None:
        build["history"] = {
            "seconds": _seconds(history_s),
            "new_events": _seconds(9_890.0),
            "share_of_full": history_s / 80.0,
            "peak_mib": _seconds(2600.0),
            "messages": 10_000,
        }
    return build


def test_re_extraction_and_history_rows_and_the_history_ratio() -> None:
    results = {"S": _tier("S", _build(20.0)), "M": _tier("M", _build(25.0))}
    text = render(results, "BENCHMARKS.png")
    rows = text.splitlines()
    assert (
        "| Re-extraction of every event + full build (`--re-extract`), s | **95.0** [94.0 - 96.0] "
        "| **95.0** [94.0 - 96.0] |" in rows
    )
    assert (
        "| Peak memory, re-extraction + full build, MiB | **3,100** [3,099 - 3,101] "
        "| **3,100** [3,099 - 3,101] |" in rows
    )
    assert (
        "| History: incremental build of the same +10,000 events, s | **20.0** [19.0 - 21.0] "
        "| **25.0** [24.0 - 26.0] |" in rows
    )
    assert (
        "| Peak memory, history incremental build, MiB | **2,600** [2,599 - 2,601] "
        "| **2,600** [2,599 - 2,601] |" in rows
    )
    line = "history independence: time on M / time on S = 1.25 (target <= 1.5)"
    assert line in rows
    # below the results table, before the next section
    table_end = max(i for i, row in enumerate(rows) if row.startswith("| Data.Rentgen lineage endpoint"))
    assert table_end < rows.index(line) < rows.index("### Build scaling")


def test_tagged_source_rows_cold_and_warm() -> None:
    tagged = _build(20.0)
    tagged["tagged"] = {
        "seconds": _seconds(30.0),
        "new_events": _seconds(1.0),
        "warm": {"cold_s": 31.0, "seconds": _seconds(12.0)},
        "reached": {"rows": 40, "origins": 1, "datasets": 12, "max_hops": 5},
    }
    no_warm = _build(20.0)
    no_warm["tagged"] = {**tagged["tagged"], "warm": {"status": "skipped", "reason": "not in --build-parts"}}
    rows = render({"S": _tier("S", tagged), "M": _tier("M", no_warm)}, "BENCHMARKS.png").splitlines()
    assert (
        "| Incremental build of one event that tags a source column `pii` (issue 42), s "
        "| **30.0** [29.0 - 31.0] | **30.0** [29.0 - 31.0] |" in rows
    )
    assert (
        "| The same event built again in one session (warm), s | **12.0** [11.0 - 13.0] "
        "| not run: not in --build-parts |" in rows
    )


def test_results_of_older_runs_render_without_the_new_measurements(tmp_path: Path) -> None:
    text = render(_results(tmp_path), "BENCHMARKS.png")  # S.json of an earlier run: no re_extract, history
    rows = text.splitlines()
    assert (
        "| Re-extraction of every event + full build (`--re-extract`), s | not measured | not measured |"
        in rows
    )
    assert (
        "| History: incremental build of the same +10,000 events, s | not measured | not measured |" in rows
    )
    assert "| Peak memory, history incremental build, MiB | not measured | not measured |" in rows
    assert "history independence:" not in text


def test_history_ratio_needs_both_tiers_and_a_failed_part_says_why() -> None:
    failed = _build(None)
    failed["re_extract"] = {
        "status": "failed",
        "error": "build-re-extract-1 failed (exit 1); log x.log:\n...",
    }
    results = {"S": _tier("S", _build(20.0)), "M": _tier("M", failed)}
    text = render(results, "BENCHMARKS.png")
    assert "history independence:" not in text
    assert history_line(results) is None
    assert "| **95.0** [94.0 - 96.0] | failed: build-re-extract-1 failed (exit 1); log x.log: |" in text
    assert history_line({"M": _tier("M", _build(30.0)), "S": _tier("S", _build(20.0))}) == (
        "history independence: time on M / time on S = 1.50 (target <= 1.5)"
    )


def _job(work_s: float, task_ms: list[int] | None, **counts: int) -> dict[str, Any]:
    run: dict[str, Any] = {"work_s": work_s, **counts}
    if task_ms is not None:
        run["executors"] = [
            {"id": str(i), "totalTasks": 10, "totalDuration": ms, "totalCores": 1, "worker": f"w{i}"}
            for i, ms in enumerate(task_ms)
        ]
    return run


def test_scale_out_puts_cluster_jobs_beside_local_ones_with_the_worker_model() -> None:
    local = _tier("M", {"full": {"runs": [_job(200.0, None, events=1_000_000)]}})
    local["started_at"] = "2026-11-26T03:00:00+00:00"
    cluster = _tier(
        "M",
        {
            # 2 executors, 300 s of tasks in all: 150 s of the 2 cores' wall time, 100 s outside tasks
            "full": {"runs": [_job(250.0, [160_000, 140_000], events=1_000_000)]},
            "first": _job(700.0, None, events=1_000_000),  # its executors unknown: no model
        },
    )
    cluster["started_at"] = "2026-11-26T02:00:00+00:00"
    cluster["stages"]["ingest"] = {
        "status": "ok",
        "ingest": {"runs": [_job(400.0, [300_000, 300_000], landed=800_000)]},
    }
    cluster["settings"] = {
        "spark_master": "spark://127.0.0.1:7077",
        "driver_memory": "2g",
        "shuffle_partitions": 4,
        "stack": {
            "workers": 2,
            "worker_cores": 1,
            "worker_memory": "2g",
            "catalog": "REST",
            "object_store": "S3",
        },
    }
    text = render({"M": local}, "BENCHMARKS.png", cluster={"M": cluster})
    rows = text.splitlines()
    assert "## Scale-out: a standalone cluster, the REST catalog and S3 beside local mode" in rows
    # 4 workers: 100 + 300 / 4 = 175; 8 workers: 100 + 300 / 8 = 137.5
    assert (
        "| Full build (`--full-refresh`) | 200.0 | 250.0 (4,000 ev/s) | 1.25 | 300.0 | 100.0 | 175.0 "
        "| 137.5 |" in rows
    )
    assert "| First build (extracts every event) | - | 700.0 (1,429 ev/s) | - | - | - | - | - |" in rows
    # ingestion: 600 s of tasks, 300 s their share of 400 s: 100 s outside; no local ingest stage
    assert (
        "| Ingestion into `raw.events` | - | 400.0 (2,000 ev/s) | - | 600.0 | 100.0 | 250.0 | 175.0 |" in rows
    )
    section = rows[
        rows.index("## Scale-out: a standalone cluster, the REST catalog and S3 beside local mode") :
    ]
    assert not any(row.startswith("| Incremental build") for row in section)  # not measured on the cluster
    assert "local run started 2026-11-26T03:00:00+00:00." in text
    assert "## Scale-out" not in render({"M": local}, "BENCHMARKS.png")


def test_lineage_freshness_and_noop_build_rows(tmp_path: Path) -> None:
    fresh = {
        "status": "ok",
        "visible_s": {"median": 41.2, "min": 20.5, "max": 80.0, "n": 20},
        "visible_worst_s": 80.0,
        "complete_s": {"median": 55.0, "min": 30.0, "max": 99.0, "n": 20},
        "complete_worst_s": 99.0,
    }
    results = _results(tmp_path, **{"lineage-freshness": fresh})
    results["M"]["stages"]["build"]["noop"] = {"seconds": {"median": 3.4, "min": 3.1, "max": 3.9, "n": 3}}
    text = render(results, "BENCHMARKS.png")
    [visible] = [line for line in text.splitlines() if line.startswith("| Lineage freshness: produce → in")]
    assert visible.endswith("| not run | **41.2** s [20.5 - 80.0], worst 80.0 s |")
    [complete] = [line for line in text.splitlines() if "its build finished" in line]
    assert "**55.0** s [30.0 - 99.0], worst 99.0 s" in complete
    [noop] = [line for line in text.splitlines() if line.startswith("| Build with nothing new")]
    assert noop.endswith("| not measured | **3.4** [3.1 - 3.9] |")


def test_warm_history_row_and_a_skipped_part_says_why(tmp_path: Path) -> None:
    results = _results(tmp_path)
    results["S"]["stages"]["build"]["history"] = {
        "seconds": {"median": 90.0, "min": 88.0, "max": 95.0, "n": 3},
        "warm": {"status": "skipped", "reason": "a cluster lake is not restored between builds"},
    }
    results["M"]["stages"]["build"]["history"] = {
        "seconds": {"median": 150.0, "min": 150.0, "max": 150.0, "n": 1},
        "warm": {"cold_s": 151.0, "seconds": {"median": 98.5, "min": 97.0, "max": 99.0, "n": 2}},
    }
    text = render(results, "BENCHMARKS.png")
    [warm] = [line for line in text.splitlines() if line.startswith("| History, warm:")]
    assert warm == (
        "| History, warm: the same +10,000 events built again in one session, s "
        "| not run: a cluster lake is not restored between builds | **98.5** [97.0 - 99.0] |"
    )
