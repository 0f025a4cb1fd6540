"""A seeded synthetic OpenLineage workload: what a real estate's producers would put on the topic.

Pure and deterministic: the same tier and seed give the same messages, byte for byte, in the same order,
on every machine (every random draw comes from :class:`random.Random` seeded with strings, which does not
depend on ``PYTHONHASHSEED``; times come from a fixed base, never from the clock).

The estate (built once per tier and seed):

- **Airflow** DAGs of 1-15 tasks. A task either submits a Spark application (no datasets of its own), runs
  SQL (reads and writes tables under their catalog names), or does something without lineage (Python,
  Bash, sensors).
- **Spark** applications (from a task, or scheduled on their own) run 1-20 Spark jobs each; a Spark job
  that reads or writes tables reports them under their physical location with a ``TABLE`` symlink to the
  catalog name, as openlineage-spark does; the others (counts, collects, caches) report none.
- **Flink** streaming jobs: START with their datasets, RUNNING heartbeats at a per-job interval, then ABORT,
  FAIL, or nothing ever again (a cancelled job that never said so).
- **Datasets**: lake tables (``s3a://`` location + Hive catalog symlink), Kafka topics (some readers use
  another bootstrap address, an alias), warehouse and source database tables, landing folders. About 1% are
  hubs read by about 30% of the jobs that read anything; the other inputs come from upstream jobs' outputs
  (chains of many hops) or from source datasets nothing in the estate writes. Input count per job is
  1 + Poisson(1.5) (mean fan-in about 2.5); column counts are log-normal (median 20, long tail to 400).
  Column lineage is reported for about half of the outputs. Most jobs touch no dataset at all.

The stream: runs of every DAG / application / Flink job spread over ``tier.days`` days, events merged in
event-time order, every run id a UUIDv7 of its start (what current OpenLineage clients send), Kafka keys as
openlineage-python's Kafka transport sets them (``run:<root job namespace>/<root job name>``). Then the
noise real topics have: about 1% of events sent twice (a producer retry, some messages later), about 1%
delivered late (held back behind up to 300 later messages), about 0.1% malformed messages (one per
:mod:`lineage.transforms.envelope` reason), and a few events over 1 MB (a Spark logical plan facet).

The time window is split into parts: ``base`` (the tier's events), then ``delta1`` ... ``delta5``, each the
next 1% of the window (about 1% more events), for measuring incremental builds after new events arrive.

After the window, ``history`` is a delta of a fixed size, :data:`HISTORY_EVENTS` messages on every tier, for
measuring whether an incremental build costs the same on a small and on a large history
(:meth:`Workload.history`). Its run starts and their kinds (batch or Flink) come from a random generator
seeded without the tier, so they are the same on every tier; the runs are the tier's own units, so the
bytes differ between tiers (other jobs, datasets and column counts). What is the same: the message count,
the start times and kinds of the runs, the noise rates (duplicates, late, malformed), the seed.

``python -m benchmarks.workload --tier S --stats`` prints the shape of a tier without Kafka (with
``--part history``: of the fixed-size delta).
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import itertools
import json
import math
import random
import struct
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

BASE_TIME = datetime(2026, 10, 1, tzinfo=UTC)
DELTA_SHARE = 0.01  # each ``delta<k>`` part: the next 1% of the time window after the base part
DELTA_PARTS = 5  # delta1 .. delta5 (fixed, so that the base part never depends on how many are used)
WINDOW = 1 + DELTA_SHARE * DELTA_PARTS
# The ``history`` delta: the same number of messages on every tier, its runs starting after the window.
HISTORY_EVENTS = 10_000
HISTORY_START_EVERY_S = 2.0  # mean gap between two run starts (about 10 events/s once runs overlap)
# Flink runs of the history delta send a heartbeat a minute for 15-30 minutes, of which the delta (about
# 20 minutes of event time) holds a part: 11% of its runs being Flink's gives about the tiers' 8% of Flink
# events.
HISTORY_FLINK_RUN_SHARE = 0.11
HISTORY_FLINK_TIMING = (60.0, 1800.0)  # heartbeat interval, run window (seconds)
HISTORY_RUN_NUMBERS = 1_000_000  # run numbers (run random seeds) of the history delta start here
# The tagged-source event (Workload.tagged_source) comes this long after the window's end: past the history
# delta's events (about 20 minutes of event time) and before the benchmarks' reference time (an hour).
TAGGED_AFTER = timedelta(minutes=50)

SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
PRODUCER_AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/2.2.0"
PRODUCER_SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.33.0/integration/spark"
PRODUCER_FLINK = "https://github.com/OpenLineage/OpenLineage/tree/1.33.0/integration/flink"
_FACET_SPEC = "https://openlineage.io/spec/facets"

AIRFLOW_NAMESPACE = "http://airflow.prod.internal:8080"
SPARK_NAMESPACE = "spark-prod"
FLINK_NAMESPACE = "flink-prod"
LAKE = "s3a://lake-prod"
HIVE = "hive://metastore.prod.internal:9083"
KAFKA = "kafka://kafka-1:19092"
KAFKA_ALIAS = "kafka://broker:9092"  # same cluster, other bootstrap address (an alias rule in conf/ maps it)
DWH = "postgres://dwh.prod.internal:5432"
SOURCE_DB = "mysql://crm-db.prod.internal:3306"
LANDING = "s3://landing-prod"

DOMAINS = (
    "sales", "orders", "customers", "billing", "inventory", "marketing", "payments", "logistics", "risk",
    "finance", "support", "fraud", "ads", "search", "pricing", "catalog", "clicks", "sessions", "hr", "crm",
)  # fmt: skip
WORDS = (
    "id", "created_at", "updated_at", "amount", "currency", "status", "country", "region", "user_id",
    "order_id", "item_id", "price", "quantity", "discount", "channel", "campaign", "source", "score",
    "segment", "email", "phone", "city", "zip", "category", "brand", "margin", "cost", "revenue", "tax",
    "event_type", "session_id", "device", "latency_ms", "flag", "comment", "ts", "day", "week", "version",
)  # fmt: skip
TYPES = ("string", "long", "int", "double", "decimal(18,2)", "timestamp", "date", "boolean")
SPARK_ACTIONS_IO = (
    "execute_insert_into_hadoop_fs_relation_command",
    "append_data",
    "overwrite_by_expression",
    "merge_into_command_edge",
    "create_table_as_select",
    "execute_save_into_data_source_command",
)
SPARK_ACTIONS_NO_IO = ("collect_limit", "count", "show_string", "cache_table", "broadcast_exchange", "take")
MAX_OUTPUTS = 12  # tables one job writes, at most
OPERATORS_OTHER = ("PythonOperator", "BashOperator", "ExternalTaskSensor", "EmailOperator", "HttpOperator")


def _facet(facet: str, version: str = "1-0-1", /, **fields: Any) -> dict[str, Any]:
    """A facet with its ``_producer`` (Spark unless given) and ``_schemaURL``."""
    return {
        "_producer": fields.pop("_producer", PRODUCER_SPARK),
        "_schemaURL": f"{_FACET_SPEC}/{version}/{facet}.json#/$defs/{facet}",
        **fields,
    }


@dataclass(frozen=True)
class Tier:
    """Size of a workload. ``events`` counts every message of the base part (duplicates, malformed)."""

    name: str
    jobs: int
    datasets: int
    events: int
    days: float


TIERS = {
    "S": Tier("S", jobs=1_000, datasets=2_000, events=30_000, days=2),
    "M": Tier("M", jobs=20_000, datasets=50_000, events=1_000_000, days=14),
    "L": Tier("L", jobs=60_000, datasets=150_000, events=3_000_000, days=30),
}


@dataclass(frozen=True)
class Shape:
    """The realism knobs (defaults: what the benchmark issue asks for)."""

    hub_share: float = 0.01  # of datasets
    hub_reader_share: float = 0.30  # of the jobs that read anything
    fan_in_extra_mean: float = 1.5  # inputs per reading job: 1 + Poisson(this)
    source_share: float = 0.25  # datasets no job of the estate writes (external sources)
    column_median: float = 20.0
    column_sigma: float = 0.9
    column_max: int = 400
    column_lineage_share: float = 0.5  # of outputs
    flink_event_share: float = 0.08  # of the events: Flink START / heartbeats / ends
    duplicate_rate: float = 0.01
    late_rate: float = 0.01
    malformed_rate: float = 0.001
    oversized_rate: float = 1 / 10_000
    task_fail_rate: float = 0.02
    spark_fail_rate: float = 0.01
    vanish_rate: float = 0.003  # batch runs that stop sending events (driver killed): never terminated
    flink_silent_share: float = 0.3  # Flink runs that end without a terminal event


@dataclass(frozen=True, slots=True)
class Message:
    """One Kafka message. ``reason`` is the rejection reason a malformed message must get."""

    key: bytes | None
    value: bytes | None
    kind: str  # "event", "duplicate", "malformed"
    reason: str | None = None


# -- the estate -------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    index: int
    hub: bool
    source: bool
    columns: int
    kind: str = ""  # lake, kafka, dwh, sourcedb, landing (decided by the first job that writes/reads it)
    namespace: str = ""
    name: str = ""
    catalog: tuple[str, str] | None = None  # the Hive catalog name of a lake table (its symlink)
    fields: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Job:
    index: int
    namespace: str
    name: str
    kind: str  # dag, task, spark_app, spark_job, flink
    integration: str
    job_type: str
    processing: str
    io: bool = False  # may read / write datasets
    reporter: str = "physical"  # how it names datasets: physical (+symlink) or catalog
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    alias_inputs: list[bool] = field(default_factory=list)  # Kafka topics named by the alias address
    lineage_outputs: list[bool] = field(default_factory=list)  # outputs that carry column lineage
    operator: str = ""
    position: int = 0


@dataclass
class Task:
    job: Job
    kind: str  # spark, sql, other
    app: SparkApp | None = None


@dataclass
class SparkApp:
    job: Job
    actions: list[Job]


@dataclass
class Unit:
    """Something scheduled: a DAG, a standalone Spark application or a Flink job."""

    index: int
    kind: str  # dag, spark, flink
    dag: Job | None = None
    tasks: list[Task] = field(default_factory=list)
    app: SparkApp | None = None
    flink: Job | None = None
    weight: float = 1.0  # relative schedule frequency


@dataclass
class Estate:
    tier: Tier
    seed: int
    shape: Shape
    jobs: list[Job]
    datasets: list[Dataset]
    units: list[Unit]

    @property
    def hub_names(self) -> set[tuple[str, str]]:
        """Every name a hub dataset is reported under (location and catalog name)."""
        names: set[tuple[str, str]] = set()
        for d in self.datasets:
            if d.hub:
                names.add((d.namespace, d.name))
                if d.catalog:
                    names.add(d.catalog)
        return names


def _rng(*parts: object) -> random.Random:
    return random.Random(":".join(str(p) for p in parts))


def _poisson(rng: random.Random, mean: float) -> int:
    # Knuth's method; means here are small.
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def _columns(rng: random.Random, shape: Shape) -> int:
    value = rng.lognormvariate(math.log(shape.column_median), shape.column_sigma)
    return max(1, min(shape.column_max, round(value)))


def build_estate(tier: Tier, seed: int = 42, shape: Shape | None = None) -> Estate:
    """The jobs, datasets and schedules of a tier (deterministic for a seed)."""
    shape = shape or Shape()
    rng = _rng("estate", seed, tier.name, tier.jobs, tier.datasets)
    jobs: list[Job] = []
    units: list[Unit] = []

    def new_job(
        namespace: str, name: str, kind: str, integration: str, job_type: str, processing: str
    ) -> Job:
        job = Job(len(jobs), namespace, name, kind, integration, job_type, processing)
        jobs.append(job)
        return job

    def new_app(name: str) -> SparkApp:
        app = new_job(SPARK_NAMESPACE, name, "spark_app", "SPARK", "APPLICATION", "BATCH")
        actions = []
        for k in range(1 + min(19, int(rng.expovariate(1 / 4.0)))):
            io = rng.random() < 0.6
            verb = rng.choice(SPARK_ACTIONS_IO if io else SPARK_ACTIONS_NO_IO)
            action = new_job(SPARK_NAMESPACE, f"{name}.{verb}_{k}", "spark_job", "SPARK", "SQL_JOB", "BATCH")
            action.io, action.position = io, k
            actions.append(action)
        return SparkApp(app, actions)

    while len(jobs) < tier.jobs:
        u = len(units)
        domain = DOMAINS[u % len(DOMAINS)]
        draw = rng.random()
        weight = rng.choice((1.0, 1.0, 1.0, 2.0, 4.0, 8.0)) * rng.uniform(0.7, 1.3)
        if draw < 0.55:
            dag_id = f"{domain}_dag_{u}"
            dag = new_job(AIRFLOW_NAMESPACE, dag_id, "dag", "AIRFLOW", "DAG", "BATCH")
            unit = Unit(u, "dag", dag=dag, weight=weight)
            for t in range(1 + min(14, int(rng.expovariate(1 / 4.0)))):
                roll = rng.random()
                if roll < 0.3:
                    task_id = f"spark_{t}"
                    job = new_job(
                        AIRFLOW_NAMESPACE, f"{dag_id}.{task_id}", "task", "AIRFLOW", "TASK", "BATCH"
                    )
                    job.operator = "SparkSubmitOperator"
                    task = Task(job, "spark", new_app(f"{domain}_app_{u}_{t}"))
                elif roll < 0.55:
                    task_id = f"sql_{t}"
                    job = new_job(
                        AIRFLOW_NAMESPACE, f"{dag_id}.{task_id}", "task", "AIRFLOW", "TASK", "BATCH"
                    )
                    job.operator, job.io, job.reporter = "SQLExecuteQueryOperator", True, "catalog"
                    task = Task(job, "sql")
                else:
                    task_id = f"task_{t}"
                    job = new_job(
                        AIRFLOW_NAMESPACE, f"{dag_id}.{task_id}", "task", "AIRFLOW", "TASK", "BATCH"
                    )
                    job.operator = rng.choice(OPERATORS_OTHER)
                    task = Task(job, "other")
                job.position = t
                unit.tasks.append(task)
        elif draw < 0.70:
            unit = Unit(u, "spark", app=new_app(f"{domain}_job_{u}"), weight=weight)
        else:
            flink = new_job(FLINK_NAMESPACE, f"{domain}_stream_{u}", "flink", "FLINK", "JOB", "STREAMING")
            flink.io = True
            unit = Unit(u, "flink", flink=flink)
        units.append(unit)

    datasets = _assign_datasets(tier, shape, rng, [j for j in jobs if j.io])
    return Estate(tier, seed, shape, jobs, datasets, units)


def _assign_datasets(tier: Tier, shape: Shape, rng: random.Random, io_jobs: list[Job]) -> list[Dataset]:
    count = max(tier.datasets, 10)
    hubs = max(1, round(count * shape.hub_share))
    sources = round(count * shape.source_share)
    datasets = [
        Dataset(i, hub=i < hubs, source=i >= count - sources, columns=_columns(rng, shape))
        for i in range(count)
    ]
    written = [d for d in datasets if not d.source]  # hubs first
    source_pool = [d.index for d in datasets if d.source]
    rng.shuffle(source_pool)

    # Outputs: every written dataset has one writer. Each IO job writes one, the rest are spread with a
    # heavy tail (a few jobs write many tables). Hubs go to Spark jobs (a hub is a curated lake table).
    writers = list(io_jobs)
    spark_writers = [j for j in writers if j.kind == "spark_job"] or writers
    for d in written[:hubs]:
        rng.choice(spark_writers).outputs.append(d.index)
    rest = written[hubs:]
    for job, d in zip(writers, rest, strict=False):
        job.outputs.append(d.index)
    # A job writes at most MAX_OUTPUTS tables; the overflow of a full job goes to the next one
    weights = [rng.paretovariate(1.3) for _ in writers]
    # (an estate with few writers for its datasets raises the cap rather than loop forever)
    cap = max(MAX_OUTPUTS, 2 * math.ceil(len(rest) / max(len(writers), 1)))
    for d in rest[len(writers) :]:
        pick = rng.choices(range(len(writers)), weights)[0]
        while len(writers[pick].outputs) >= cap:
            pick = (pick + 1) % len(writers)
        writers[pick].outputs.append(d.index)

    # Kinds of written datasets follow their writer; sources get theirs from their first reader.
    for job in writers:
        for index in job.outputs:
            d = datasets[index]
            if d.hub:
                d.kind = "lake"
            elif job.kind == "flink":
                d.kind = "kafka" if rng.random() < 0.6 else "lake"
            elif job.kind == "task":
                d.kind = "dwh" if rng.random() < 0.6 else "lake"
            else:
                roll = rng.random()
                d.kind = "lake" if roll < 0.8 else ("kafka" if roll < 0.9 else "dwh")

    # Inputs: writers in creation order; upstream datasets are outputs of earlier jobs (recent ones more
    # often, which makes long chains), sources are drawn so that each is read at least once.
    hub_ids = [d.index for d in datasets if d.hub]
    hub_weights = [1.0 / (r + 1) for r in range(len(hub_ids))]
    upstream: list[int] = []
    slots_left = sum(1 + shape.fan_in_extra_mean for _ in writers)
    for job in writers:
        wanted = 1 + _poisson(rng, shape.fan_in_extra_mean)
        if job.kind == "flink":
            wanted = 1 + (rng.random() < 0.3)
        chosen: list[int] = []
        if rng.random() < shape.hub_reader_share:
            chosen.append(rng.choices(hub_ids, hub_weights)[0])
        for _ in range(wanted * 4):
            if len(chosen) >= wanted:
                break
            if not upstream and not sources:
                break
            take_source = sources > 0 and (
                not upstream or rng.random() < max(0.35, len(source_pool) / max(slots_left, 1.0))
            )
            if take_source:
                pick = source_pool.pop() if source_pool else rng.randrange(count - sources, count)
            elif rng.random() < 0.5:
                pick = upstream[-1 - min(len(upstream) - 1, int(rng.expovariate(1 / 20.0)))]
            else:
                pick = rng.choice(upstream)
            if pick not in chosen and pick not in job.outputs:
                chosen.append(pick)
        slots_left -= 1 + shape.fan_in_extra_mean
        job.inputs = chosen
        upstream.extend(i for i in job.outputs if not datasets[i].hub)
        for index in chosen:
            d = datasets[index]
            if not d.kind:
                if job.kind == "flink":
                    d.kind = "kafka"
                elif job.kind == "task":
                    d.kind = "sourcedb"
                else:
                    d.kind = rng.choice(("kafka", "landing", "sourcedb"))
        job.alias_inputs = [datasets[i].kind == "kafka" and rng.random() < 0.2 for i in job.inputs]
        job.lineage_outputs = [rng.random() < shape.column_lineage_share for _ in job.outputs]

    for d in datasets:
        _name_dataset(d)
    return datasets


def _name_dataset(d: Dataset) -> None:
    d.kind = d.kind or "sourcedb"  # a source nobody happened to read
    domain = DOMAINS[d.index % len(DOMAINS)]
    table = f"{domain}_{WORDS[(d.index * 7) % len(WORDS)]}_{d.index}"
    if d.kind == "lake":
        db = f"{domain}_{'hub' if d.hub else 'mart'}"
        d.namespace, d.name = LAKE, f"warehouse/{db}.db/{table}"
        d.catalog = (HIVE, f"{db}.{table}")
    elif d.kind == "kafka":
        d.namespace, d.name = KAFKA, f"{domain}.{table}"
    elif d.kind == "dwh":
        d.namespace, d.name = DWH, f"dwh.{domain}.{table}"
    elif d.kind == "landing":
        d.namespace, d.name = LANDING, f"raw/{domain}/{table}"
    else:
        d.namespace, d.name = SOURCE_DB, f"crm.{table}"
    d.fields = [("id", "long")] + [
        (f"{WORDS[(d.index + 3 * k) % len(WORDS)]}_{k}", TYPES[(d.index + k) % len(TYPES)])
        for k in range(1, d.columns)
    ]


# -- events -----------------------------------------------------------------------------------------------


def _ts(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def uuid7(at: datetime, rng: random.Random) -> str:
    """A UUIDv7 (RFC 9562) whose timestamp is ``at``; the random bits come from ``rng``."""
    millis = int(at.timestamp() * 1000) & ((1 << 48) - 1)
    value = (millis << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62) | rng.getrandbits(62)
    return str(uuid.UUID(int=value))


@dataclass(frozen=True, slots=True)
class RunRef:
    run_id: str
    namespace: str
    name: str


@dataclass(slots=True)
class Spec:
    """One event before serialisation."""

    at: datetime
    event_type: str
    job: Job
    run_id: str
    producer: str
    parent: RunRef | None = None
    root: RunRef | None = None
    run_facets: dict[str, Any] | None = None
    job_facets: dict[str, Any] | None = None
    inputs: bool = False
    outputs: bool = False
    stats_seed: int = 0
    oversized: bool = False


_PLAN_SLOT = "\u0000plan\u0000"  # replaced by the serialised plan facet


class _Serializer:
    """Turns specs into JSON bytes; the dataset parts (schemas, symlinks, column lineage) are serialised
    once per dataset / job and spliced in, which keeps generation fast enough for millions of events."""

    def __init__(self, estate: Estate) -> None:
        self.estate = estate
        self._inputs: dict[int, str] = {}
        self._outputs: dict[tuple[int, bool], list[str]] = {}
        self._plan: str | None = None

    def _dataset(self, d: Dataset, reporter: str, alias: bool) -> dict[str, Any]:
        facets: dict[str, Any] = {
            "schema": _facet(
                "SchemaDatasetFacet", "1-1-1", fields=[{"name": n, "type": t} for n, t in d.fields]
            )
        }
        if reporter == "catalog" and d.catalog:
            namespace, name = d.catalog
        else:
            namespace, name = (KAFKA_ALIAS if alias else d.namespace), d.name
            if d.catalog:
                facets["symlinks"] = _facet(
                    "SymlinksDatasetFacet",
                    identifiers=[{"namespace": d.catalog[0], "name": d.catalog[1], "type": "TABLE"}],
                )
        return {"namespace": namespace, "name": name, "facets": facets}

    def inputs(self, job: Job) -> str:
        text = self._inputs.get(job.index)
        if text is None:
            ds = self.estate.datasets
            parts = [
                self._dataset(ds[i], job.reporter, alias)
                for i, alias in zip(job.inputs, job.alias_inputs, strict=True)
            ]
            text = self._inputs[job.index] = json.dumps(parts, separators=(",", ":"))
        return text

    def outputs(self, job: Job, with_lineage: bool) -> list[str]:
        """Each output without its closing brace (output statistics are appended per event); column
        lineage, where the job reports it, only when ``with_lineage`` (on the run's last event)."""
        parts = self._outputs.get((job.index, with_lineage))
        if parts is None:
            ds = self.estate.datasets
            parts = []
            for position, (index, lineage) in enumerate(zip(job.outputs, job.lineage_outputs, strict=True)):
                out = self._dataset(ds[index], job.reporter, False)
                if with_lineage and lineage and job.inputs:
                    out["facets"]["columnLineage"] = self._column_lineage(job, ds[index], position)
                parts.append(json.dumps(out, separators=(",", ":"))[:-1])
            self._outputs[(job.index, with_lineage)] = parts
        return parts

    def _column_lineage(self, job: Job, target: Dataset, position: int) -> dict[str, Any]:
        rng = _rng("lineage", self.estate.seed, job.index, position)
        sources = [self.estate.datasets[i] for i in job.inputs]

        def ref(d: Dataset, column: str, kind: str, subtype: str) -> dict[str, Any]:
            namespace, name = d.catalog if job.reporter == "catalog" and d.catalog else (d.namespace, d.name)
            transformation = {
                "type": kind,
                "subtype": subtype,
                "description": "",
                "masking": subtype == "MASKED",
            }
            return {
                "namespace": namespace,
                "name": name,
                "field": column,
                "transformations": [transformation],
            }

        fields: dict[str, Any] = {}
        for column, _type in target.fields:
            refs = []
            for _ in range(1 + (rng.random() < 0.3)):
                src = rng.choice(sources)
                subtype = rng.choices(
                    ("IDENTITY", "TRANSFORMATION", "AGGREGATION", "MASKED"), (60, 25, 13, 2)
                )[0]
                refs.append(ref(src, rng.choice(src.fields)[0], "DIRECT", subtype))
            fields[column] = {"inputFields": refs}
        src = rng.choice(sources)
        indirect = [ref(src, src.fields[0][0], "INDIRECT", rng.choice(("JOIN", "FILTER", "GROUP_BY")))]
        return _facet("ColumnLineageDatasetFacet", "1-2-0", fields=fields, dataset=indirect)

    def _logical_plan(self) -> str:
        """A Spark logical plan facet of about 1.5 MB (what very large Spark events carry)."""
        if self._plan is None:
            nodes = [
                {
                    "class": "org.apache.spark.sql.catalyst.plans.logical.Project",
                    "num-children": 1,
                    "projectList": [
                        [{"class": "AttributeReference", "name": f"{WORDS[k % len(WORDS)]}_{k}"}]
                    ],
                    "child": k + 1,
                }
                for k in range(9_000)
            ]
            self._plan = json.dumps(
                _facet("SparkLogicalPlanFacet", "1-0-0", plan=nodes), separators=(",", ":")
            )
        return self._plan

    def serialize(self, spec: Spec) -> bytes:
        job = spec.job
        job_facets = {
            "jobType": _facet(
                "JobTypeJobFacet",
                "2-0-3",
                _producer=spec.producer,
                processingType=job.processing,
                integration=job.integration,
                jobType=job.job_type,
            )
        }
        if spec.job_facets:
            job_facets.update(spec.job_facets)
        run_facets: dict[str, Any] = {}
        if spec.parent is not None:
            parent: dict[str, Any] = {
                "run": {"runId": spec.parent.run_id},
                "job": {"namespace": spec.parent.namespace, "name": spec.parent.name},
            }
            if spec.root is not None:
                parent["root"] = {
                    "run": {"runId": spec.root.run_id},
                    "job": {"namespace": spec.root.namespace, "name": spec.root.name},
                }
            run_facets["parent"] = _facet("ParentRunFacet", "1-1-0", _producer=spec.producer, **parent)
        if spec.run_facets:
            run_facets.update(spec.run_facets)
        event = {
            "eventType": spec.event_type,
            "eventTime": _ts(spec.at),
            "producer": spec.producer,
            "schemaURL": SCHEMA_URL,
            "run": {"runId": spec.run_id, "facets": run_facets},
            "job": {"namespace": job.namespace, "name": job.name, "facets": job_facets},
        }
        if spec.oversized:
            run_facets["spark.logicalPlan"] = _PLAN_SLOT
        text = json.dumps(event, separators=(",", ":"))
        if spec.oversized:
            text = text.replace(json.dumps(_PLAN_SLOT), self._logical_plan(), 1)
        tail = []
        if spec.inputs and job.inputs:
            tail.append(',"inputs":' + self.inputs(job))
        if spec.outputs and job.outputs:
            rng = _rng("stats", spec.stats_seed)
            stats = []
            for part in self.outputs(job, spec.event_type != "START"):
                if spec.event_type == "COMPLETE":
                    rows = int(rng.lognormvariate(10, 2))
                    part += (
                        ',"outputFacets":{"outputStatistics":{"_producer":"'
                        + spec.producer
                        + '","_schemaURL":"'
                        f"{_FACET_SPEC}/1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/"
                        f'OutputStatisticsOutputDatasetFacet","rowCount":{rows},"size":{rows * 120},'
                        f'"fileCount":{1 + rows // 500_000}}}}}'
                    )
                stats.append(part + "}")
            tail.append(',"outputs":[' + ",".join(stats) + "]")
        if tail:
            text = text[:-1] + "".join(tail) + "}"
        return text.encode()


def message_key(spec: Spec) -> bytes:
    """openlineage-python's Kafka transport key: the root job (else the parent job, else the job)."""
    ref = spec.root or spec.parent
    if ref is not None:
        return f"run:{ref.namespace}/{ref.name}".encode()
    return f"run:{spec.job.namespace}/{spec.job.name}".encode()


# -- runs -------------------------------------------------------------------------------------------------

_ENGINE_AIRFLOW = {"name": "Airflow", "version": "2.10.5", "openlineageAdapterVersion": "2.2.0"}
_ENGINE_SPARK = {"name": "spark", "version": "3.5.4", "openlineageAdapterVersion": "1.33.0"}
_ENGINE_FLINK = {"name": "flink", "version": "1.20.1", "openlineageAdapterVersion": "1.33.0"}


def _engine(engine: dict[str, str], producer: str) -> dict[str, Any]:
    return _facet("ProcessingEngineRunFacet", "1-1-1", _producer=producer, **engine)


def _error(rng: random.Random, producer: str, where: str) -> dict[str, Any]:
    frames = "\n".join(
        f"  at org.example.{DOMAINS[k % len(DOMAINS)]}.Stage{k}.run(Stage{k}.java:{100 + k})"
        for k in range(rng.randint(10, 40))
    )
    return _facet(
        "ErrorMessageRunFacet",
        "1-0-1",
        _producer=producer,
        message=f"{where} failed: java.io.IOException: connection reset",
        programmingLanguage="JAVA",
        stackTrace=f"java.io.IOException: connection reset\n{frames}",
    )


class _RunPlanner:
    """Yields the events of one scheduled run of a unit, in event-time order."""

    def __init__(
        self, estate: Estate, oversized: list[bool], flink_timing: dict[int, tuple[float, float]]
    ) -> None:
        self.estate = estate
        self.shape = estate.shape
        self._oversized = oversized  # shared flag: the next Spark COMPLETE with outputs carries a plan
        self._flink_timing = flink_timing  # unit index -> (heartbeat interval, run window) in seconds

    def run(self, unit: Unit, number: int, start: datetime) -> Iterator[Spec]:
        rng = _rng("run", self.estate.seed, unit.index, number)
        if unit.kind == "dag":
            return self._dag(unit, number, start, rng)
        if unit.kind == "spark":
            assert unit.app is not None
            return self._app(unit.app, start, rng, None, None)[0]
        return self._flink(unit, number, start, rng)

    def _dag(self, unit: Unit, number: int, start: datetime, rng: random.Random) -> Iterator[Spec]:
        dag = unit.dag
        assert dag is not None
        run = RunRef(uuid7(start, rng), dag.namespace, dag.name)
        dag_id = dag.name
        run_type = "scheduled" if rng.random() < 0.9 else "manual"
        interval_end = start.replace(minute=0, second=0, microsecond=0)
        dag_run = {
            "run_id": f"{run_type}__{_ts(start)}",
            "run_type": run_type,
            "data_interval_start": _ts(interval_end - timedelta(days=1)),
            "data_interval_end": _ts(interval_end),
        }
        dag_info = {"dag_id": dag_id, "owner": f"team-{DOMAINS[unit.index % len(DOMAINS)]}", "tags": ["etl"]}
        dag_facets = {
            "airflowDagRun": _facet(
                "AirflowDagRunFacet", "1-0-0", _producer=PRODUCER_AIRFLOW, dag=dag_info, dagRun=dag_run
            ),
            "nominalTime": _facet(
                "NominalTimeRunFacet", "1-0-1", _producer=PRODUCER_AIRFLOW, nominalStartTime=_ts(interval_end)
            ),
            "processing_engine": _engine(_ENGINE_AIRFLOW, PRODUCER_AIRFLOW),
        }
        doc = {
            "documentation": _facet(
                "DocumentationJobFacet",
                _producer=PRODUCER_AIRFLOW,
                description=f"Loads the {dag_id} domain tables.",
            ),
            "ownership": _facet(
                "OwnershipJobFacet",
                _producer=PRODUCER_AIRFLOW,
                owners=[{"name": dag_info["owner"], "type": "team"}],
            ),
        }
        yield Spec(start, "START", dag, run.run_id, PRODUCER_AIRFLOW, run_facets=dag_facets, job_facets=doc)
        t = start + timedelta(seconds=rng.uniform(1, 10))
        failed = False
        for task in unit.tasks:
            job = task.job
            task_run = RunRef(uuid7(t, rng), job.namespace, job.name)
            airflow = _facet(
                "AirflowRunFacet",
                "1-0-0",
                _producer=PRODUCER_AIRFLOW,
                dag=dag_info,
                dagRun=dag_run,
                task={"task_id": job.name.rsplit(".", 1)[1], "operator_class": job.operator},
                taskInstance={"try_number": 1, "map_index": -1},
            )
            facets = {"airflow": airflow, "processing_engine": _engine(_ENGINE_AIRFLOW, PRODUCER_AIRFLOW)}
            yield Spec(t, "START", job, task_run.run_id, PRODUCER_AIRFLOW, run, run, facets)
            end = t + timedelta(seconds=rng.lognormvariate(math.log(30), 1.0))
            ok = True
            if task.app is not None:
                events, end, ok = self._app(task.app, t + timedelta(seconds=3), rng, task_run, run)
                yield from events
                end += timedelta(seconds=2)
            if ok and rng.random() < self.shape.task_fail_rate:
                ok = False
            final = {"airflow": airflow} if ok else {"errorMessage": _error(rng, PRODUCER_AIRFLOW, job.name)}
            io = task.kind == "sql"
            yield Spec(
                end,
                "COMPLETE" if ok else "FAIL",
                job,
                task_run.run_id,
                PRODUCER_AIRFLOW,
                run,
                run,
                final,
                inputs=io,
                outputs=io,
                stats_seed=rng.getrandbits(32),
            )
            t = end + timedelta(seconds=rng.uniform(1, 20))
            if not ok:
                failed = True
                break
        final = {k: dag_facets[k] for k in ("airflowDagRun", "processing_engine")}
        yield Spec(t, "FAIL" if failed else "COMPLETE", dag, run.run_id, PRODUCER_AIRFLOW, run_facets=final)

    def _app(
        self,
        app: SparkApp,
        start: datetime,
        rng: random.Random,
        parent: RunRef | None,
        root: RunRef | None,
    ) -> tuple[Iterator[Spec], datetime, bool]:
        """Events of one Spark application run (materialised: it is short), its end and success."""
        job = app.job
        run = RunRef(uuid7(start, rng), job.namespace, job.name)
        root = root or parent or run
        app_id = f"application_{int(start.timestamp())}_{rng.randrange(10_000):04d}"
        details = _facet(
            "SparkApplicationDetailsFacet",
            "1-0-0",
            master="yarn",
            appName=job.name,
            applicationId=app_id,
            deployMode="cluster",
            driverHost=f"10.0.{rng.randrange(256)}.{rng.randrange(256)}",
            userName=f"svc_{DOMAINS[job.index % len(DOMAINS)]}",
        )
        facets = {
            "spark_applicationDetails": details,
            "processing_engine": _engine(_ENGINE_SPARK, PRODUCER_SPARK),
        }
        out = [
            Spec(start, "START", job, run.run_id, PRODUCER_SPARK, parent, root if parent else None, facets)
        ]
        t = start + timedelta(seconds=rng.uniform(5, 20))
        ok, vanished = True, False
        for action in app.actions:
            action_run = uuid7(t, rng)
            details_facet = {
                "spark_jobDetails": _facet("SparkJobDetailsFacet", "1-0-0", jobId=action.position)
            }
            out.append(
                Spec(
                    t,
                    "START",
                    action,
                    action_run,
                    PRODUCER_SPARK,
                    run,
                    root,
                    details_facet,
                    inputs=True,
                    outputs=True,
                )
            )
            end = t + timedelta(seconds=rng.lognormvariate(math.log(20), 1.0))
            if rng.random() < 0.3:
                mid = t + (end - t) / 2
                out.append(Spec(mid, "RUNNING", action, action_run, PRODUCER_SPARK, run, root))
            if rng.random() < self.shape.vanish_rate:
                vanished = True  # the driver died: nothing more from this application
                break
            action_ok = rng.random() >= self.shape.spark_fail_rate
            final: dict[str, Any] = (
                {} if action_ok else {"errorMessage": _error(rng, PRODUCER_SPARK, action.name)}
            )
            oversized = False
            if action_ok and action.outputs and self._oversized[0]:
                oversized, self._oversized[0] = True, False
            out.append(
                Spec(
                    end,
                    "COMPLETE" if action_ok else "FAIL",
                    action,
                    action_run,
                    PRODUCER_SPARK,
                    run,
                    root,
                    final,
                    inputs=True,
                    outputs=True,
                    stats_seed=rng.getrandbits(32),
                    oversized=oversized,
                )
            )
            t = end + timedelta(seconds=rng.uniform(0.5, 5))
            if not action_ok:
                ok = False
                break
        if not vanished:
            final_type = "COMPLETE" if ok else "FAIL"
            out.append(Spec(t, final_type, job, run.run_id, PRODUCER_SPARK, parent, root if parent else None))
        return iter(out), t, ok and not vanished

    def _flink(self, unit: Unit, number: int, start: datetime, rng: random.Random) -> Iterator[Spec]:
        job = unit.flink
        assert job is not None
        run = uuid7(start, rng)
        engine = {
            "processing_engine": _engine(_ENGINE_FLINK, PRODUCER_FLINK),
            "flink_job": _facet(
                "FlinkJobDetailsRunFacet", "1-0-0", _producer=PRODUCER_FLINK, jobId=uuid7(start, rng)
            ),
        }
        yield Spec(start, "START", job, run, PRODUCER_FLINK, run_facets=engine, inputs=True, outputs=True)
        interval, window = self._flink_timing[unit.index]
        beats = int(rng.uniform(0.5, 1.0) * window / interval)
        t = start
        for _ in range(beats):
            t += timedelta(seconds=interval * rng.uniform(0.98, 1.02))
            yield Spec(t, "RUNNING", job, run, PRODUCER_FLINK, run_facets=engine)
        if rng.random() >= self.shape.flink_silent_share:
            end_type = "ABORT" if rng.random() < 0.7 else "FAIL"
            facets = dict(engine)
            if end_type == "FAIL":
                facets["errorMessage"] = _error(rng, PRODUCER_FLINK, job.name)
            yield Spec(t + timedelta(seconds=5), end_type, job, run, PRODUCER_FLINK, run_facets=facets)


# -- the stream -------------------------------------------------------------------------------------------


class Workload:
    """The message stream of a tier, partitioned into ``base`` and ``delta1`` ... ``delta5``."""

    def __init__(self, tier: Tier, seed: int = 42, shape: Shape | None = None) -> None:
        self.tier = tier
        self.seed = seed
        self.estate = build_estate(tier, seed, shape)
        self.shape = self.estate.shape
        self.span = timedelta(days=tier.days)
        self.base_end = BASE_TIME + self.span
        self.end = BASE_TIME + self.span * WINDOW
        self._flink_timing: dict[int, tuple[float, float]] = {}

    def _events_per_run(self, unit: Unit) -> float:
        """Mean event count of a unit's first runs (planned, not serialised): failures end runs early."""
        planner = _RunPlanner(self.estate, [False], {})
        return sum(sum(1 for _ in planner.run(unit, r, BASE_TIME)) for r in range(3)) / 3

    def _schedule(self) -> list[tuple[datetime, int, int]]:
        """(start, unit index, run number) of every run, in start order."""
        rng = _rng("schedule", self.seed, self.tier.name)
        shape = self.shape
        # Every message of the whole window (base + delta): events plus the noise added on top.
        noise = 1 + shape.duplicate_rate + shape.malformed_rate
        total_events = self.tier.events * WINDOW / noise
        batch_units = [u for u in self.estate.units if u.kind != "flink"]
        flink_units = [u for u in self.estate.units if u.kind == "flink"]
        window = self.span.total_seconds() * WINDOW
        flink_budget = total_events * shape.flink_event_share if flink_units else 0.0
        batch_budget = total_events - flink_budget
        per_cycle = sum(u.weight * self._events_per_run(u) for u in batch_units) or 1.0
        scale = batch_budget / per_cycle
        starts: list[tuple[datetime, int, int]] = []
        for unit in batch_units:
            runs = max(1, round(unit.weight * scale))
            period = window / runs
            offset = rng.uniform(0, period)
            for r in range(runs):
                at = offset + r * period + rng.uniform(-0.05, 0.05) * period
                starts.append((BASE_TIME + timedelta(seconds=min(max(at, 0.0), window - 1)), unit.index, r))
        if flink_units:
            runs_per_job = 2
            beats_per_job = flink_budget / len(flink_units)
            for unit in flink_units:
                # Heartbeat interval: the job's share of the Flink budget over the window (a run sends for
                # 50-100% of its half of the window, hence 0.75), at least 30 s.
                interval = max(30.0, 0.75 * window / max(beats_per_job, 1.0) * rng.uniform(0.6, 1.4))
                self._flink_timing[unit.index] = (interval, window / runs_per_job)
                for r in range(runs_per_job):
                    at = r * window / runs_per_job + rng.uniform(0, 600)
                    starts.append((BASE_TIME + timedelta(seconds=at), unit.index, r))
        starts.sort()
        return starts

    def _events(self) -> Iterator[Spec]:
        """Every event of the window in event-time order."""
        oversized_flag = [False]
        schedule = self._schedule()
        planner = _RunPlanner(self.estate, oversized_flag, self._flink_timing)
        big = _rng("oversized", self.seed)
        return self._merge(schedule, planner, big, oversized_flag, self.end)

    def _merge(
        self,
        schedule: Iterable[tuple[datetime, int, int]],
        planner: _RunPlanner,
        big: random.Random,
        flag: list[bool],
        end: datetime | None,
    ) -> Iterator[Spec]:
        """The events of the scheduled runs (start order) in event-time order, those before ``end``."""
        units = self.estate.units
        heap: list[tuple[datetime, int, Spec, Iterator[Spec]]] = []
        counter = 0
        for start, unit_index, number in schedule:
            while heap and heap[0][0] <= start:
                yield from self._pop(heap, big, flag, end)
            run = planner.run(units[unit_index], number, start)
            first = next(run, None)
            if first is not None:
                counter += 1
                heapq.heappush(heap, (first.at, counter, first, run))
        while heap:
            yield from self._pop(heap, big, flag, end)

    def _pop(
        self,
        heap: list[tuple[datetime, int, Spec, Iterator[Spec]]],
        big: random.Random,
        flag: list[bool],
        end: datetime | None,
    ) -> Iterator[Spec]:
        _at, seq, spec, run = heapq.heappop(heap)
        if big.random() < self.shape.oversized_rate:
            flag[0] = True
        nxt = next(run, None)
        if nxt is not None:
            heapq.heappush(heap, (nxt.at, seq, nxt, run))
        if end is None or spec.at < end:
            yield spec

    def part_of(self, at: datetime) -> int:
        """0 for the base part, k for ``delta<k>``."""
        if at < self.base_end:
            return 0
        return min(DELTA_PARTS, 1 + int((at - self.base_end) / (self.span * DELTA_SHARE)))

    def stream(self) -> Iterator[tuple[Message, int]]:
        """Every message of the window in delivery order with its part (0 base, k delta<k>). A message
        belongs to the part being delivered when it goes out (a late or duplicate one can cross over)."""
        part = 0
        for message, latest in self._deliver(self._events(), _rng("noise", self.seed, self.tier.name)):
            part = max(part, self.part_of(latest.at))
            yield message, part

    def _deliver(self, specs: Iterable[Spec], rng: random.Random) -> Iterator[tuple[Message, Spec]]:
        """The messages of ``specs`` in delivery order, with the noise (late, duplicate, malformed); each
        with the latest spec generated when it goes out."""
        shape = self.shape
        serializer = _Serializer(self.estate)
        delayed: list[tuple[int, int, Message]] = []  # (deliver after message n, tiebreak, message)
        delivered = 0
        tiebreak = 0
        spec: Spec | None = None
        for spec in specs:
            value = serializer.serialize(spec)
            msg = Message(message_key(spec), value, "event")
            batch: list[Message] = []
            roll = rng.random()
            if roll < shape.late_rate:
                tiebreak += 1
                heapq.heappush(delayed, (delivered + rng.randint(1, 300), tiebreak, msg))
            else:
                batch.append(msg)
                if roll < shape.late_rate + shape.duplicate_rate:
                    tiebreak += 1
                    dup = Message(msg.key, msg.value, "duplicate")
                    heapq.heappush(delayed, (delivered + rng.randint(1, 1_000), tiebreak, dup))
            if rng.random() < shape.malformed_rate:
                batch.append(malformed(spec, rng))
            for item in batch:
                delivered += 1
                yield item, spec
                while delayed and delayed[0][0] <= delivered:
                    delivered += 1
                    yield heapq.heappop(delayed)[2], spec
        while delayed and spec is not None:
            yield heapq.heappop(delayed)[2], spec

    def history(self, count: int = HISTORY_EVENTS) -> Iterator[Message]:
        """The fixed-size delta after the window: exactly ``count`` messages (events, duplicates, malformed
        ones at the tiers' rates), new runs of the tier's own units.

        Runs start about every :data:`HISTORY_START_EVERY_S` seconds from the end of ``delta5``; whether a
        run is a batch (Airflow DAG, Spark application) or a Flink run, and when it starts, is drawn from a
        generator seeded with the seed only, the same on every tier. The unit is then picked among the
        tier's batch units (by schedule weight) or Flink units, so the events themselves differ between
        tiers. The last runs are cut where the count is reached (still running, as at any moment); a late
        or duplicate message still held back then is not part of this delta.
        """
        flag = [False]
        timing = {u.index: HISTORY_FLINK_TIMING for u in self.estate.units if u.kind == "flink"}
        planner = _RunPlanner(self.estate, flag, timing)
        big = _rng("history-oversized", self.seed)
        specs = self._merge(self._history_schedule(), planner, big, flag, None)
        delivered = self._deliver(specs, _rng("history-noise", self.seed))
        for message, _latest in itertools.islice(delivered, count):
            yield message

    def tagged_source(self, after: datetime | None = None) -> tuple[Message, dict[str, Any]]:
        """One event at ``after`` (default: :data:`TAGGED_AFTER` past the window's end: after the history
        delta, before the benchmarks' reference time): a new, completed run of the first job (in estate
        order) whose column lineage copies a column of a source dataset (a DIRECT IDENTITY edge), its input
        carrying a tags facet that names that column ``pii=true``. What a build then does is seed one
        tagged column and carry the tag downstream. Returns the message and what it tags (dataset, field,
        tag, job, run).
        """
        serializer = _Serializer(self.estate)
        datasets = self.estate.datasets
        for job in self.estate.jobs:
            if not job.inputs:
                continue
            named = set()  # the names of its source inputs, as its column lineage names them
            for i, alias in zip(job.inputs, job.alias_inputs, strict=True):
                d = datasets[i]
                if d.source and not alias:  # an aliased input is named otherwise in the event
                    named.add(d.catalog if job.reporter == "catalog" and d.catalog else (d.namespace, d.name))
            for position, (index, lineage) in enumerate(zip(job.outputs, job.lineage_outputs, strict=True)):
                if not (lineage and named):
                    continue
                facet = serializer._column_lineage(job, datasets[index], position)
                for spec_field in facet["fields"].values():
                    for ref in spec_field["inputFields"]:
                        kind = ref["transformations"][0]
                        copies = (kind["type"], kind["subtype"]) == ("DIRECT", "IDENTITY")
                        if not copies or (ref["namespace"], ref["name"]) not in named:
                            continue
                        return self._tagged_event(serializer, job, ref, after or self.end + TAGGED_AFTER)
        raise ValueError("no job of this estate copies a source column (no DIRECT IDENTITY edge from one)")

    def _tagged_event(
        self, serializer: _Serializer, job: Job, ref: dict[str, Any], at: datetime
    ) -> tuple[Message, dict[str, Any]]:
        spec = Spec(
            at=at,
            event_type="COMPLETE",
            job=job,
            run_id=uuid7(at, _rng("tagged", self.seed)),
            producer={"flink": PRODUCER_FLINK, "dag": PRODUCER_AIRFLOW, "task": PRODUCER_AIRFLOW}.get(
                job.kind, PRODUCER_SPARK
            ),
            inputs=True,
            outputs=True,
            stats_seed=self.seed,
        )
        event = json.loads(serializer.serialize(spec))
        tag = {"key": "pii", "value": "true", "source": "benchmark", "field": ref["field"]}
        for node in event["inputs"]:
            if (node["namespace"], node["name"]) == (ref["namespace"], ref["name"]):
                node["facets"]["tags"] = _facet(
                    "TagsDatasetFacet", "1-0-0", _producer=spec.producer, tags=[tag]
                )
        value = json.dumps(event, separators=(",", ":")).encode()
        about = {
            "dataset": f"{ref['namespace']}/{ref['name']}",
            "field": ref["field"],
            "tag": "pii",
            "job": f"{job.namespace}/{job.name}",
            "run_id": spec.run_id,
            "event_time": _ts(at),
        }
        return Message(message_key(spec), value, "event"), about

    def _history_schedule(self) -> Iterator[tuple[datetime, int, int]]:
        """(start, unit index, run number) of the history delta's runs, without end. Three draws per run
        from a generator seeded without the tier: the same start times and kinds on every tier."""
        rng = _rng("history", self.seed)
        batch = [u for u in self.estate.units if u.kind != "flink"]
        flink = [u for u in self.estate.units if u.kind == "flink"]
        if not batch and not flink:
            raise ValueError("the estate has no units")
        weights = list(itertools.accumulate(u.weight for u in batch))
        at = self.end
        for k in itertools.count():
            at += timedelta(seconds=rng.expovariate(1 / HISTORY_START_EVERY_S))
            kind, pick = rng.random(), rng.random()
            if flink and (kind < HISTORY_FLINK_RUN_SHARE or not batch):
                unit = flink[min(int(pick * len(flink)), len(flink) - 1)]
            else:
                unit = batch[min(bisect.bisect_right(weights, pick * weights[-1]), len(batch) - 1)]
            yield at, unit.index, HISTORY_RUN_NUMBERS + k

    def messages(self, part: str = "base") -> Iterator[Message]:
        """The messages of one part: ``base`` (the tier), ``delta1`` ... ``delta5``, ``all`` (these three
        together) or ``history`` (the fixed-size delta after them)."""
        if part == "history":
            yield from self.history()
            return
        wanted = part_index(part)
        for message, index in self.stream():
            if wanted is None or index == wanted:
                yield message
            elif index > wanted:
                return


def part_index(part: str) -> int | None:
    """``base`` -> 0, ``delta<k>`` -> k, ``all`` -> None."""
    if part == "all":
        return None
    if part == "base":
        return 0
    if part.startswith("delta") and part[5:].isdigit() and 1 <= int(part[5:]) <= DELTA_PARTS:
        return int(part[5:])
    raise ValueError(f"part must be base, delta1 .. delta{DELTA_PARTS} or all, got {part!r}")


def malformed(spec: Spec, rng: random.Random) -> Message:
    """A broken message next to ``spec``: one of every envelope rejection reason, with that reason."""
    envelope: dict[str, Any] = {
        "eventType": spec.event_type,
        "eventTime": _ts(spec.at),
        "producer": spec.producer,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": spec.run_id},
        "job": {"namespace": spec.job.namespace, "name": spec.job.name},
    }
    key = message_key(spec)
    kind = rng.randrange(MALFORMED_KINDS)
    if kind == 0:
        return Message(key, rng.choice((None, b"", b"  \n")), "malformed", "EMPTY_VALUE")
    if kind == 1:
        return Message(key, b"\xff\xfe" + json.dumps(envelope).encode(), "malformed", "NOT_UTF8")
    if kind == 2:
        text = json.dumps(envelope).encode()
        return Message(key, text[: len(text) // 2], "malformed", "NOT_JSON")
    if kind == 3:
        return Message(key, json.dumps([envelope]).encode(), "malformed", "NOT_JSON_OBJECT")
    if kind == 4:
        del envelope[rng.choice(("eventTime", "producer", "schemaURL"))]
        return Message(key, json.dumps(envelope).encode(), "malformed", "MISSING_FIELD")
    if kind == 5:
        envelope["eventTime"] = int(spec.at.timestamp())
        return Message(key, json.dumps(envelope).encode(), "malformed", "INVALID_FIELD_TYPE")
    if kind == 6:
        del envelope["eventType"], envelope["run"], envelope["job"]  # no marker of any kind left
        return Message(key, json.dumps(envelope).encode(), "malformed", "UNKNOWN_EVENT_KIND")
    if kind == 7:
        envelope["eventTime"] = spec.at.strftime("%d/%m/%Y %H:%M")
        return Message(key, json.dumps(envelope).encode(), "malformed", "INVALID_EVENT_TIME")
    if kind == 8:
        envelope["eventType"] = "STARTED"
        return Message(key, json.dumps(envelope).encode(), "malformed", "UNKNOWN_EVENT_TYPE")
    if kind == 9:
        envelope["run"]["runId"] = f"run-{rng.randrange(10**6)}"
        return Message(key, json.dumps(envelope).encode(), "malformed", "INVALID_RUN_ID")
    if kind == 10:
        envelope["eventTime"] = "1969-12-31T23:59:59Z"  # a real instant, before the accepted range
        return Message(key, json.dumps(envelope).encode(), "malformed", "EVENT_TIME_OUT_OF_RANGE")
    if kind == 11:
        one = json.dumps(envelope).encode()  # two events in one message, one a line (JSON Lines)
        return Message(key, one + b"\n" + one + b"\n", "malformed", "TRAILING_DATA")
    if kind == 12:
        text = json.dumps(envelope).encode()  # a number beyond the parser's 1,000 digits
        return Message(
            key, text[:-1] + b', "size": ' + b"9" * 1001 + b"}", "malformed", "JSON_LIMIT_EXCEEDED"
        )
    envelope["eventTime"] = "9999-12-31T23:59:59Z"  # far beyond ingest.max_future_seconds
    return Message(key, json.dumps(envelope).encode(), "malformed", "EVENT_TIME_IN_FUTURE")


MALFORMED_KINDS = 14  # one per rejection reason (lineage.events.rules.REASONS)


# -- spool files ----------------------------------------------------------------------------------------

_NONE = 0xFFFFFFFF


def append_spool(out: BinaryIO, message: Message) -> None:
    """Append one message to an open spool file (length-prefixed key and value; kind and reason are
    not kept)."""
    for part in (message.key, message.value):
        out.write(struct.pack(">I", _NONE if part is None else len(part)))
        if part:
            out.write(part)


def write_spool(path: Path, messages: Iterable[Message]) -> int:
    """Store messages in a spool file; returns how many."""
    count = 0
    with path.open("wb") as out:
        for message in messages:
            append_spool(out, message)
            count += 1
    return count


def read_spool(path: Path) -> Iterator[Message]:
    """The messages :func:`write_spool` stored, in order (kind ``event``)."""

    def read_part(data: BinaryIO) -> bytes | None:
        head = data.read(4)
        if len(head) < 4:
            raise EOFError
        (size,) = struct.unpack(">I", head)
        return None if size == _NONE else data.read(size)

    with path.open("rb") as data:
        while True:
            try:
                key = read_part(data)
            except EOFError:
                return
            yield Message(key, read_part(data), "event")


# -- loading into Kafka -----------------------------------------------------------------------------------


def produce(
    bootstrap_servers: str,
    topic: str,
    messages: Iterator[Message],
    max_message_bytes: int,
    *,
    progress_every: int = 0,
) -> dict[str, int]:
    """Send messages with confluent-kafka in large batches (idempotent, acks=all, zstd); returns counts."""
    from confluent_kafka import Producer

    from lineage.io.publish import producer_config

    config = producer_config(bootstrap_servers, max_message_bytes)
    config.update(
        {
            "linger.ms": "100",
            "batch.size": str(4 * 1024 * 1024),
            "queue.buffering.max.kbytes": "1048576",
            # A keyed message goes where the default (consistent_random) puts it, by the CRC32 of its key;
            # a message without a key to one fixed partition instead of a random one, so that producing a
            # part again gives every partition the same offsets (a seed lake's checkpoint then matches).
            "partitioner": "consistent",
        }
    )
    producer = Producer(config)
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    counts = {"messages": 0, "bytes": 0, "events": 0, "duplicates": 0, "malformed": 0, "over_1mb": 0}
    sizes: list[int] = []
    for message in messages:
        while True:
            try:
                producer.produce(topic, key=message.key, value=message.value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        counts["messages"] += 1
        size = len(message.value or b"")
        sizes.append(size)
        counts["bytes"] += size
        counts["over_1mb"] += size > 1024 * 1024
        counts[{"event": "events", "duplicate": "duplicates", "malformed": "malformed"}[message.kind]] += 1
        if counts["messages"] % 1000 == 0:
            producer.poll(0)
            if errors:
                break
        if progress_every and counts["messages"] % progress_every == 0:
            print(f"  produced {counts['messages']:,} messages", file=sys.stderr, flush=True)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"{remaining} messages unsent, delivery errors: {errors[:3]}")
    sizes.sort()
    if sizes:
        counts.update(
            size_p50=sizes[len(sizes) // 2],
            size_p99=sizes[min(len(sizes) - 1, int(len(sizes) * 0.99))],
            size_max=sizes[-1],
            size_mean=round(counts["bytes"] / len(sizes)),
        )
    return counts


def describe(tier: Tier, seed: int = 42, part: str = "base") -> dict[str, Any]:
    """Counts of a tier's messages (sizes, noise) and of its estate, without Kafka."""
    workload = Workload(tier, seed)
    sizes: list[int] = []
    counts = {"events": 0, "duplicates": 0, "malformed": 0}
    for message in workload.messages(part):
        counts[{"event": "events", "duplicate": "duplicates", "malformed": "malformed"}[message.kind]] += 1
        sizes.append(len(message.value or b""))
    sizes.sort()
    estate = workload.estate
    io_jobs = [j for j in estate.jobs if j.inputs or j.outputs]
    readers = [j for j in estate.jobs if j.inputs]
    hubs = {d.index for d in estate.datasets if d.hub}
    return {
        "tier": tier.name,
        "seed": seed,
        "part": part,
        "messages": len(sizes),
        **counts,
        "bytes": sum(sizes),
        "size_p50": sizes[len(sizes) // 2] if sizes else 0,
        "size_p99": sizes[int(len(sizes) * 0.99)] if sizes else 0,
        "size_mean": sum(sizes) / len(sizes) if sizes else 0,
        "over_1mb": sum(s > 1024 * 1024 for s in sizes),
        "jobs": len(estate.jobs),
        "jobs_without_datasets": len(estate.jobs) - len(io_jobs),
        "datasets": len(estate.datasets),
        "fan_in_mean": sum(len(j.inputs) for j in readers) / max(len(readers), 1),
        "hub_reader_share": sum(any(i in hubs for i in j.inputs) for j in readers) / max(len(readers), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.workload",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tier", choices=sorted(TIERS), default="S")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--part", default="base", help="base, delta1 .. delta5, all or history")
    parser.add_argument("--stats", action="store_true", help="print the shape of the tier (default)")
    args = parser.parse_args(argv)
    print(json.dumps(describe(TIERS[args.tier], args.seed, args.part), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
