"""What a tier's benchmark run shares with its stages: configuration, lakes, results, measured Spark jobs.

The import graph of ``benchmarks`` is a DAG, this module one of its lower layers: it imports
:mod:`benchmarks.measure`, :mod:`benchmarks.stage` (the command line of a stage process) and
:mod:`benchmarks.workload`, nothing that imports it back. The stage modules (:mod:`benchmarks.freshness`,
:mod:`benchmarks.rentgen`) take a :class:`TierContext`; :mod:`benchmarks.runner` builds on all of them.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks import measure
from benchmarks import stage as stage_process
from benchmarks.workload import BASE_TIME, TIERS, WINDOW, Workload
from lineage.cluster.stack import deep_merge
from lineage.settings import load_settings

log = logging.getLogger(__name__)

ALL_STAGES = ("ingest", "build", "queries", "freshness", "lineage-freshness", "rentgen")
# The measurements of the build stage after the lake's first build (--build-parts picks some).
BUILD_PARTS = (
    "full",
    "re-extract",
    "incremental",
    "history",
    "history-warm",
    "tagged",
    "tagged-warm",
    "noop",
)
# What runs on --stack cluster: the Spark jobs. The CLI queries, the freshness probe and Data.Rentgen are
# measured on the local stack only.
CLUSTER_STAGES = ("ingest", "build")
RESULTS_SCHEMA = 1
PARTITIONS = 4  # as Data.Rentgen's documented set-up (4 partitions, 4 workers) and our default broker


class StageError(RuntimeError):
    """A measured job failed; the message names its log."""


@dataclass
class BenchConfig:
    tiers: list[str]
    repeat: int = 3
    seed: int = 42
    stages: tuple[str, ...] = ALL_STAGES
    build_parts: tuple[str, ...] = BUILD_PARTS
    work_root: Path = Path("var/bench/work")
    results_dir: Path = Path("var/bench/results")
    freshness_probes: int = 8
    lineage_probes: int = 20
    query_runs: int = 10
    rentgen_tiers: tuple[str, ...] = ("S",)
    rentgen_workers: int = 4
    rentgen_python: Path = Path(".venv-rentgen/bin/python")
    label: str = ""
    keep: bool = False
    seed_lake: Path | None = None  # start from a copy of this lake (raw tables + checkpoint of this tier)
    command: str = ""
    stage_timeout_s: float = 4 * 3600.0
    # "local": the embedded default (local[*], SQLite catalog, local warehouse). "cluster": a local stack
    # of lineage.cluster.stack in the work folder (Spark standalone with `workers` workers of
    # `worker_cores` cores and `worker_memory` each, Iceberg REST catalog server, S3Proxy), results apart.
    stack: str = "local"
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "2g"


@dataclass
class Lake:
    """One catalog + checkpoint in the work folder, or, on a cluster stack (``cluster`` holds its
    settings), namespaces of their own in the stack's REST catalog and a checkpoint in its bucket."""

    root: Path
    cluster: dict[str, Any] | None = None

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def on_cluster(self) -> bool:
        return self.cluster is not None

    def overrides(self, bootstrap: str, topic: str) -> dict[str, Any]:
        if self.cluster is not None:
            name = re.sub(r"\W", "_", self.root.name)
            bucket = self.cluster["local_cluster"]["bucket"]
            return deep_merge(
                self.cluster,
                {
                    "catalog": {"raw_namespace": f"{name}_raw", "lineage_namespace": f"{name}_lineage"},
                    "kafka": {"bootstrap_servers": bootstrap, "topic": topic},
                    "ingest": {
                        "checkpoint": f"s3a://{bucket}/bench/{self.root.parent.name}/{name}/checkpoint"
                    },
                    "openlineage": {"enabled": False},
                },
            )
        return {
            "catalog": {
                "sqlite_path": str(self.root / "catalog.db"),
                "warehouse": str(self.root / "warehouse"),
                "properties": {},
            },
            "kafka": {"bootstrap_servers": bootstrap, "topic": topic},
            "ingest": {"checkpoint": str(self.checkpoint)},
            "spark": {"conf": {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}},
            # The stages call run_ingest / build_lineage themselves, without the self-instrumentation
            # wrappers of jobs/*.py (whose events would go to the configured topic, not the bench's).
            "openlineage": {"enabled": False},
        }

    def ingested(self, topic: str) -> int | None:
        """Messages of ``topic`` the lake's ingestion checkpoint has read (the sum of its latest end offsets
        over the partitions), None without a checkpoint of that topic.

        Spark's offset log: ``checkpoint/offsets/<batch>``, a version line, a metadata line, then one line
        per source (the Kafka source's: ``{"topic": {"partition": next offset, ...}}``).
        """
        batches = [p for p in (self.checkpoint / "offsets").glob("*") if p.name.isdigit()]
        if not batches:
            return None
        latest = max(batches, key=lambda p: int(p.name))
        for line in latest.read_text().splitlines()[2:]:
            try:
                offsets = json.loads(line)
            except ValueError:
                continue
            if isinstance(offsets, dict) and isinstance(offsets.get(topic), dict):
                return sum(int(v) for v in offsets[topic].values())
        return None


@dataclass
class TierContext:
    """What one tier's run shares with the stage modules: configuration, work folder, workload, results
    (saved after every stage) and the measured Spark jobs. :class:`benchmarks.runner.TierRun` adds the run
    itself."""

    config: BenchConfig
    tier_name: str
    results: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tier = TIERS[self.tier_name]
        suffix = "-cluster" if self.config.stack == "cluster" else ""
        self.work = self.config.work_root.resolve() / f"{self.tier_name}{suffix}"
        self.logs = self.work / "logs"
        self.workload = Workload(self.tier, self.config.seed)
        self.settings = load_settings()
        self.max_message_bytes = self.settings.kafka.max_message_bytes
        self.python = [sys.executable]
        self.topic = f"bench.{self.tier_name}"
        self.reference_now = ts(BASE_TIME + timedelta(days=self.tier.days) * WINDOW + timedelta(hours=1))

    # -- results --------------------------------------------------------------------------------------
    @property
    def results_file(self) -> Path:
        # Cluster results apart (results/cluster/<tier>.json): the report reads the local ones.
        folder = self.config.results_dir.resolve()
        return (folder / "cluster" if self.config.stack == "cluster" else folder) / f"{self.tier_name}.json"

    def save(self) -> None:
        self.results["finished_at"] = utc_now()
        self.results["load_average_end"] = measure.load_average()
        self.results_file.parent.mkdir(parents=True, exist_ok=True)
        self.results_file.write_text(json.dumps(self.results, indent=2, default=str))

    # -- measured jobs --------------------------------------------------------------------------------
    def spark_stage(self, stage: str, label: str, overrides: dict[str, Any], *extra: str) -> dict[str, Any]:
        """Run one :mod:`benchmarks.stage` job in a fresh process; its timings plus wall/peak memory."""
        settings_file = self.work / "jobs" / f"{label}.settings.json"
        out = self.work / "jobs" / f"{label}.json"
        settings_file.parent.mkdir(parents=True, exist_ok=True)
        settings_file.write_text(json.dumps(overrides, indent=2))
        out.unlink(missing_ok=True)
        command = stage_process.command(
            self.python, stage, "--settings", str(settings_file), "--out", str(out), *extra
        )
        done = measure.run_measured(
            command,
            log=self.logs / f"{label}.log",
            env=stage_process.environment(),
            timeout_s=self.config.stage_timeout_s,
        )
        if done.returncode != 0 or not out.exists():
            detail = measure.tail(self.logs / f"{label}.log")
            raise StageError(f"{label} failed (exit {done.returncode}); log {done.log}:\n{detail}")
        data: dict[str, Any] = json.loads(out.read_text())
        data["label"] = label
        data["wall_s"] = round(done.wall_s, 3)
        data["startup_s"] = round(data["session_ready"] - data["process_start"], 3)
        data["work_s"] = round(data["work_end"] - data["work_start"], 3)
        data["peak_mib"] = round(done.peak_rss_mib, 1)
        data["peak_jvm_mib"] = round(done.peak_by_name.get("java", 0) / measure.MIB, 1)
        log.info(
            "[%s] %s: work %.1f s, startup %.1f s, peak %.0f MiB",
            self.tier_name,
            label,
            data["work_s"],
            data["startup_s"],
            data["peak_mib"],
        )
        return data


def ts(at: datetime) -> str:
    """ISO-8601 with milliseconds and ``Z`` (what the workload's events and ``--now`` use)."""
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
