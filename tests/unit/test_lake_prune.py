"""The literal partition predicate a scoped write carries (lineage.io.lake.Prune)."""

from __future__ import annotations

from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from lineage.io import lake
from lineage.io.scans import ScanTally
from lineage.settings import Settings


def test_prune_is_an_in_list_up_to_the_limit_and_a_range_beyond(spark: SparkSession) -> None:
    frame = spark.range(-20, 500).withColumnRenamed("id", "run_part")
    few = lake.Prune("run_part", (-3, 5, 7))
    assert sorted(r[0] for r in frame.where(few.on()).collect()) == [-3, 5, 7]
    assert "IN" in str(few.on()).upper()
    many = lake.Prune("run_part", tuple(range(0, 2 * lake.IN_LIST_LIMIT + 1, 2)))
    # Past the limit Iceberg would not prune on the list: the span is used, which holds every value.
    kept = {r[0] for r in frame.where(many.on()).collect()}
    assert kept == set(range(0, 2 * lake.IN_LIST_LIMIT + 1)) and set(many.values) <= kept
    assert "IN" not in str(many.on()).upper()
    assert str(few.on("t")).count("t.run_part") == 1


def test_a_pruned_merge_reads_only_its_partitions_and_writes_the_same_rows(
    spark: SparkSession, base_settings: Settings
) -> None:
    catalog = base_settings.catalog
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.prune_test")
    rows = spark.range(0, 600).select(
        F.concat(F.lit("r"), F.col("id").cast("string")).alias("run_id"),
        (F.col("id") % 6).cast("int").alias("run_part"),
        F.lit("old").alias("v"),
    )
    pruned, whole = (f"{catalog.name}.prune_test.{name}" for name in ("pruned", "whole"))
    for table in (pruned, whole):
        lake.replace_table(rows, table, "run_part")
    # r2 and r8 live in partition 2; "new" is a new key of partition 2.
    source = spark.createDataFrame(
        [("r2", 2, "new"), ("r8", 2, "new"), ("new", 2, "new")], "run_id string, run_part int, v string"
    )
    tally = ScanTally(spark)
    tally.take()
    lake.merge_by_key(source, pruned, ["run_id"], lake.Prune("run_part", (2,)))
    read_pruned = tally.take()[pruned]
    lake.merge_by_key(source, whole, ["run_id"])
    read_whole = tally.take()[whole]
    # One file per partition: the pruned MERGE read partition 2's only, the plain one all six.
    assert (read_pruned.read, read_pruned.read + read_pruned.skipped) == (1, 6)
    assert read_whole.read == 6
    # What they returned: partition 2's 100 rows against all 600, from fewer bytes.
    assert (read_pruned.rows, read_whole.rows) == (100, 600)
    assert 0 < read_pruned.bytes < read_whole.bytes
    assert sorted(spark.table(pruned).collect()) == sorted(spark.table(whole).collect())
    assert spark.table(pruned).where("v = 'new'").orderBy("run_id").collect() == [
        Row(run_id="new", run_part=2, v="new"),
        Row(run_id="r2", run_part=2, v="new"),
        Row(run_id="r8", run_part=2, v="new"),
    ]
    # A scoped replacement with the same predicate: rows of the scope the frame lacks are deleted.
    lake.replace_in_scope(
        spark,
        source.where("run_id = 'r2'"),
        pruned,
        ["run_id"],
        source.select("run_id"),
        lake.Prune("run_part", (2,)),
    )
    assert [r.run_id for r in spark.table(pruned).where("v = 'new'").collect()] == ["r2"]
    assert spark.table(pruned).count() == 599


def test_a_scoped_replacement_computes_its_rows_once_and_leaves_a_kept_frame_kept(
    spark: SparkSession, base_settings: Settings
) -> None:
    catalog = base_settings.catalog
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.prune_test")
    table = f"{catalog.name}.prune_test.once"
    lake.replace_table(
        spark.createDataFrame([("a", "old"), ("b", "old"), ("c", "old")], "k string, v string"), table
    )
    calls = spark.sparkContext.accumulator(0)

    def key(n):  # no type hints: Spark would read them as a pandas UDF's
        calls.add(1)
        return "abcd"[n]

    # The key comes from a Python function: the MERGE uses the frame's rows and, for the rows gone, its keys.
    frame = spark.range(1, 4).select(F.udf(key, "string")("id").alias("k"), F.lit("new").alias("v"))
    lake.replace_in_scope(spark, frame, table, ["k"], spark.createDataFrame([("a",), ("b",)], "k string"))
    assert calls.value == 3
    assert sorted(spark.table(table).collect()) == [
        Row(k="b", v="new"),
        Row(k="c", v="new"),
        Row(k="d", v="new"),
    ]
    assert not frame.storageLevel.useMemory and not frame.storageLevel.useDisk
    # A frame its caller keeps stays kept.
    kept = spark.createDataFrame([("b", "again")], "k string, v string").persist()
    lake.replace_in_scope(spark, kept, table, ["k"], spark.createDataFrame([("b",)], "k string"))
    assert kept.storageLevel.useMemory
    assert spark.table(table).where("k = 'b'").collect() == [Row(k="b", v="again")]
    kept.unpersist()
