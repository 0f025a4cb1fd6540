"""Iceberg reads and writes used by the batch build (SQL only for MERGE, DDL and metadata tables)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

_MODEL_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


def table_exists(spark: SparkSession, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def current_snapshot_id(spark: SparkSession, table: str) -> int | None:
    """The table's current snapshot id, None for a table without snapshots."""
    rows = spark.sql(
        f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor "
        "ORDER BY made_current_at DESC LIMIT 1"
    ).collect()
    return int(rows[0][0]) if rows else None


def read_at(spark: SparkSession, table: str, snapshot_id: int) -> DataFrame:
    """The table as of one snapshot (so every read of one build sees the same data)."""
    return spark.read.option("versionAsOf", str(snapshot_id)).table(table)


def read_appended(spark: SparkSession, table: str, after: int, upto: int) -> DataFrame:
    """Rows appended after snapshot ``after`` up to and including ``upto`` (Iceberg incremental read)."""
    return (
        spark.read.format("iceberg")
        .option("start-snapshot-id", str(after))
        .option("end-snapshot-id", str(upto))
        .load(table)
    )


def replace_table(frame: DataFrame, table: str) -> None:
    """Create or atomically replace ``table`` with ``frame`` (one commit)."""
    writer = frame.writeTo(table).using("iceberg")
    for key, value in _MODEL_TABLE_PROPERTIES.items():
        writer = writer.tableProperty(key, value)
    writer.createOrReplace()


def overwrite_where(frame: DataFrame, table: str, column: str, value: int) -> None:
    """Atomically replace the rows with ``column == value`` by ``frame`` (idempotent re-runs)."""
    frame.writeTo(table).overwrite(F.col(column) == F.lit(value))


def merge_by_key(frame: DataFrame, table: str, keys: list[str]) -> None:
    """Upsert ``frame`` into ``table`` on ``keys``: matched rows replaced whole, new rows inserted."""
    source = "s"
    on = None
    for key in keys:
        # The target's columns are qualified by its full table name (DataFrame.mergeInto has no alias).
        clause = F.col(f"{table}.{key}").eqNullSafe(F.col(f"{source}.{key}"))
        on = clause if on is None else on & clause
    assert on is not None
    (frame.alias(source).mergeInto(table, on).whenMatched().updateAll().whenNotMatched().insertAll().merge())


def append(frame: DataFrame, table: str) -> None:
    frame.writeTo(table).append()
