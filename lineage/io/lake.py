"""Iceberg reads and writes used by the batch build (SQL only for MERGE, DDL and metadata tables)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

_MODEL_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
    # Incremental builds change a few keys of large tables: write position deletes for the changed rows
    # instead of rewriting every data file that holds one (copy-on-write). Readers merge them; Spark and
    # pyiceberg both read position deletes. Compaction folds them back (Iceberg's rewrite_data_files).
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    # One position-delete file per data file it applies to (not one per partition): a reader of a pruned
    # partition opens only the delete files of the data files it reads.
    "write.delete.granularity": "file",
}
# Iceberg's metrics, manifest and row-group evaluators stop pruning on an IN list longer than this.
IN_LIST_LIMIT = 200


def table_exists(spark: SparkSession, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def tables_in(spark: SparkSession, namespace: str) -> set[str]:
    """Names of the tables in a namespace (``catalog.namespace``), one catalog call."""
    return {row["tableName"] for row in spark.sql(f"SHOW TABLES IN {namespace}").collect()}


def current_snapshot_id(spark: SparkSession, table: str) -> int | None:
    """The table's current snapshot id, None for a table without snapshots."""
    rows = spark.sql(
        f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor "
        "ORDER BY made_current_at DESC LIMIT 1"
    ).collect()
    return int(rows[0][0]) if rows else None


def snapshot_exists(spark: SparkSession, table: str, snapshot_id: int) -> bool:
    """Whether the table still has that snapshot (not expired)."""
    query = f"SELECT count(*) FROM {table}.snapshots WHERE snapshot_id = {int(snapshot_id)}"
    return bool(spark.sql(query).collect()[0][0])


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


def replace_table(frame: DataFrame, table: str, partitioned_by: str | None = None) -> None:
    """Create or atomically replace ``table`` with ``frame`` (one commit), identity-partitioned by the
    column ``partitioned_by`` when one is named."""
    writer = frame.writeTo(table).using("iceberg")
    for key, value in _MODEL_TABLE_PROPERTIES.items():
        writer = writer.tableProperty(key, value)
    if partitioned_by is not None:
        writer = writer.partitionedBy(F.col(partitioned_by))
    writer.createOrReplace()


@dataclass(frozen=True)
class Prune:
    """A literal predicate on a target's partition column that every row a write touches satisfies: put in
    a MERGE's ON clause, Spark pushes it into the target's scan and Iceberg reads only those partitions.

    ``values`` are the partition values of every key the write may touch (old rows and new alike); an
    empty tuple touches nothing. Longer lists than Iceberg prunes with become the range they span.
    """

    column: str
    values: tuple[int, ...]

    def on(self, qualifier: str | None = None) -> Column:
        """The predicate on the column, qualified by a table name or alias when one is given."""
        column = F.col(self.column if qualifier is None else f"{qualifier}.{self.column}")
        if len(self.values) <= IN_LIST_LIMIT:
            return column.isin(*[F.lit(v) for v in self.values])
        return column.between(min(self.values), max(self.values))


def _pruned(on: Column, table: str, prune: Prune | None) -> Column:
    return on if prune is None else on & prune.on(table)


def overwrite_where(frame: DataFrame, table: str, column: str, value: int) -> None:
    """Replace the rows with ``column == value`` by ``frame`` (idempotent re-runs).

    Usually there are none (a first attempt) and ``frame`` is appended. Rows of that value (a re-run after
    a crash) are deleted row by row first, in a commit of their own: an overwrite by filter drops whole
    files only, and Iceberg refuses it for a file whose column statistics span the value without every row
    matching, which is what compaction makes of files of several values. A crash between the two commits
    leaves no row of the value, and the re-run appends.
    """
    matching = F.col(column) == F.lit(value)
    if not frame.sparkSession.table(table).where(matching).isEmpty():
        frame.sparkSession.sql(f"DELETE FROM {table} WHERE {column} = {int(value)}")
    frame.writeTo(table).append()


def merge_by_key(frame: DataFrame, table: str, keys: list[str], prune: Prune | None = None) -> None:
    """Upsert ``frame`` into ``table`` on ``keys``: matched rows replaced whole, new rows inserted; with
    ``prune``, only the target's partitions it names are read."""
    # The target's columns are qualified by its full table name (DataFrame.mergeInto has no alias).
    on = _pruned(same_keys(table, "s", keys), table, prune)
    frame.alias("s").mergeInto(table, on).whenMatched().updateAll().whenNotMatched().insertAll().merge()


def insert_missing(frame: DataFrame, table: str, keys: list[str]) -> None:
    """Insert the rows of ``frame`` whose ``keys`` are not in ``table`` yet (existing rows untouched)."""
    frame.alias("s").mergeInto(table, same_keys(table, "s", keys)).whenNotMatched().insertAll().merge()


def same_keys(left: str, right: str, keys: list[str]) -> Column:
    """Null-safe equality of ``keys`` between two aliased sides (a table name or a DataFrame alias)."""
    on = None
    for key in keys:
        clause = F.col(f"{left}.{key}").eqNullSafe(F.col(f"{right}.{key}"))
        on = clause if on is None else on & clause
    assert on is not None
    return on


def replace_in_scope(
    spark: SparkSession,
    frame: DataFrame,
    table: str,
    keys: list[str],
    scope: DataFrame,
    prune: Prune | None = None,
) -> None:
    """Make the rows of ``table`` whose ``scope`` columns match a row of ``scope`` equal to ``frame``: in one
    atomic MERGE, rows of ``frame`` replace or add rows by ``keys`` (null-safe), and rows in the scope that
    ``frame`` no longer has are deleted.

    Args:
        spark: the session.
        frame: the new rows of the scope (all of them; each row's scope columns must be in ``scope``).
        table: the target table (same columns as ``frame``).
        keys: the columns that identify a row.
        scope: distinct values of the scope columns (e.g. ``dataset_id``), matched by name.
        prune: the target's partitions that hold every row of the scope (both reads of the target are
            limited to them).
    """
    # ``frame`` feeds the MERGE twice (its rows, and its keys for the rows gone): kept once, so a step's
    # scoped rows are computed once, not once per use. A frame its caller keeps is used as it is.
    ours = not frame.storageLevel.useMemory and not frame.storageLevel.useDisk
    if ours:
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stored = spark.table(table) if prune is None else spark.table(table).where(prune.on())
        old = stored.join(scope, scope.columns, "left_semi").select(*keys)
        gone = (
            old.alias("o")
            .join(frame.select(*keys).alias("n"), same_keys("o", "n", keys), "left_anti")
            .withColumn("_delete", F.lit(True))
        )
        source = frame.withColumn("_delete", F.lit(False)).unionByName(gone, allowMissingColumns=True)
        columns = {c: F.col(f"s.{c}") for c in frame.columns}
        (
            source.alias("s")
            .mergeInto(table, _pruned(same_keys(table, "s", keys), table, prune))
            .whenMatched(F.col("s._delete"))
            .delete()
            .whenMatched()
            .update(columns)
            .whenNotMatched(~F.col("s._delete"))
            .insert(columns)
            .merge()
        )
    finally:
        if ours:
            frame.unpersist()


def append(frame: DataFrame, table: str, properties: dict[str, str] | None = None) -> None:
    """Append ``frame`` to ``table``; ``properties`` go into the commit's snapshot summary."""
    options = {f"snapshot-property.{key}": value for key, value in (properties or {}).items()}
    frame.writeTo(table).options(**options).append()
