"""Stage ``queries`` (issue 6, measurement 4) -- A HOOK, NOT IMPLEMENTED YET.

To be filled in once the ``lineage`` CLI exists: ``lineage upstream/downstream`` at depth 1, 3 and 10 from
hub and leaf nodes on tier M, each query a new process (start included), p50 and p95, peak memory of the
CLI; and, if Data.Rentgen's server runs here, its lineage endpoint on the same data.

The runner calls :func:`run_queries` after the build stage, while the tier's lake (raw tables and every
``lake.lineage.*`` table, built) still exists, and stores what it returns under ``stages.queries`` of the
results JSON; :mod:`lineage.bench.report` prints ``status`` and, when present, the ``rows`` (a list of
dicts with ``query``, ``node``, ``depth``, ``p50_s``, ``p95_s``, ``peak_mib``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineage.bench.measure import ProcessResult
from lineage.bench.workload import Estate


@dataclass
class QueryContext:
    """What the queries stage gets from the runner."""

    tier: str
    repeat: int
    work_dir: Path  # a folder for this stage's files and logs
    settings_file: Path  # JSON overrides for load_settings: this tier's catalog (LINEAGE_CONFIG-free)
    env: dict[str, str]  # environment for child processes (LINEAGE__* variables pointing at this lake)
    estate: Estate  # the generated jobs and datasets: ``Estate.hub_names``, datasets without readers ...
    run_measured: Callable[..., ProcessResult]  # lineage.bench.measure.run_measured (wall time, peak memory)
    python: Sequence[str]  # the interpreter of the project venv, e.g. [".venv/bin/python"]


def run_queries(ctx: QueryContext) -> dict[str, Any]:
    """Measure the CLI queries. Placeholder: reports that the stage is not implemented."""
    return {
        "status": "not implemented",
        "reason": "the lineage CLI does not exist yet (hook: lineage.bench.queries.run_queries)",
        "tier": ctx.tier,
    }
