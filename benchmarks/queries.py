"""Stage ``queries`` (issue 6, measurement 4): the ``lineage`` CLI on the tier's built lake.

``lineage upstream`` and ``lineage downstream`` at depth 1, 3 and 10, from a hub dataset and from a leaf
dataset, each invocation a new process of the installed console script (interpreter start, imports,
catalog open, table reads and the traversal all included). One untimed run per query first checks that it
answers (exit 0, JSON) and records how many nodes and edges it returned; then ``runs`` timed runs give
p50, p95, min and max of the wall time and the peak memory of the process.

The nodes come from the generated estate, so they are known without querying the lake:

- **hub**: the hub dataset read by the most jobs (one of the ~1% of tables ~30% of the readers read);
- **leaf**: a dataset some job writes and no job reads, the one with the longest chain of jobs upstream
  (so ``upstream --depth 10`` has ten hops to walk).

Both are named by their location (``s3a://...``), which the CLI resolves to the canonical dataset like any
other alias. Data.Rentgen's lineage endpoint is asked the same questions in the side-by-side stage, on the
database its consumer filled (:mod:`benchmarks.rentgen_api`), so only at the tiers that stage runs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.measure import ProcessResult
from benchmarks.workload import BASE_TIME, Dataset, Estate

DEPTHS = (1, 3, 10)
DIRECTIONS = ("upstream", "downstream")
DEFAULT_RUNS = 10


@dataclass
class QueryContext:
    """What the queries stage gets from the runner."""

    tier: str
    repeat: int
    work_dir: Path  # a folder for this stage's files and logs
    settings_file: Path  # JSON overrides for load_settings: this tier's catalog (LINEAGE_CONFIG-free)
    env: dict[str, str]  # environment for child processes (LINEAGE__* variables pointing at this lake)
    estate: Estate  # the generated jobs and datasets
    run_measured: Callable[..., ProcessResult]  # benchmarks.measure.run_measured (wall time, peak memory)
    python: Sequence[str]  # the interpreter of the project venv, e.g. [".venv/bin/python"]
    runs: int = DEFAULT_RUNS  # timed runs per query


def _readers(estate: Estate) -> dict[int, int]:
    counts: dict[int, int] = {}
    for job in estate.jobs:
        for index in set(job.inputs):
            counts[index] = counts.get(index, 0) + 1
    return counts


def _upstream_depth(estate: Estate, limit: int = 12) -> dict[int, int]:
    """Per dataset: the longest chain of writing jobs above it, in jobs, capped at ``limit``.

    Computed in rounds (Bellman-Ford style, at most ``limit``), so cycles in the estate cannot loop.
    """
    writers: dict[int, list[list[int]]] = {}
    for job in estate.jobs:
        for out in job.outputs:
            writers.setdefault(out, []).append(job.inputs)
    depth = {d.index: 0 for d in estate.datasets}
    for _ in range(limit):
        changed = False
        for out, input_lists in writers.items():
            best = max(1 + max((depth.get(i, 0) for i in inputs), default=0) for inputs in input_lists)
            best = min(best, limit)
            if best > depth.get(out, 0):
                depth[out] = best
                changed = True
        if not changed:
            break
    return depth


def _name(d: Dataset) -> str:
    return f"dataset:{d.namespace}/{d.name}"


def pick_nodes(estate: Estate) -> dict[str, tuple[Dataset, str]]:
    """``{"hub": (dataset, why), "leaf": (dataset, why)}`` from the estate."""
    readers = _readers(estate)
    by_index = {d.index: d for d in estate.datasets}
    hubs = [d for d in estate.datasets if d.hub and d.namespace]
    if not hubs:
        raise ValueError("the estate has no hub dataset")
    hub = max(hubs, key=lambda d: (readers.get(d.index, 0), -d.index))
    written = {i for job in estate.jobs for i in job.outputs}
    depth = _upstream_depth(estate)
    leaves = [by_index[i] for i in written if i not in readers and by_index[i].namespace]
    if not leaves:
        raise ValueError("the estate has no dataset that is written and never read")
    leaf = max(leaves, key=lambda d: (depth.get(d.index, 0), -d.index))
    return {
        "hub": (hub, f"read by {readers.get(hub.index, 0)} jobs"),
        "leaf": (leaf, f"read by no job, {depth.get(leaf.index, 0)} jobs deep upstream"),
    }


def most_written(estate: Estate) -> tuple[Dataset, str]:
    """The dataset the most jobs of the estate write (ties: the lowest index): the one with the most versions
    a versions question walks, as far as the estate says without counting runs."""
    writers: dict[int, int] = {}
    for job in estate.jobs:
        for index in set(job.outputs):
            writers[index] = writers.get(index, 0) + 1
    named = [d for d in estate.datasets if d.namespace and d.index in writers]
    if not named:
        raise ValueError("the estate has no written dataset")
    dataset = max(named, key=lambda d: (writers[d.index], -d.index))
    return dataset, f"written by {writers[dataset.index]} jobs"


def diff_windows(estate: Estate) -> dict[str, str]:
    """The windows of the diff question: the last day of the base part's history against the week before
    it (the CLI's default windows, placed at the end of the generated history instead of at now)."""
    end = BASE_TIME + timedelta(days=estate.tier.days)
    cut = end - timedelta(days=1)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return {
        "from": cut.strftime(stamp),
        "to": end.strftime(stamp),
        "base_from": (cut - timedelta(days=7)).strftime(stamp),
        "base_to": cut.strftime(stamp),
    }


class HistoryQuestion(NamedTuple):
    """One over-time or health question, asked of the CLI and of the read API alike."""

    label: str
    node: str  # which node: hub, most-written or lake
    why: str  # why that node was picked
    args: list[str]  # the CLI's arguments (``--json`` added when run)
    path: str  # the read API's path
    query: dict[str, str]  # and its query


def history_questions(estate: Estate) -> list[HistoryQuestion]:
    """The over-time and health questions (issues 41 and 42): the health of the most-read dataset with its
    whole upstream, the versions of the most-written dataset, and the diff of the whole lake between two
    windows."""
    hub, hub_why = pick_nodes(estate)["hub"]
    written, written_why = most_written(estate)
    windows = diff_windows(estate)
    window_args = [a for k, v in windows.items() for a in (f"--{k.replace('_', '-')}", v)]
    return [
        HistoryQuestion(
            "health", "hub", hub_why, ["health", _name(hub)], "/api/v2/health", {"node": _name(hub)}
        ),
        HistoryQuestion(
            "versions",
            "most-written",
            written_why,
            ["versions", _name(written)],
            "/api/v2/versions",
            {"node": _name(written)},
        ),
        HistoryQuestion(
            "diff, whole lake", "lake", "every dataset", ["diff", *window_args], "/api/v2/diff", windows
        ),
    ]


def answer_size(answer: Any) -> int:
    """How many entries an answer lists: versions, health causes, or every change of a diff."""
    if not isinstance(answer, dict):
        return 0
    if "versions" in answer:
        return len(answer["versions"])
    if "causes" in answer:
        return len(answer["causes"])
    if "counts" in answer:  # a diff counts every change and lists the first few of each kind
        return sum(n if isinstance(n, int) else sum(n.values()) for n in answer["counts"].values())
    total = 0
    for value in answer.values():
        if isinstance(value, list):
            total += len(value)
        elif isinstance(value, dict):
            total += sum(len(v) for v in value.values() if isinstance(v, list))
    return total


def percentile(values: Sequence[float], share: float) -> float:
    """Linear-interpolated percentile (``share`` in 0..1) of at least one value."""
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    position = share * (len(data) - 1)
    low = int(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


def spread(seconds: Sequence[float], digits: int = 3) -> dict[str, float | int]:
    """``runs``, ``p50_s``, ``p95_s``, ``min_s``, ``max_s`` of some timed runs (at least one)."""
    return {
        "runs": len(seconds),
        "p50_s": round(statistics.median(seconds), digits),
        "p95_s": round(percentile(seconds, 0.95), digits),
        "min_s": round(min(seconds), digits),
        "max_s": round(max(seconds), digits),
    }


def _command(ctx: QueryContext, direction: str, node: str, depth: int) -> list[str]:
    script = Path(ctx.python[0]).parent / "lineage"
    return [str(script), direction, node, "--depth", str(depth), "--json"]


# `lineage sql` (issue 39): DuckDB over the lake's Iceberg tables, a new process each time, as a user runs it.
SQL_QUESTIONS = (
    ("one-table aggregate over runs", "SELECT inferred_state, count(*) AS runs FROM lineage.runs GROUP BY 1"),
    (
        "runs joined with run_io",
        "SELECT r.job_namespace, r.job_name, count(DISTINCT io.dataset_id) AS datasets "
        "FROM lineage.runs r JOIN lineage.run_io io ON io.run_id = r.run_id "
        "GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10",
    ),
)


def measure_command(ctx: QueryContext, command: list[str], label: str) -> tuple[Any, float, dict[str, Any]]:
    """Run ``command`` (printing JSON) once untimed, then ``ctx.runs`` times measured (logs
    ``<label>-<i>.log``): its parsed answer, the untimed run's seconds, and :func:`spread` of the measured
    wall times with their peak memory."""
    started = time.monotonic()
    check = subprocess.run(command, env=ctx.env, capture_output=True, text=True, check=False)
    first_s = time.monotonic() - started
    if check.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {check.returncode}: {check.stderr.strip()[-2000:]}")
    answer = json.loads(check.stdout)
    walls, peaks = [], []
    for i in range(1, ctx.runs + 1):
        done = ctx.run_measured(command, log=ctx.work_dir / f"{label}-{i}.log", env=ctx.env)
        if done.returncode != 0:
            raise RuntimeError(f"{label}-{i} exited {done.returncode}; log {done.log}")
        walls.append(done.wall_s)
        peaks.append(done.peak_rss_mib)
    return answer, first_s, {**spread(walls), "peak_mib": round(max(peaks), 1)}


def run_sql(ctx: QueryContext) -> list[dict[str, Any]]:
    """Each of :data:`SQL_QUESTIONS` through ``lineage sql --format json``: rows answered, wall seconds."""
    script = Path(ctx.python[0]).parent / "lineage"
    rows: list[dict[str, Any]] = []
    for label, query in SQL_QUESTIONS:
        command = [str(script), "sql", "--format", "json", query]
        answer, _first_s, timed = measure_command(ctx, command, f"sql-{len(rows)}")
        rows.append({"query": label, "sql": query, "rows": len(answer), **timed})
    return rows


def run_history(ctx: QueryContext, api: str | None = None) -> list[dict[str, Any]]:
    """Each of :func:`history_questions` through the CLI (``--json``): entries answered, wall seconds. With
    ``api`` (a running ``lineage serve``'s URL) the CLI asks it (``lineage --api URL ...``) instead of the
    lake."""
    script = Path(ctx.python[0]).parent / "lineage"
    asking = ["--api", api] if api else []
    rows: list[dict[str, Any]] = []
    for question in history_questions(ctx.estate):
        command = [str(script), *asking, *question.args, "--json"]
        label = f"history{'-api' if api else ''}-{len(rows)}"
        answer, first_s, timed = measure_command(ctx, command, label)
        rows.append(
            {"query": question.label, "node": question.node, "why": question.why, "args": question.args}
            | {"entries": answer_size(answer), "first_s": round(first_s, 3), **timed}
        )
    return rows


def run_queries(ctx: QueryContext) -> dict[str, Any]:
    """Measure every (direction, node, depth) query; rows for the report."""
    ctx.work_dir.mkdir(parents=True, exist_ok=True)
    nodes = pick_nodes(ctx.estate)
    rows: list[dict[str, Any]] = []
    for which, (dataset, _why) in nodes.items():
        for direction in DIRECTIONS:
            for depth in DEPTHS:
                command = _command(ctx, direction, _name(dataset), depth)
                answer, first_s, timed = measure_command(ctx, command, f"{direction}-{which}-d{depth}")
                rows.append(
                    {
                        "query": direction,
                        "node": which,
                        "name": _name(dataset),
                        "depth": depth,
                        "nodes": len(answer.get("nodes", [])),
                        "edges": len(answer.get("edges", [])),
                        "first_s": round(first_s, 3),
                        **timed,
                    }
                )
    every = [r["p95_s"] for r in rows]
    return {
        "status": "ok",
        "sql": run_sql(ctx),
        "history": run_history(ctx),
        "tier": ctx.tier,
        "nodes": {k: {"name": _name(d), "why": why} for k, (d, why) in nodes.items()},
        "rows": rows,
        "p95_max_s": max(every),
        "p50_median_s": statistics.median(r["p50_s"] for r in rows),
        "peak_mib_max": max(r["peak_mib"] for r in rows),
    }
