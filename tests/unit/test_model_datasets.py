"""Dataset naming, mentions, canonical aliases, datasets and schema versions (lineage.transforms.model)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lineage.batch.build import _Build
from lineage.settings import load_settings
from lineage.transforms import model
from tests.unit.model_events import at, dataset, dataset_event, events_df, job_event, run_event, run_id, utc

HIVE = "hive://hive-metastore:9083"
KAFKA = "kafka://kafka-1:19092"
RULES = [("kafka://broker:9092", KAFKA)]

NAMESPACES = {
    "s3a://warehouse": "s3://warehouse",
    "s3n://bucket/": "s3://bucket",
    "kafka://h1:9092,h2:9092": "kafka://h1:9092",
    "KAFKA://Broker-1:9092": "kafka://broker-1:9092",
    "s3://Bucket/Path/": "s3://bucket/Path",
    "hdfs://namenode:8020///": "hdfs://namenode:8020",
    "file:///": "file:///",
    "fh-local/": "fh-local",
}
NAMES = {
    "default.db/orders/": "default.db/orders",
    "/": "/",
    "/data//": "/data",
    "topics/orders": "topics/orders",
}


@pytest.fixture(scope="module")
def normalised(spark: SparkSession) -> dict[tuple[str, str], str]:
    """Every naming case evaluated in one Spark job: (kind, input) -> output."""
    cases = (
        [("namespace", v) for v in NAMESPACES]
        + [("name", v) for v in NAMES]
        + [("rule", v) for v in RULE_CASES]
    )
    frame = spark.createDataFrame(cases, "kind string, value string")
    value = F.col("value")
    out = (
        F.when(F.col("kind") == "namespace", model.normalize_namespace(value))
        .when(F.col("kind") == "name", model.normalize_name(value))
        .otherwise(
            model.apply_alias_rules(
                model.normalize_namespace(value), [("kafka://broker:9092/", "KAFKA://kafka-1:19092")]
            )
        )
    )
    return {(r.kind, r.value): r.out for r in frame.select("kind", "value", out.alias("out")).collect()}


RULE_CASES = {
    "kafka://broker:9092": KAFKA,
    "kafka://broker:9092,other:9092": KAFKA,
    "kafka://other:9092": "kafka://other:9092",
}


@pytest.mark.parametrize(("raw", "expected"), NAMESPACES.items())
def test_normalize_namespace(normalised: dict[tuple[str, str], str], raw: str, expected: str) -> None:
    assert normalised[("namespace", raw)] == expected


@pytest.mark.parametrize(("raw", "expected"), NAMES.items())
def test_normalize_name(normalised: dict[tuple[str, str], str], raw: str, expected: str) -> None:
    assert normalised[("name", raw)] == expected


@pytest.mark.parametrize(("raw", "expected"), RULE_CASES.items())
def test_alias_rules_map_whole_normalised_namespaces(
    normalised: dict[tuple[str, str], str], raw: str, expected: str
) -> None:
    assert normalised[("rule", raw)] == expected


def test_mention_columns_name_what_the_extraction_writes(spark: SparkSession) -> None:
    # The build checks the stored extracted form against the static list instead of planning the extraction.
    planned = model.dataset_mentions(events_df(spark, [run_event("START", at(0), run_id(1))])).columns
    assert planned == list(model.MENTION_COLUMNS)


def test_mentions_roles_statistics_symlinks_and_column_lineage(spark: SparkSession) -> None:
    lineage = {"fields": {"b": {"inputFields": [{"namespace": "s3://in", "name": "x", "field": "a"}]}}}
    events = [
        run_event(
            "COMPLETE",
            at(0),
            run_id(1),
            inputs=[dataset("s3a://in/", "x/", input_stats={"rowCount": 5, "size": 50})],
            outputs=[
                dataset(
                    "s3://out",
                    "y",
                    symlinks=[("HIVE://Metastore:9083", "db.y")],
                    fields=[("b", "int")],
                    output_stats={"rowCount": 7, "size": 70, "fileCount": 1},
                    column_lineage=lineage,
                )
            ],
        ),
        dataset_event(at(1), dataset("postgres://db:5432", "shop.public.orders", fields=[("id", "int")])),
        job_event(at(2), ("airflow", "export"), inputs=[dataset("s3://out", "y")]),
    ]
    rows = sorted(
        model.dataset_mentions(events_df(spark, events)).collect(), key=lambda r: (r.event_time, r.role)
    )
    got = [(r.event_kind, r.role, r.namespace, r.name, r.row_count, r.size_bytes, r.file_count) for r in rows]
    assert got == [
        ("RunEvent", "input", "s3://in", "x", 5, 50, None),
        ("RunEvent", "output", "s3://out", "y", 7, 70, 1),
        ("DatasetEvent", "static", "postgres://db:5432", "shop.public.orders", None, None, None),
        ("JobEvent", "input", "s3://out", "y", None, None, None),
    ]
    assert (rows[0].raw_namespace, rows[0].raw_name) == ("s3a://in/", "x/")
    assert [tuple(s) for s in rows[1].symlinks] == [("hive://metastore:9083", "db.y", "TABLE")]
    assert [tuple(f) for f in rows[1].schema_fields] == [("b", "int", None)]
    # The column-lineage facet is extracted into typed entries (one per input field and transformation).
    entries = [(e.target_field, e.namespace, e.name, e.field) for e in rows[1].column_entries]
    assert entries == [("b", "s3://in", "x", "a")]
    assert rows[1].column_facet is not None and rows[0].column_facet is None
    assert rows[2].run_id is None and rows[3].job_name == "export"


def _lab_datasets() -> list[dict[str, Any]]:
    """The seed lab's names for two real datasets (Iceberg orders table, Kafka orders topic)."""
    flink_out = dataset("s3://warehouse", "default.db/orders", symlinks=[(HIVE, "default.orders")])
    spark_in = dataset("s3a://warehouse", "default.db/orders/", symlinks=[(HIVE, "default.orders")])
    topic = dataset(KAFKA, "orders", symlinks=[(KAFKA, "default_catalog.default_database.orders")])
    other_cluster_name = dataset("kafka://broker:9092", "orders")
    return [
        run_event("START", at(0), run_id(1), ("flink", "ingest"), inputs=[topic], outputs=[flink_out]),
        run_event("START", at(10), run_id(2), ("spark", "stats"), inputs=[spark_in]),
        run_event("START", at(20), run_id(3), ("connect", "sink"), inputs=[other_cluster_name]),
    ]


def _aliases(spark: SparkSession, events: list[dict[str, Any]], max_iterations: int = 3) -> DataFrame:
    # Components here have diameter <= 4; fewer rounds keep the tests fast (the demo test runs the default).
    mentions = model.dataset_mentions(events_df(spark, events)).localCheckpoint()
    return model.dataset_aliases(mentions, RULES, max_iterations=max_iterations)


def test_canonical_dataset_does_not_depend_on_arrival_order(spark: SparkSession) -> None:
    events = _lab_datasets()
    forward = _aliases(spark, events)
    backward = _aliases(spark, events[::-1])
    assert_df_equality(forward, backward, ignore_row_order=True)


def test_lab_names_merge_into_one_dataset_each(spark: SparkSession) -> None:
    rows = _aliases(spark, _lab_datasets()[::-1]).collect()
    got = {
        (r.alias_namespace, r.alias_name): (r.dataset_namespace, r.dataset_name, r.alias_kind) for r in rows
    }
    iceberg, topic = ("s3://warehouse", "default.db/orders"), (KAFKA, "orders")
    assert got == {
        ("s3://warehouse", "default.db/orders"): (*iceberg, "self"),
        ("s3a://warehouse", "default.db/orders/"): (*iceberg, "normalized"),
        (HIVE, "default.orders"): (*iceberg, "symlink"),
        (KAFKA, "orders"): (*topic, "self"),
        (KAFKA, "default_catalog.default_database.orders"): (*topic, "symlink"),
        ("kafka://broker:9092", "orders"): (*topic, "alias_rule"),
    }
    assert len({r.dataset_id for r in rows}) == 2


def test_reported_name_wins_over_a_smaller_symlink_only_name(spark: SparkSession) -> None:
    # "hive://..." sorts before "s3://...", but it is only ever a symlink: the storage name is canonical.
    events = [
        run_event("START", at(0), run_id(1), outputs=[dataset("s3://b", "t", symlinks=[(HIVE, "a.t")])])
    ]
    rows = _aliases(spark, events).collect()
    assert {(r.dataset_namespace, r.dataset_name) for r in rows} == {("s3://b", "t")}


def test_symlink_chains_form_one_component(spark: SparkSession) -> None:
    # a ~ X ~ b ~ Y ~ c: four hops, needs several propagation rounds.
    events = [
        run_event("START", at(0), run_id(1), outputs=[dataset("s3://c", "t", symlinks=[(HIVE, "y")])]),
        run_event(
            "START", at(1), run_id(2), outputs=[dataset("s3://b", "t", symlinks=[(HIVE, "x"), (HIVE, "y")])]
        ),
        run_event("START", at(2), run_id(3), outputs=[dataset("s3://a", "t", symlinks=[(HIVE, "x")])]),
    ]
    rows = _aliases(spark, events, max_iterations=4).collect()
    assert {(r.dataset_namespace, r.dataset_name) for r in rows} == {("s3://a", "t")}
    assert len(rows) == 5


def test_build_stops_label_rounds_once_they_settle(
    spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    # The build materialises each round and stops at the first that changes nothing: same rows as all
    # rounds lazily, in fewer rounds; a cap below what the component needs stops it like the lazy version.
    events = [
        run_event("START", at(0), run_id(1), outputs=[dataset("s3://c", "t", symlinks=[(HIVE, "y")])]),
        run_event(
            "START", at(1), run_id(2), outputs=[dataset("s3://b", "t", symlinks=[(HIVE, "x"), (HIVE, "y")])]
        ),
        run_event("START", at(2), run_id(3), outputs=[dataset("s3://a", "t", symlinks=[(HIVE, "x")])]),
        run_event("START", at(3), run_id(4), inputs=[dataset("kafka://broker:9092", "orders")]),
    ]
    mentions = model.dataset_mentions(events_df(spark, events)).localCheckpoint()
    build = _Build(spark, load_settings(), at(100))
    with caplog.at_level(logging.INFO, logger="lineage.batch.build"):
        settled = build._aliases(mentions, RULES, 10)
        assert_df_equality(
            settled, model.dataset_aliases(mentions, RULES, max_iterations=10), ignore_row_order=True
        )
    rounds = [r.getMessage() for r in caplog.records if "settled after" in r.getMessage()]
    assert len(rounds) == 1 and int(rounds[0].split("after ")[1].split()[0]) < 10
    capped = build._aliases(mentions, RULES, 1)
    assert_df_equality(
        capped, model.dataset_aliases(mentions, RULES, max_iterations=1), ignore_row_order=True
    )
    assert capped.select("dataset_id").distinct().count() > settled.select("dataset_id").distinct().count()


def _renamed(namespace: str, name: str, previous: tuple[str, str]) -> dict[str, Any]:
    renamed = dataset(namespace, name)
    state = {
        "lifecycleStateChange": "RENAME",
        "previousIdentifier": {"namespace": previous[0], "name": previous[1]},
    }
    return {**renamed, "facets": {**renamed["facets"], "lifecycleStateChange": state}}


def test_alias_graph_news_name_what_would_relabel(spark: SparkSession) -> None:
    # The build skips re-labelling when the new mentions' graph adds nothing to the stored one.
    warehouse = ("s3://warehouse", "default.db/orders")
    known = [
        run_event(
            "COMPLETE",
            at(0),
            run_id(1),
            inputs=[dataset(KAFKA, "orders")],
            outputs=[dataset(*warehouse, symlinks=[(HIVE, "default.orders")])],
        ),
        run_event(
            "COMPLETE", at(1), run_id(2), outputs=[_renamed("s3://lake", "mart", ("s3://lake", "mart_old"))]
        ),
    ]
    mentions = model.dataset_mentions(events_df(spark, known)).localCheckpoint()
    graph = model.alias_graph(mentions, RULES)
    nodes = graph.labels.select(
        "node_namespace", "node_name", F.col("label.rank").alias("rank")
    ).localCheckpoint()
    links = graph.edges.where((F.col("src_ns") != F.col("dst_ns")) | (F.col("src_n") != F.col("dst_n")))
    links = links.localCheckpoint()
    aliases = model.dataset_aliases(mentions, RULES, max_iterations=3).localCheckpoint()

    def news(*outputs: dict[str, Any], inputs: tuple[dict[str, Any], ...] = ()) -> set[tuple[str, str, str]]:
        event = run_event("COMPLETE", at(9), run_id(9), inputs=list(inputs), outputs=list(outputs))
        new_mentions = model.dataset_mentions(events_df(spark, [event])).localCheckpoint()
        new_graph = model.alias_graph(new_mentions, RULES)
        return {tuple(r) for r in model.alias_graph_news(new_graph, nodes, links, aliases).collect()}

    # Known names, symlinks and renames again (a later run): nothing new.
    assert (
        news(
            dataset(*warehouse, symlinks=[(HIVE, "default.orders")]),
            _renamed("s3://lake", "mart", ("s3://lake", "mart_old")),
            inputs=(dataset(KAFKA, "orders"),),
        )
        == set()
    )
    # A spelling an alias rule maps onto a known node: only a new alias.
    assert news(inputs=(dataset("kafka://broker:9092", "orders"),)) == {
        ("alias", "kafka://broker:9092", "orders")
    }
    # A new symlink: a node, its links both ways and an alias.
    assert news(dataset(*warehouse, symlinks=[(HIVE, "other.orders")])) == {
        ("node", HIVE, "other.orders"),
        ("link", HIVE, "other.orders"),
        ("link", *warehouse),
        ("alias", HIVE, "other.orders"),
    }
    # Another spelling of a known name: a new alias of a known node.
    assert news(dataset("s3a://warehouse/", "default.db/orders/")) == {
        ("alias", "s3a://warehouse/", "default.db/orders/")
    }
    # A name known only as a RENAME's previous one, now reported: a better rank and another alias kind.
    assert news(dataset("s3://lake", "mart_old")) == {
        ("node", "s3://lake", "mart_old"),
        ("alias", "s3://lake", "mart_old"),
    }


@pytest.fixture(scope="module")
def schema_model(spark: SparkSession) -> dict[str, list[Row]]:
    v1, v2 = [("id", "int")], [("id", "int"), ("name", "string")]
    events = [
        dataset_event(at(0), dataset("postgres://db:5432", "shop.orders", fields=v1)),
        run_event(
            "COMPLETE", at(10), run_id(2), outputs=[dataset("postgres://db:5432", "shop.orders", fields=v1)]
        ),
        run_event(
            "COMPLETE", at(10), run_id(1), outputs=[dataset("postgres://db:5432", "shop.orders", fields=v1)]
        ),
        run_event(
            "COMPLETE", at(50), run_id(3), outputs=[dataset("postgres://DB:5432/", "shop.orders", fields=v2)]
        ),
        run_event("COMPLETE", at(60), run_id(4), inputs=[dataset("postgres://db:5432", "shop.orders")]),
    ]
    mentions = model.dataset_mentions(events_df(spark, events)).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=2).localCheckpoint()
    return {
        "datasets": model.datasets(mentions, aliases).collect(),
        "schemas": sorted(model.dataset_schemas(mentions, aliases).collect(), key=lambda r: r.version),
    }


def test_dataset_has_latest_schema_and_alias_count(schema_model: dict[str, list[Row]]) -> None:
    [ds] = schema_model["datasets"]
    assert (ds.namespace, ds.name, ds.alias_count) == ("postgres://db:5432", "shop.orders", 2)
    assert [f.name for f in ds.schema_fields] == ["id", "name"]
    assert (utc(ds.first_seen), utc(ds.last_seen)) == (at(0), at(60))


def test_schema_versions_with_first_seen_and_first_run(schema_model: dict[str, list[Row]]) -> None:
    got = [
        (s.version, len(s.schema_fields), utc(s.first_seen), utc(s.last_seen), s.first_run_id)
        for s in schema_model["schemas"]
    ]
    # v1 first came from a DatasetEvent (no run); its first run is the smaller id of the two tied runs.
    assert got == [(1, 1, at(0), at(10), run_id(1)), (2, 2, at(50), at(50), run_id(3))]
    assert schema_model["datasets"][0].schema_hash == schema_model["schemas"][1].schema_hash


def test_folding_later_mentions_equals_recomputing_every_mention(spark: SparkSession) -> None:
    """fold_datasets / fold_schemas over rows built from old mentions and the new, later mentions give the
    rows datasets / dataset_schemas compute from all of them: schema kept or replaced, a schema seen again,
    a new version numbered after the old ones, a first run found for a schema only a DatasetEvent had."""
    v1, v2, v3 = [("id", "int")], [("id", "int"), ("name", "string")], [("id", "bigint")]
    old_events = [
        run_event("START", at(0), run_id(1), ("ns", "a"), outputs=[dataset("s3://b", "t1", fields=v1)]),
        run_event("COMPLETE", at(10), run_id(1), ("ns", "a"), outputs=[dataset("s3://b", "t1", fields=v2)]),
        dataset_event(at(20), dataset("s3://b", "t2", fields=v1)),
        run_event("START", at(30), run_id(2), ("ns", "b"), inputs=[dataset("s3://b", "t3", fields=v1)]),
    ]
    new_events = [
        # t1: the older schema again, then a third one; t2: its DatasetEvent schema from a run at last;
        # t3: no schema in the new mentions.
        run_event("START", at(100), run_id(3), ("ns", "a"), outputs=[dataset("s3://b", "t1", fields=v1)]),
        run_event("COMPLETE", at(110), run_id(3), ("ns", "a"), outputs=[dataset("s3://b", "t1", fields=v3)]),
        run_event("START", at(120), run_id(4), ("ns", "c"), inputs=[dataset("s3://b", "t2", fields=v1)]),
        run_event("COMPLETE", at(130), run_id(2), ("ns", "b"), inputs=[dataset("s3://b", "t3")]),
    ]
    old = model.dataset_mentions(events_df(spark, old_events)).localCheckpoint()
    new = model.dataset_mentions(events_df(spark, new_events)).localCheckpoint()
    every = old.unionByName(new)
    # No symlinks: one round settles the labels; collected so the plans below stay small.
    computed = model.dataset_aliases(every, max_iterations=1)
    aliases = spark.createDataFrame(computed.collect(), computed.schema)

    folded = model.fold_datasets(model.datasets(new, aliases), model.datasets(old, aliases))
    assert_df_equality(folded, model.datasets(every, aliases), ignore_row_order=True, ignore_nullable=True)
    schemas = model.fold_schemas(model.dataset_schemas(new, aliases), model.dataset_schemas(old, aliases))
    recomputed = model.dataset_schemas(every, aliases)
    touched = model.dataset_schemas(new, aliases).select("dataset_id").distinct()
    assert_df_equality(
        schemas,
        recomputed.join(touched, "dataset_id", "left_semi"),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert schemas.count() == 4  # t1: v1, v2, v3 (version 3); t2: v1 (now with its first run); t3 untouched
    t2 = schemas.where(F.col("first_job_name") == "c").collect()
    assert len(t2) == 1 and t2[0].first_run_id == run_id(4) and t2[0].version == 1
