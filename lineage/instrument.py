"""Our jobs as OpenLineage producers: what the ingestion and the build report about themselves.

``observed_ingest`` / ``observed_build`` / ``observed_maintenance`` wrap
:func:`lineage.ingest.stream.run_ingest`, :func:`lineage.batch.build.build_lineage` and
:func:`lineage.batch.maintain.maintain_lake` with START, RUNNING (ingestion, every
``running_interval_seconds``, with progress), COMPLETE or FAIL events. Inputs and outputs are named the way
OpenLineage names Iceberg tables (table location, plus the catalog table as a symlink), with schemas,
output statistics and the column lineage declared below.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime

from openlineage.client.event_v2 import OutputDataset, RunState
from pyspark.sql import SparkSession

from lineage.batch.build import (
    BUILD_TABLES,
    STATE_TABLE,
    BuildResult,
    build_lineage,
)
from lineage.batch.maintain import MaintainResult, maintain_lake
from lineage.ingest.stream import IngestProgress, run_ingest
from lineage.io.tables import create_raw_tables
from lineage.observe import (
    ColumnMap,
    ProgressRunFacet,
    TableInfo,
    TrackedRun,
    describe_tables,
    every,
    input_dataset,
    kafka_name,
    kafka_topic,
    output_dataset,
    tracked_run,
)
from lineage.settings import Settings
from lineage.stopping import StopRequest

DIRECT, INDIRECT = "DIRECT", "INDIRECT"
IDENTITY, TRANSFORMATION, AGGREGATION = "IDENTITY", "TRANSFORMATION", "AGGREGATION"


def _columns(
    source: str,
    *,
    identity: Iterable[str] = (),
    derived: Mapping[str, str] | None = None,
    aggregated: Mapping[str, str] | None = None,
) -> ColumnMap:
    """Column lineage from one source: same-named copies, per-row derivations and aggregations."""
    out: dict[str, tuple[list[tuple[str, str]], str, str]] = {
        name: ([(source, name)], DIRECT, IDENTITY) for name in identity
    }
    for target, field in (derived or {}).items():
        out[target] = ([(source, field)], DIRECT, TRANSFORMATION)
    for target, field in (aggregated or {}).items():
        out[target] = ([(source, field)], DIRECT, AGGREGATION)
    return out


_ENVELOPE = (
    *("event_kind", "event_type", "event_time", "run_id", "job_namespace", "job_name"),
    *("dataset_namespace", "dataset_name", "parent_run_id", "parent_job_namespace", "parent_job_name"),
    *("root_run_id", "root_job_namespace", "root_job_name", "producer", "schema_url"),
)
_KAFKA_COORDINATES = {
    "kafka_partition": "partition",
    "kafka_offset": "offset",
    "kafka_timestamp": "timestamp",
}

INGEST_COLUMNS: dict[str, ColumnMap] = {
    "events": {
        **_columns("topic", derived={name: "value" for name in _ENVELOPE}),
        **_columns("topic", derived={"payload_bytes": "value", "kafka_key": "key"}),
        **_columns("topic", derived=_KAFKA_COORDINATES),
        "event_json": ([("topic", "value")], DIRECT, IDENTITY),
    },
    "rejected": {
        **_columns("topic", derived={"payload_bytes": "value", "reason": "value", "detail": "value"}),
        **_columns("topic", derived=_KAFKA_COORDINATES),
        "value": ([("topic", "value")], DIRECT, IDENTITY),
        "kafka_key": ([("topic", "key")], DIRECT, IDENTITY),
    },
}

_JOB = ("job_namespace", "job_name")
_FROM_JSON = "event_json"
BUILD_COLUMNS: dict[str, ColumnMap] = {
    "event_facts": _columns(
        "events",
        identity=("event_kind", "event_type", "event_time", "run_id", *_JOB, "parent_run_id", "producer"),
        derived={f: _FROM_JSON for f in ("event_hash", "job_type", "run_error", "run_processing_engine")},
    ),
    "dataset_mentions": _columns(
        "events",
        identity=("event_kind", "event_type", "event_time", "run_id", *_JOB),
        derived={
            f: _FROM_JSON
            for f in (
                *("namespace", "name", "raw_namespace", "raw_name", "schema_fields"),
                *("tags", "field_tags", "assertions", "tests", "metrics", "dataset_version"),
            )
        },
    ),
    "jobs": _columns(
        "events",
        identity=_JOB,
        derived={f: _FROM_JSON for f in ("integration", "job_type", "processing_type", "description")},
        aggregated={f: "event_time" for f in ("first_seen", "last_seen", "median_gap_seconds")},
    ),
    "runs": _columns(
        "events",
        identity=("run_id", *_JOB, "parent_run_id", "parent_job_namespace", "parent_job_name", "root_run_id"),
        derived={
            f: _FROM_JSON for f in ("error_message", "processing_engine_name", "processing_engine_version")
        },
        aggregated={
            "reported_state": "event_type",
            "started_at": "event_time",
            "ended_at": "event_time",
            "last_event_at": "event_time",
            "event_count": "event_json",
        },
    ),
    "datasets": _columns(
        "events",
        derived={f: _FROM_JSON for f in ("namespace", "name", "schema_fields", "tags", "field_tags")},
        aggregated={"first_seen": "event_time", "last_seen": "event_time"},
    ),
    "run_io": _columns(
        "events",
        identity=("run_id", *_JOB),
        derived={f: _FROM_JSON for f in ("dataset_id", "dataset_version", "schema_hash")},
    ),
    "quality_results": _columns(
        "events",
        identity=("run_id", *_JOB),
        derived={
            f: _FROM_JSON
            for f in ("dataset_id", "column_name", "assertion", "success", "facet", "status", "problem")
        },
        aggregated={"checked_at": "event_time"},
    ),
    "quality_metrics": _columns(
        "events",
        identity=("run_id", *_JOB),
        derived={
            f: _FROM_JSON
            for f in (
                *("dataset_id", "column_name", "row_count", "bytes", "file_count", "null_count"),
                *("distinct_count", "sum", "count", "min", "max", "quantiles", "problem"),
            )
        },
        aggregated={"measured_at": "event_time"},
    ),
    "job_edges": _columns(
        "events", identity=_JOB, derived={"dataset_id": _FROM_JSON}, aggregated={"run_count": "run_id"}
    ),
    "dataset_edges": _columns(
        "events", identity=_JOB, derived={"source_dataset_id": _FROM_JSON, "target_dataset_id": _FROM_JSON}
    ),
    "column_edges": _columns(
        "events",
        identity=_JOB,
        derived={
            f: _FROM_JSON for f in ("source_dataset_id", "source_field", "target_dataset_id", "target_field")
        },
    ),
}


def _spark_job_run(
    spark: SparkSession, settings: Settings, job: str, processing_type: str, description: str
) -> AbstractContextManager[TrackedRun]:
    """The tracked run of one of our Spark jobs (its engine: this session's Spark)."""
    return tracked_run(
        settings.own_lineage(),
        job,
        processing_type=processing_type,
        description=description,
        engine=("spark", spark.version),
    )


def observed_ingest(
    spark: SparkSession,
    settings: Settings,
    *,
    trigger: str | None = None,
    starting_offsets: str | None = None,
) -> IngestProgress:
    """:func:`run_ingest`, reported as a STREAMING run of job ``ingest_events``."""
    catalog = settings.catalog
    kafka = settings.kafka
    with _spark_job_run(
        spark,
        settings,
        "ingest_events",
        "STREAMING",
        f"Kafka topic {kafka.topic} -> {catalog.events_table} / {catalog.rejected_table}",
    ) as run:
        source = kafka_topic(kafka.bootstrap_servers, kafka.topic)
        sources = {"topic": kafka_name(kafka.bootstrap_servers, kafka.topic)}
        run.emit(RunState.START, [source])
        create_raw_tables(spark, catalog, settings.ingest.target_file_size_bytes)
        raw_tables = [(catalog.raw_namespace, "events"), (catalog.raw_namespace, "rejected")]
        tables = {_table(info): info for info in describe_tables(catalog, raw_tables)}
        progress = IngestProgress()

        def outputs() -> list[OutputDataset]:
            rows = {"events": progress.landed, "rejected": progress.rejected}
            return [
                output_dataset(info, rows=rows[key], column_map=INGEST_COLUMNS[key], sources=sources)
                for key, info in tables.items()
            ]

        def report(state: RunState) -> None:
            run.progress = _progress_facet(progress)
            run.emit(state, [source], outputs())

        with every(settings.openlineage.running_interval_seconds, lambda: report(RunState.RUNNING)):
            run_ingest(spark, settings, trigger=trigger, starting_offsets=starting_offsets, progress=progress)
        report(RunState.COMPLETE)
        return progress


def observed_build(
    spark: SparkSession,
    settings: Settings,
    *,
    full_refresh: bool = False,
    re_extract: bool = False,
    now: datetime | None = None,
    stop: StopRequest | None = None,
) -> BuildResult:
    """:func:`build_lineage`, reported as a BATCH run of job ``build_lineage``."""
    catalog = settings.catalog
    with _spark_job_run(
        spark,
        settings,
        "build_lineage",
        "BATCH",
        f"{catalog.events_table} -> {catalog.name}.{catalog.lineage_namespace}.*",
    ) as run:
        raw = describe_tables(catalog, [(catalog.raw_namespace, "events")])
        inputs = [input_dataset(info) for info in raw]
        run.emit(RunState.START, inputs)
        result = build_lineage(
            spark, settings, full_refresh=full_refresh, re_extract=re_extract, now=now, stop=stop
        )
        outputs: list[OutputDataset] = []
        if result.mode != "noop":
            sources = {"events": (raw[0].namespace, raw[0].name)} if raw else {}
            tables = (*BUILD_TABLES, STATE_TABLE)
            names = [(catalog.lineage_namespace, t) for t in tables]
            outputs = [
                output_dataset(info, column_map=BUILD_COLUMNS.get(_table(info)), sources=sources)
                for info in describe_tables(catalog, names)
            ]
        run.emit(RunState.COMPLETE, inputs, outputs)
        return result


def observed_maintenance(
    spark: SparkSession,
    settings: Settings,
    *,
    now: datetime | None = None,
    stop: StopRequest | None = None,
) -> MaintainResult:
    """:func:`maintain_lake`, reported as a BATCH run of job ``maintain_lake`` (the tables it rewrote are its
    outputs, with their sizes after the run)."""
    catalog = settings.catalog
    with _spark_job_run(
        spark,
        settings,
        "maintain_lake",
        "BATCH",
        f"retention, compaction and snapshot expiry of {catalog.name}.*",
    ) as run:
        run.emit(RunState.START)
        result = maintain_lake(spark, settings, now=now, stop=stop)
        changed: list[tuple[str, str]] = []
        for t in result.tables:
            if t.retired_rows or t.rewritten_files or t.expired_files or t.orphan_files:
                _, namespace, name = t.table.split(".")  # catalog.namespace.table
                changed.append((namespace, name))
        outputs = [output_dataset(info) for info in describe_tables(catalog, changed)]
        run.emit(RunState.COMPLETE, [], outputs)
        return result


def _table(info: TableInfo) -> str:
    return info.symlink_name.split(".")[-1]


def _progress_facet(progress: IngestProgress) -> ProgressRunFacet:
    return ProgressRunFacet(
        batches=progress.batches,
        messagesRead=progress.rows_in,
        landed=progress.landed,
        rejected=progress.rejected,
        alreadyLanded=progress.already_landed,
    )
