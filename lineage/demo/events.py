"""The demo's event set: the seed lab (Kafka -> Flink -> Iceberg -> Spark) as OpenLineage events.

Built with openlineage-python's own models, shaped like what each real producer sends:

- ``orders-source``: a Kafka Connect source connector writing topic ``orders``.
- ``orders-s3-sink``: a Kafka Connect sink reading ``orders`` into ``s3://orders-archive``.
- ``supplier-stats``: a Flink 1.x DataStream job (``OpenLineageFlinkJobListener``) reading ``orders`` and
  writing ``supplier-stats``; START and RUNNING heartbeats, then nothing: the cancelled application-mode
  job of the lab that never sends ABORT.
- ``iceberg-ingestion``: a Flink 2.x Table API job (``OpenLineageJobStatusChangedListenerFactory``, job
  namespace = Flink REST address, UUIDv7 run ids) reading ``orders`` through its Flink SQL table and writing
  the Iceberg table ``default.orders``, reported under its location with a catalog-table symlink. Datasets
  only on START, as Flink 2.x does; then RUNNING and ABORT (cancelled).
- ``supplier_stats_app``: a Spark application (parent run) with two child job runs; the overwrite job reads
  the same Iceberg table under its physical ``s3a://warehouse/...`` name and writes ``supplier_stats`` with
  schema, column-lineage and output-statistics facets.
- ``fx-rates-loader``: an hourly batch job writing ``fx_rates`` four times, then stopping: a late dataset.

A fixed seed and a fixed base time make the set identical on every run.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    data_quality_assertions_dataset,
    error_message_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    symlinks_dataset,
    tags_dataset,
)
from openlineage.client.generated.base import JobFacet

BASE_TIME = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
KAFKA = "kafka://kafka-1:19092"
# The same cluster under another bootstrap address (an alias rule in conf/ maps it to KAFKA).
KAFKA_ALIAS = "kafka://broker:9092"
WAREHOUSE = "s3://warehouse"
HIVE = "hive://hive-metastore:9083"
FLINK2_NAMESPACE = "http://jobmanager-2:8081"
LAB_NAMESPACE = "fh-local"

PRODUCER_CONNECT = "https://github.com/OpenLineage/OpenLineage/tree/1.37.0/integration/kafka-connect"
PRODUCER_FLINK1 = "https://github.com/OpenLineage/OpenLineage/tree/1.15.0/integration/flink"
PRODUCER_FLINK2 = "https://github.com/OpenLineage/OpenLineage/tree/1.50.0/integration/flink"
PRODUCER_SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark"

ORDER_FIELDS = [
    ("order_id", "STRING"),
    ("item", "STRING"),
    ("price", "STRING"),
    ("supplier", "STRING"),
    ("bid_time", "TIMESTAMP"),
]


@dataclass(frozen=True)
class DemoEvent:
    event: RunEvent
    label: str


class _Ids:
    """Deterministic run ids: UUIDv4 and UUIDv7 (time-ordered) from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def v4(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def v7(self, at: datetime) -> str:
        millis = int(at.timestamp() * 1000) & ((1 << 48) - 1)
        value = (millis << 80) | (0x7 << 76) | (self._rng.getrandbits(12) << 64)
        value |= (0b10 << 62) | self._rng.getrandbits(62)
        return str(uuid.UUID(int=value))


def _ts(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _schema(fields: list[tuple[str, str]]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields]
    )


def _job_type(processing: str, integration: str, job_type: str) -> dict[str, JobFacet]:
    return {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType=processing, integration=integration, jobType=job_type
        )
    }


def _engine(name: str, version: str, adapter: str) -> processing_engine_run.ProcessingEngineRunFacet:
    return processing_engine_run.ProcessingEngineRunFacet(
        name=name, version=version, openlineageAdapterVersion=adapter
    )


def _event(
    state: RunState,
    at: datetime,
    run_id: str,
    job: Job,
    producer: str,
    *,
    run_facets: dict | None = None,
    inputs: list[InputDataset] | None = None,
    outputs: list[OutputDataset] | None = None,
) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime=_ts(at),
        run=Run(runId=run_id, facets=run_facets or {}),
        job=job,
        producer=producer,
        inputs=inputs or [],
        outputs=outputs or [],
    )


def _orders_topic(namespace: str = KAFKA, *, symlink: str | None = None) -> InputDataset:
    # Column tags (lineage tags): the supplier is personal data and flows on to the Iceberg orders and the
    # supplier summary (IDENTITY); the price is confidential and reaches the Iceberg orders (a DIRECT cast)
    # but not the summary's total_price (an AGGREGATION, a [tags] stop_subtype).
    tags = tags_dataset.TagsDatasetFacet(
        tags=[
            tags_dataset.TagsDatasetFacetFields(key="pii", value="true", source="USER", field="supplier"),
            tags_dataset.TagsDatasetFacetFields(
                key="confidential", value="true", source="USER", field="price"
            ),
        ]
    )
    facets: dict = {"schema": _schema(ORDER_FIELDS), "tags": tags}
    if symlink:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[symlinks_dataset.Identifier(namespace=namespace, name=symlink, type="TABLE")]
        )
    return InputDataset(namespace=namespace, name="orders", facets=facets)


def _iceberg_orders_symlink() -> symlinks_dataset.SymlinksDatasetFacet:
    return symlinks_dataset.SymlinksDatasetFacet(
        identifiers=[symlinks_dataset.Identifier(namespace=HIVE, name="default.orders", type="TABLE")]
    )


def lab_events(seed: int = 42, base_time: datetime = BASE_TIME) -> list[DemoEvent]:
    """Every valid demo event, in the order the producers would send them."""
    ids = _Ids(seed)
    t = base_time
    out: list[DemoEvent] = []

    def add(label: str, *args: Any, **kwargs: Any) -> None:
        out.append(DemoEvent(_event(*args, **kwargs), label))

    # Kafka Connect: source connector writing the orders topic; S3 sink archiving it.
    connect = _job_type("STREAMING", "KAFKA_CONNECT", "SOURCE_CONNECTOR")
    source_job = Job(namespace=LAB_NAMESPACE, name="orders-source", facets=connect)
    source_run = ids.v4()
    orders_out = OutputDataset(namespace=KAFKA, name="orders", facets={"schema": _schema(ORDER_FIELDS)})
    add(
        "orders-source START",
        RunState.START,
        t,
        source_run,
        source_job,
        PRODUCER_CONNECT,
        outputs=[orders_out],
    )
    add(
        "orders-source COMPLETE",
        RunState.COMPLETE,
        t + timedelta(hours=2),
        source_run,
        source_job,
        PRODUCER_CONNECT,
        outputs=[orders_out],
    )
    sink_job = Job(
        namespace=LAB_NAMESPACE,
        name="orders-s3-sink",
        facets=_job_type("STREAMING", "KAFKA_CONNECT", "SINK_CONNECTOR"),
    )
    sink_run = ids.v4()
    archive = OutputDataset(namespace="s3://orders-archive", name="topics/orders")
    # The sink connector knows the cluster by another bootstrap address: same topic, other namespace.
    sink_in = _orders_topic(KAFKA_ALIAS)
    add(
        "orders-s3-sink START",
        RunState.START,
        t + timedelta(minutes=1),
        sink_run,
        sink_job,
        PRODUCER_CONNECT,
        inputs=[sink_in],
        outputs=[archive],
    )
    add(
        "orders-s3-sink COMPLETE",
        RunState.COMPLETE,
        t + timedelta(hours=2),
        sink_run,
        sink_job,
        PRODUCER_CONNECT,
        inputs=[sink_in],
        outputs=[archive],
    )

    # Flink 1.x DataStream job: START, RUNNING every trackingInterval (60 s), then silence.
    flink1 = Job(
        namespace=LAB_NAMESPACE, name="supplier-stats", facets=_job_type("STREAMING", "FLINK", "DATASTREAM")
    )
    flink1_run = ids.v4()
    stats_topic = OutputDataset(
        namespace=KAFKA,
        name="supplier-stats",
        facets={
            "schema": _schema(
                [
                    ("window_start", "TIMESTAMP"),
                    ("window_end", "TIMESTAMP"),
                    ("supplier", "STRING"),
                    ("total_price", "DOUBLE"),
                    ("count", "BIGINT"),
                ]
            )
        },
    )
    engine1 = {"processing_engine": _engine("flink", "1.20.1", "1.15.0")}
    start1 = t + timedelta(minutes=5)
    add(
        "supplier-stats START",
        RunState.START,
        start1,
        flink1_run,
        flink1,
        PRODUCER_FLINK1,
        run_facets=engine1,
        inputs=[_orders_topic()],
        outputs=[stats_topic],
    )
    for beat in range(1, 6):
        add(
            f"supplier-stats RUNNING #{beat}",
            RunState.RUNNING,
            start1 + timedelta(seconds=60 * beat),
            flink1_run,
            flink1,
            PRODUCER_FLINK1,
            run_facets=engine1,
            inputs=[_orders_topic()],
            outputs=[stats_topic],
        )

    # Flink 2.x Table API job: datasets on START only; RUNNING on checkpoints; ABORT when cancelled.
    flink2 = Job(
        namespace=FLINK2_NAMESPACE, name="iceberg-ingestion", facets=_job_type("STREAMING", "FLINK", "JOB")
    )
    start2 = t + timedelta(minutes=6)
    flink2_run = ids.v7(start2)
    engine2 = {"processing_engine": _engine("flink", "2.0.0", "1.50.0")}
    iceberg_out = OutputDataset(
        namespace=WAREHOUSE,
        name="default.db/orders",
        facets={
            "schema": _schema(
                [
                    ("order_id", "STRING"),
                    ("item", "STRING"),
                    ("price", "DECIMAL(10,2)"),
                    ("supplier", "STRING"),
                    ("bid_time", "TIMESTAMP"),
                ]
            ),
            "symlinks": _iceberg_orders_symlink(),
            "columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet(
                fields={
                    name: column_lineage_dataset.Fields(
                        inputFields=[
                            column_lineage_dataset.InputField(
                                namespace=KAFKA,
                                name="orders",
                                field=name,
                                transformations=[
                                    column_lineage_dataset.Transformation(
                                        type="DIRECT",
                                        subtype="TRANSFORMATION" if name == "price" else "IDENTITY",
                                        description="CAST(price AS DECIMAL(10, 2))"
                                        if name == "price"
                                        else "",
                                        masking=False,
                                    )
                                ],
                            )
                        ]
                    )
                    for name, _ in ORDER_FIELDS
                }
            ),
        },
    )
    add(
        "iceberg-ingestion START",
        RunState.START,
        start2,
        flink2_run,
        flink2,
        PRODUCER_FLINK2,
        run_facets=engine2,
        inputs=[_orders_topic(symlink="default_catalog.default_database.orders")],
        outputs=[iceberg_out],
    )
    for beat in range(1, 4):
        add(
            f"iceberg-ingestion RUNNING #{beat}",
            RunState.RUNNING,
            start2 + timedelta(minutes=beat),
            flink2_run,
            flink2,
            PRODUCER_FLINK2,
            run_facets=engine2,
        )
    add(
        "iceberg-ingestion ABORT",
        RunState.ABORT,
        start2 + timedelta(hours=1, minutes=50),
        flink2_run,
        flink2,
        PRODUCER_FLINK2,
        run_facets=engine2,
    )

    # Spark application: parent run + one child run per action (create table, overwrite).
    app_job = Job(
        namespace=LAB_NAMESPACE, name="supplier_stats_app", facets=_job_type("BATCH", "SPARK", "APPLICATION")
    )
    app_run = ids.v4()
    app_start = t + timedelta(hours=2, minutes=10)
    engine3 = {"processing_engine": _engine("spark", "3.5.5", "1.53.0")}
    add(
        "supplier_stats_app START",
        RunState.START,
        app_start,
        app_run,
        app_job,
        PRODUCER_SPARK,
        run_facets=engine3,
    )
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=app_run),
        job=parent_run.Job(namespace=LAB_NAMESPACE, name="supplier_stats_app"),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=app_run),
            job=parent_run.RootJob(namespace=LAB_NAMESPACE, name="supplier_stats_app"),
        ),
    )
    stats_fields = [
        ("supplier", "string"),
        ("hour", "timestamp"),
        ("total_price", "decimal(20,2)"),
        ("order_count", "bigint"),
    ]
    create_job = Job(
        namespace=LAB_NAMESPACE,
        name="supplier_stats_app.create_table_default_supplier_stats",
        facets=_job_type("BATCH", "SPARK", "SQL_JOB"),
    )
    create_run = ids.v4()
    created = OutputDataset(
        namespace=WAREHOUSE, name="default.db/supplier_stats", facets={"schema": _schema(stats_fields)}
    )
    for state, minutes in ((RunState.START, 1), (RunState.COMPLETE, 2)):
        add(
            f"create_table {state.value}",
            state,
            app_start + timedelta(minutes=minutes),
            create_run,
            create_job,
            PRODUCER_SPARK,
            run_facets={"parent": parent, **engine3},
            outputs=[created],
        )
    overwrite_job = Job(
        namespace=LAB_NAMESPACE,
        name="supplier_stats_app.overwrite_by_expression_default_supplier_stats",
        facets=_job_type("BATCH", "SPARK", "SQL_JOB"),
    )
    overwrite_run = ids.v4()
    iceberg_in = InputDataset(
        # Spark reports the Iceberg table by its location (s3a scheme, trailing slash) plus a catalog symlink.
        namespace="s3a://warehouse",
        name="default.db/orders/",
        facets={
            "schema": _schema([(n, t.lower()) for n, t in ORDER_FIELDS]),
            "symlinks": _iceberg_orders_symlink(),
        },
        # The checks the Spark job ran on what it read: prices are present, but order ids repeat (the
        # Flink job's retries wrote some twice): a failing assertion, shown by `lineage health`.
        inputFacets={
            "dataQualityAssertions": data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
                assertions=[
                    data_quality_assertions_dataset.Assertion(
                        assertion="not_null", success=True, column="price"
                    ),
                    data_quality_assertions_dataset.Assertion(
                        assertion="unique", success=False, column="order_id"
                    ),
                ]
            )
        },
    )

    def field(name: str, transformations: list[tuple[str, str]]) -> column_lineage_dataset.InputField:
        return column_lineage_dataset.InputField(
            namespace="s3a://warehouse",
            name="default.db/orders/",
            field=name,
            transformations=[
                column_lineage_dataset.Transformation(type=ty, subtype=sub, description="", masking=False)
                for ty, sub in transformations
            ],
        )

    lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "supplier": column_lineage_dataset.Fields(
                inputFields=[field("supplier", [("DIRECT", "IDENTITY")])]
            ),
            "hour": column_lineage_dataset.Fields(
                inputFields=[field("bid_time", [("DIRECT", "TRANSFORMATION")])]
            ),
            "total_price": column_lineage_dataset.Fields(
                inputFields=[field("price", [("DIRECT", "AGGREGATION")])]
            ),
            "order_count": column_lineage_dataset.Fields(
                inputFields=[field("order_id", [("DIRECT", "AGGREGATION")])]
            ),
        },
        dataset=[
            field("supplier", [("INDIRECT", "GROUP_BY")]),
            field("bid_time", [("INDIRECT", "GROUP_BY"), ("INDIRECT", "FILTER")]),
        ],
    )
    stats_out = OutputDataset(
        namespace=WAREHOUSE,
        name="default.db/supplier_stats",
        facets={
            "schema": _schema(stats_fields),
            "symlinks": symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[
                    symlinks_dataset.Identifier(namespace=HIVE, name="default.supplier_stats", type="TABLE")
                ]
            ),
            "columnLineage": lineage,
        },
        outputFacets={
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=240, size=18432, fileCount=2
            )
        },
    )
    for state, minutes in ((RunState.START, 3), (RunState.COMPLETE, 5)):
        add(
            f"overwrite {state.value}",
            state,
            app_start + timedelta(minutes=minutes),
            overwrite_run,
            overwrite_job,
            PRODUCER_SPARK,
            run_facets={"parent": parent, **engine3},
            inputs=[iceberg_in],
            outputs=[stats_out],
        )
    # A failed retry of the same action an hour later, with the errorMessage facet.
    failed_run = ids.v4()
    error = error_message_run.ErrorMessageRunFacet(
        message="Table default.orders not found",
        programmingLanguage="python",
        stackTrace="pyspark.errors.exceptions.captured.AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] ...",
    )
    add(
        "overwrite retry START",
        RunState.START,
        app_start + timedelta(hours=1),
        failed_run,
        overwrite_job,
        PRODUCER_SPARK,
        run_facets={"parent": parent, **engine3},
    )
    add(
        "overwrite retry FAIL",
        RunState.FAIL,
        app_start + timedelta(hours=1, minutes=1),
        failed_run,
        overwrite_job,
        PRODUCER_SPARK,
        run_facets={"parent": parent, "errorMessage": error, **engine3},
    )
    add(
        "supplier_stats_app COMPLETE",
        RunState.COMPLETE,
        app_start + timedelta(hours=1, minutes=2),
        app_run,
        app_job,
        PRODUCER_SPARK,
        run_facets=engine3,
    )
    _late_loader(ids, t, add)
    return out


def _late_loader(ids: _Ids, t: datetime, add: Callable[..., None]) -> None:
    """A batch job loading exchange rates every hour, on schedule for four hours, then never again: its
    table ``fx_rates`` is late for ``lineage health`` (its last write is more than two intervals old) on any
    clock past the lab's sixth hour."""
    job = Job(namespace=LAB_NAMESPACE, name="fx-rates-loader", facets=_job_type("BATCH", "SPARK", "JOB"))
    rates = OutputDataset(
        namespace=WAREHOUSE,
        name="default.db/fx_rates",
        facets={"schema": _schema([("currency", "STRING"), ("rate", "DOUBLE"), ("as_of", "TIMESTAMP")])},
    )
    for hour in range(4):
        run_id = ids.v4()
        nominal = t + timedelta(hours=hour)
        facets = {"nominalTime": nominal_time_run.NominalTimeRunFacet(nominalStartTime=_ts(nominal))}
        for state, minutes in ((RunState.START, 1), (RunState.COMPLETE, 3)):
            add(
                f"fx-rates-loader {hour}h {state.value}",
                state,
                nominal + timedelta(minutes=minutes),
                run_id,
                job,
                PRODUCER_SPARK,
                run_facets=facets,
                outputs=[rates],
            )


# Messages that are not valid OpenLineage events, sent as raw bytes; each with the reason it must get.
MALFORMED: list[tuple[bytes | None, str]] = [
    (None, "EMPTY_VALUE"),
    (b"", "EMPTY_VALUE"),
    (b"\xff\xfe{not utf-8}", "NOT_UTF8"),
    (b'{"eventType": "START", "eventTime": ', "NOT_JSON"),
    (b'["START", "2026-11-20T08:00:00Z"]', "NOT_JSON_OBJECT"),
    (
        b'{"eventType": "START", "eventTime": "2026-11-20T08:00:00Z", "producer": "x", '
        b'"run": {"runId": "0b8f6b2e-8a3e-4c7e-9a51-3f3e8f0a1b2c"}, "job": {"namespace": "n", "name": "j"}}',
        "MISSING_FIELD",
    ),
    (
        b'{"eventType": "START", "eventTime": "2026-11-20T08:00:00Z", "producer": "x", "schemaURL": "u", '
        b'"run": {"runId": "run-42"}, "job": {"namespace": "n", "name": "j"}}',
        "INVALID_RUN_ID",
    ),
    (
        b'{"eventType": "STARTED", "eventTime": "2026-11-20T08:00:00Z", "producer": "x", "schemaURL": "u", '
        b'"run": {"runId": "0b8f6b2e-8a3e-4c7e-9a51-3f3e8f0a1b2c"}, "job": {"namespace": "n", "name": "j"}}',
        "UNKNOWN_EVENT_TYPE",
    ),
    (
        b'{"eventType": "START", "eventTime": "20/11/2026 08:00", "producer": "x", "schemaURL": "u", '
        b'"run": {"runId": "0b8f6b2e-8a3e-4c7e-9a51-3f3e8f0a1b2c"}, "job": {"namespace": "n", "name": "j"}}',
        "INVALID_EVENT_TIME",
    ),
]
