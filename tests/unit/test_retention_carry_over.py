"""Which extracted rows a re-extraction keeps for events retention removed from the raw table."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lineage.batch.build import carried_over

ROW = "event_hash string, kafka_topic string, kafka_partition int, kafka_offset bigint"


def test_the_rows_of_raw_rows_that_are_gone_are_kept_copy_by_copy(spark: SparkSession) -> None:
    # Event a arrived three times: offset 1 retired, offsets 5 and 9 still raw; b (offset 2) retired; c raw.
    old_facts = spark.createDataFrame(
        [("a", "t", 0, 1), ("a", "t", 0, 5), ("b", "t", 0, 2), ("c", "t", 1, 2)], ROW
    )
    old_mentions = spark.createDataFrame(
        [("a", "t", 0, 1, "x"), ("a", "t", 0, 5, "x"), ("b", "t", 0, 2, "z"), ("b", "t", 0, 2, "y")],
        ROW + ", name string",
    )
    new_facts = spark.createDataFrame([("a", "t", 0, 5), ("a", "t", 0, 9), ("c", "t", 1, 2)], ROW)

    kept = carried_over({"event_facts": old_facts, "dataset_mentions": old_mentions}, new_facts)

    assert sorted(tuple(r) for r in kept["event_facts"].collect()) == [("t", 0, 1, "a"), ("t", 0, 2, "b")]
    assert sorted(tuple(r) for r in kept["dataset_mentions"].collect()) == [
        ("t", 0, 1, "a", "x"),
        ("t", 0, 2, "b", "y"),
        ("t", 0, 2, "b", "z"),
    ]
