"""DDL of the raw tables (SQL kept together here) and table lookups through Spark."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lineage.settings import CatalogSettings

# Properties every raw table gets. Streaming appends many small commits: keep metadata files bounded,
# compress with zstd, and let each micro-batch write without a shuffle (fanout writer, no distribution).
_RAW_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    "write.distribution-mode": "none",
    "write.spark.fanout.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "50",
}

_EVENTS_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    event_kind           STRING    COMMENT 'RunEvent, DatasetEvent or JobEvent',
    event_type           STRING    COMMENT 'START RUNNING COMPLETE ABORT FAIL OTHER; null if not given',
    event_time           TIMESTAMP COMMENT 'eventTime, UTC',
    run_id               STRING,
    job_namespace        STRING,
    job_name             STRING,
    dataset_namespace    STRING    COMMENT 'DatasetEvent only',
    dataset_name         STRING    COMMENT 'DatasetEvent only',
    parent_run_id        STRING    COMMENT 'run.facets.parent.run.runId',
    parent_job_namespace STRING,
    parent_job_name      STRING,
    root_run_id          STRING    COMMENT 'run.facets.parent.root.run.runId',
    root_job_namespace   STRING,
    root_job_name        STRING,
    producer             STRING,
    schema_url           STRING,
    event_json           STRING    COMMENT 'the event as received, secrets replaced by the redaction marker',
    payload_bytes        INT,
    kafka_topic          STRING,
    kafka_partition      INT,
    kafka_offset         BIGINT,
    kafka_timestamp      TIMESTAMP,
    kafka_key            STRING,
    ingested_at          TIMESTAMP,
    redactions           INT       COMMENT 'secrets replaced in event_json and kafka_key',
    kafka_topic_id       STRING    COMMENT {topic_id_comment}
) USING iceberg
PARTITIONED BY (days(event_time))
TBLPROPERTIES ({properties})
"""

_REJECTED_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    kafka_topic      STRING,
    kafka_partition  INT,
    kafka_offset     BIGINT,
    kafka_timestamp  TIMESTAMP,
    kafka_key        BINARY,
    value            BINARY  COMMENT 'the message value, byte for byte except redacted secrets',
    payload_bytes    INT,
    reason           STRING  COMMENT 'stable reason code, see lineage.transforms.envelope.REASONS',
    detail           STRING  COMMENT 'human-readable explanation',
    ingested_at      TIMESTAMP,
    redactions       INT     COMMENT 'secrets replaced in value and kafka_key (UTF-8 text only)',
    kafka_topic_id   STRING  COMMENT {topic_id_comment}
) USING iceberg
PARTITIONED BY (days(ingested_at))
TBLPROPERTIES ({properties})
"""


# Kafka's id of the topic incarnation a row was read from: a topic deleted and created again under the same
# name starts its offsets anew, and only the id tells its messages from the old topic's at the same offsets.
_TOPIC_ID_COMMENT = (
    "'id of the Kafka topic incarnation read (as kafka-topics.sh prints it); null: not recorded'"
)


def _properties_sql(props: dict[str, str]) -> str:
    return ", ".join(f"'{k}'='{v}'" for k, v in props.items())


def create_raw_tables(spark: SparkSession, catalog: CatalogSettings, target_file_size_bytes: int) -> None:
    """Create the ``raw`` and ``lineage`` namespaces and the two raw tables if missing. Idempotent."""
    for namespace in (catalog.raw_namespace, catalog.lineage_namespace):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.{namespace}")
    props = _properties_sql(
        {**_RAW_TABLE_PROPERTIES, "write.target-file-size-bytes": str(target_file_size_bytes)}
    )
    for ddl, table in ((_EVENTS_DDL, catalog.events_table), (_REJECTED_DDL, catalog.rejected_table)):
        spark.sql(ddl.format(table=table, properties=props, topic_id_comment=_TOPIC_ID_COMMENT))
    for table in (catalog.events_table, catalog.rejected_table):
        _add_missing_columns(spark, table)


# Columns added after the first release of the raw tables: a table created before gets them (at the end,
# where the DDL above has them too; rows written before read as null).
_ADDED_COLUMNS = {
    "redactions": "INT COMMENT 'secrets replaced by the redaction marker'",
    "kafka_topic_id": f"STRING COMMENT {_TOPIC_ID_COMMENT}",
}


def _add_missing_columns(spark: SparkSession, table: str) -> None:
    present = set(spark.table(table).columns)
    for column, definition in _ADDED_COLUMNS.items():
        if column not in present:
            spark.sql(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
