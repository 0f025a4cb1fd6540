"""Small builders of OpenLineage event dicts and ``lake.raw.events`` rows for the model tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.50.0/integration/flink"
RUN_SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"

RAW_EVENTS_SCHEMA = (
    "event_kind string, event_type string, event_time timestamp, run_id string, job_namespace string, "
    "job_name string, dataset_namespace string, dataset_name string, parent_run_id string, "
    "parent_job_namespace string, parent_job_name string, root_run_id string, root_job_namespace string, "
    "root_job_name string, producer string, schema_url string, event_json string, payload_bytes int, "
    "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp, "
    "kafka_key string, ingested_at timestamp"
)

Job = tuple[str, str]


def at(seconds: float = 0) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_id(n: int) -> str:
    """A deterministic UUIDv4-shaped run id."""
    return f"00000000-0000-4000-8000-{n:012d}"


def dataset(
    namespace: str,
    name: str,
    *,
    symlinks: Sequence[tuple[str, str]] = (),
    fields: Sequence[tuple[str, str]] = (),
    input_stats: dict[str, int] | None = None,
    output_stats: dict[str, int] | None = None,
    column_lineage: dict[str, Any] | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """An input/output dataset with optional symlinks (TABLE), schema, statistics, column lineage and the
    producer's version id (the ``version`` dataset facet)."""
    facets: dict[str, Any] = {}
    if version is not None:
        facets["version"] = {"datasetVersion": version}
    if symlinks:
        facets["symlinks"] = {
            "identifiers": [{"namespace": ns, "name": n, "type": "TABLE"} for ns, n in symlinks]
        }
    if fields:
        facets["schema"] = {"fields": [{"name": n, "type": t} for n, t in fields]}
    if column_lineage:
        facets["columnLineage"] = column_lineage
    out: dict[str, Any] = {"namespace": namespace, "name": name, "facets": facets}
    if input_stats:
        out["inputFacets"] = {"inputStatistics": input_stats}
    if output_stats:
        out["outputFacets"] = {"outputStatistics": output_stats}
    return out


def parent(run: str, job: Job, root: tuple[str, Job] | None = None) -> dict[str, Any]:
    """A ``parent`` run facet, with ``root`` when given."""
    facet: dict[str, Any] = {"run": {"runId": run}, "job": {"namespace": job[0], "name": job[1]}}
    if root:
        facet["root"] = {"run": {"runId": root[0]}, "job": {"namespace": root[1][0], "name": root[1][1]}}
    return facet


def run_event(
    event_type: str | None,
    moment: datetime,
    run: str,
    job: Job = ("ns", "job"),
    *,
    inputs: Iterable[dict[str, Any]] = (),
    outputs: Iterable[dict[str, Any]] = (),
    run_facets: dict[str, Any] | None = None,
    job_facets: dict[str, Any] | None = None,
    producer: str = PRODUCER,
) -> dict[str, Any]:
    """A RunEvent dict (``event_type`` None leaves ``eventType`` out, as the spec allows)."""
    event: dict[str, Any] = {
        "eventTime": iso(moment),
        "producer": producer,
        "schemaURL": RUN_SCHEMA_URL,
        "run": {"runId": run, "facets": run_facets or {}},
        "job": {"namespace": job[0], "name": job[1], "facets": job_facets or {}},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }
    if event_type is not None:
        event["eventType"] = event_type
    return event


def job_event(
    moment: datetime,
    job: Job,
    *,
    inputs: Iterable[dict[str, Any]] = (),
    outputs: Iterable[dict[str, Any]] = (),
    job_facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A JobEvent dict (static lineage)."""
    return {
        "eventTime": iso(moment),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": job[0], "name": job[1], "facets": job_facets or {}},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def dataset_event(moment: datetime, ds: dict[str, Any]) -> dict[str, Any]:
    """A DatasetEvent dict."""
    return {
        "eventTime": iso(moment),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": ds,
    }


def job_type(processing: str, integration: str, kind: str) -> dict[str, Any]:
    return {"jobType": {"processingType": processing, "integration": integration, "jobType": kind}}


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def to_row(event: dict[str, Any], offset: int = 0, *, partition: int = 0) -> tuple[Any, ...]:
    """A ``lake.raw.events`` row for an event dict, envelope columns extracted as the ingestion does."""
    text = json.dumps(event, sort_keys=True)
    run = event.get("run")
    job = event.get("job") or {}
    ds = event.get("dataset") or {}
    kind = "RunEvent" if run else "DatasetEvent" if "dataset" in event else "JobEvent"
    p = ((run or {}).get("facets") or {}).get("parent") or {}
    root = p.get("root") or {}
    event_type = event.get("eventType")
    return (
        kind,
        event_type.upper() if event_type else None,
        _parse_time(event["eventTime"]),
        run["runId"] if run else None,
        job.get("namespace"),
        job.get("name"),
        ds.get("namespace"),
        ds.get("name"),
        (p.get("run") or {}).get("runId"),
        (p.get("job") or {}).get("namespace"),
        (p.get("job") or {}).get("name"),
        (root.get("run") or {}).get("runId"),
        (root.get("job") or {}).get("namespace"),
        (root.get("job") or {}).get("name"),
        event["producer"],
        event["schemaURL"],
        text,
        len(text.encode()),
        "input.runs",
        partition,
        offset,
        T0,
        None,
        T0,
    )


def events_df(spark: SparkSession, events: Sequence[dict[str, Any]]) -> DataFrame:
    """Rows of ``lake.raw.events`` for the events, Kafka offsets in list order (arrival order)."""
    return spark.createDataFrame([to_row(e, i) for i, e in enumerate(events)], RAW_EVENTS_SCHEMA)


def demo_event_dicts() -> list[dict[str, Any]]:
    """The demo's seed-lab events (lineage.demo.events) as dicts."""
    from openlineage.client.serde import Serde

    from lineage.demo.events import lab_events

    return [json.loads(Serde.to_json(e.event)) for e in lab_events()]


def utc(value: datetime | None) -> datetime | None:
    """A collected timestamp as an aware UTC datetime.

    PySpark returns naive datetimes in the Python process's local zone; ``astimezone`` reads a naive value in
    that same zone, so this is right whatever the local zone is.
    """
    return value.astimezone(UTC) if value is not None else None
