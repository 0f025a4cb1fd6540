"""Which extracted rows a re-extraction keeps for events retention removed from the raw table."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lineage.batch.build import carried_over


def test_only_the_copies_no_longer_in_the_raw_table_are_kept(spark: SparkSession) -> None:
    # Event a arrived twice (one copy retired, one replayed later and still raw), b once (retired), c once
    # (still raw). a mentions two datasets, b one.
    old_facts = spark.createDataFrame(
        [("a", 1), ("a", 1), ("b", 2), ("c", 3)], "event_hash string, event_time int"
    )
    old_mentions = spark.createDataFrame(
        [("a", "in", "x"), ("a", "out", "y"), ("a", "in", "x"), ("a", "out", "y"), ("b", "in", "z")],
        "event_hash string, role string, name string",
    )
    new_facts = spark.createDataFrame([("a", 1), ("c", 3)], "event_hash string, event_time int")

    kept = carried_over({"event_facts": old_facts, "dataset_mentions": old_mentions}, new_facts)

    assert sorted(tuple(r) for r in kept["event_facts"].collect()) == [("a", 1), ("b", 2)]
    assert sorted(tuple(r) for r in kept["dataset_mentions"].collect()) == [
        ("a", "in", "x"),
        ("a", "out", "y"),
        ("b", "in", "z"),
    ]


def test_nothing_is_kept_when_the_raw_table_still_holds_every_copy(spark: SparkSession) -> None:
    facts = spark.createDataFrame([("a", 1), ("a", 1)], "event_hash string, event_time int")
    assert carried_over({"event_facts": facts}, facts)["event_facts"].count() == 0
