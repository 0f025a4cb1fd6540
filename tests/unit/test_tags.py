"""Tags along column lineage (lineage.transforms.tags) on small inline column edges, and the field tags of the
tags facet as extracted with each mention.

    crm.customers.email --IDENTITY--> stage.contacts.email --IDENTITY--> mart.contacts.email_address
                                      stage.contacts.email --AGGREGATION--> mart.stats.email_count
                                      stage.contacts.email --MASKED--> mart.public.email
    crm.customers.phone --INDIRECT FILTER--> stage.contacts.email
    loop.a.x <--IDENTITY--> loop.b.x (a cycle)
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from lineage.settings import Settings, TagRule, TagSettings
from lineage.transforms import model
from lineage.transforms.tags import column_tags, tag_edges, tag_seeds
from tests.unit.model_events import at, dataset, events_df, run_event, run_id

EDGE_SCHEMA = (
    "source_dataset_id string, source_field string, target_dataset_id string, target_field string, "
    "job_namespace string, job_name string, scope string, "
    "transformations array<struct<type:string,subtype:string,description:string,masking:boolean>>, "
    "masking boolean"
)
DATASET_SCHEMA = (
    "dataset_id string, schema_fields array<struct<name:string,type:string,description:string>>, "
    "field_tags array<struct<field:string,key:string,value:string,source:string>>"
)


def _edge(src: str, tgt: str, job: str, kind: str, subtype: str, masking: bool = False) -> tuple[Any, ...]:
    (sd, sf), (td, tf) = src.rsplit(".", 1), tgt.rsplit(".", 1)
    return (sd, sf, td, tf, "etl", job, "field", [(kind, subtype, None, masking)], masking)


EDGES = [
    _edge("crm.customers.email", "stage.contacts.email", "load", "DIRECT", "IDENTITY"),
    _edge("stage.contacts.email", "mart.contacts.email_address", "publish", "DIRECT", "IDENTITY"),
    _edge("stage.contacts.email", "mart.stats.email_count", "count", "DIRECT", "AGGREGATION"),
    _edge("stage.contacts.email", "mart.public.email", "mask", "DIRECT", "TRANSFORMATION", masking=True),
    _edge("crm.customers.phone", "stage.contacts.email", "load", "INDIRECT", "FILTER"),
    _edge("loop.a.x", "loop.b.x", "ab", "DIRECT", "IDENTITY"),
    _edge("loop.b.x", "loop.a.x", "ba", "DIRECT", "IDENTITY"),
]


def _tags(
    spark: SparkSession,
    datasets: list[tuple[Any, ...]],
    rules: dict[str, tuple[str, str, str | None]] | None = None,
    stop: tuple[str, ...] = ("AGGREGATION",),
) -> set[tuple[Any, ...]]:
    edges = spark.createDataFrame(EDGES, EDGE_SCHEMA)
    rows: DataFrame = column_tags(
        tag_seeds(spark.createDataFrame(datasets, DATASET_SCHEMA), edges, rules or {}),
        tag_edges(edges, stop),
        max_depth=5,
    )
    return {
        (
            f"{r.dataset_id}.{r.field}",
            r.tag,
            r.origin_kind,
            r.rule,
            f"{r.origin_dataset_id}.{r.origin_field}",
            r.hops,
            tuple(s.job_name for s in r.path),
        )
        for r in rows.collect()
    }


def _tagged(dataset_id: str, field: str, key: str, value: str | None = None) -> tuple[Any, ...]:
    return (dataset_id, [(field, "string", None)], [(field, key, value, "USER")])


def test_a_field_tag_flows_along_direct_edges_and_stops_at_aggregation_and_masking(
    spark: SparkSession,
) -> None:
    found = _tags(spark, [_tagged("crm.customers", "email", "pii")])
    assert found == {
        ("crm.customers.email", "pii", "facet", None, "crm.customers.email", 0, ()),
        ("stage.contacts.email", "pii", "facet", None, "crm.customers.email", 1, ("load",)),
        ("mart.contacts.email_address", "pii", "facet", None, "crm.customers.email", 2, ("load", "publish")),
    }


def test_an_indirect_edge_carries_no_tag(spark: SparkSession) -> None:
    found = _tags(spark, [_tagged("crm.customers", "phone", "pii")])
    assert {row[0] for row in found} == {"crm.customers.phone"}


def test_without_stop_subtypes_aggregation_carries_the_tag_and_masking_still_stops_it(
    spark: SparkSession,
) -> None:
    found = _tags(spark, [_tagged("crm.customers", "email", "pii")], stop=())
    reached = {row[0] for row in found}
    assert "mart.stats.email_count" in reached
    assert "mart.public.email" not in reached


def test_a_cycle_ends_where_the_tag_already_is(spark: SparkSession) -> None:
    found = _tags(spark, [_tagged("loop.a", "x", "owner", "team-a")])
    assert found == {
        ("loop.a.x", "owner", "facet", None, "loop.a.x", 0, ()),
        ("loop.b.x", "owner", "facet", None, "loop.a.x", 1, ("ab",)),
    }


def test_two_origins_of_one_tag_are_two_rows_each_with_its_path(spark: SparkSession) -> None:
    rules = {"contact": ("(?i)^e_?mail$", "pii", None)}
    found = _tags(spark, [_tagged("crm.customers", "email", "pii")], rules)
    at_mart = {row[2:] for row in found if row[0] == "mart.contacts.email_address"}
    # The rule matches the two email columns (crm from the edges, stage likewise), each an origin of its own.
    assert at_mart == {
        ("facet", None, "crm.customers.email", 2, ("load", "publish")),
        ("rule", "contact", "crm.customers.email", 2, ("load", "publish")),
        ("rule", "contact", "stage.contacts.email", 1, ("publish",)),
    }


def test_seeds_are_typed_without_rules_so_the_table_can_be_written(spark: SparkSession) -> None:
    # Iceberg v2 has no type for a column of nulls only: ``rule`` is a string even when no rule exists.
    seeds = tag_seeds(spark.createDataFrame([], DATASET_SCHEMA), spark.createDataFrame([], EDGE_SCHEMA), {})
    assert {f.name: f.dataType.simpleString() for f in seeds.schema.fields}["rule"] == "string"
    assert "void" not in seeds.schema.simpleString()


def test_a_rule_that_matches_nothing_seeds_nothing(spark: SparkSession) -> None:
    assert _tags(spark, [], {"nothing": ("^ssn$", "pii", None)}) == set()


def test_odd_tag_names_are_kept_as_given(spark: SparkSession) -> None:
    odd = ["", "pii ✓ personal", "x" * 300]
    datasets = [("crm.customers", [], [("email", key, None, None) for key in odd])]
    found = _tags(spark, datasets)
    assert {row[1] for row in found if row[0] == "mart.contacts.email_address"} == set(odd)


def test_the_tags_facet_keeps_its_field_entries_apart_from_the_dataset_ones(spark: SparkSession) -> None:
    ds = dataset("s3://crm", "customers")
    ds["facets"]["tags"] = {
        "tags": [
            {"key": "environment", "value": "production", "source": "CONFIG"},
            {"key": "classification", "value": "PII", "source": "CONFIG", "field": "email"},
            {"key": "pii", "field": "phone number ☎"},
            "not an entry",
            {"key": 5, "value": True, "field": "id"},
        ]
    }
    frame = events_df(spark, [run_event("COMPLETE", at(1), run_id(1), ("etl", "load"), outputs=[ds])])
    mentions = model.dataset_mentions(frame)
    row = mentions.where("role = 'output'").select("tags", "field_tags").first()
    assert row is not None
    # Odd entries are kept too: one that is not an object as its JSON text, a number as its text.
    assert [(t.key, t.value) for t in row.tags] == [("environment", "production"), ('"not an entry"', None)]
    assert [(t.field, t.key, t.value) for t in row.field_tags] == [
        ("email", "classification", "PII"),
        ("phone number ☎", "pii", None),
        ("id", "5", "true"),
    ]


def test_tag_settings_reject_a_bad_pattern_and_an_empty_tag() -> None:
    with pytest.raises(ValueError, match="not a regular expression"):
        TagRule(pattern="(unclosed", tag="pii")
    with pytest.raises(ValueError, match="non-empty tag name"):
        TagRule(pattern="email", tag="  ")
    settings = Settings(tags=TagSettings(stop_subtypes=["aggregation", " "]))
    assert settings.tags.stop_subtypes == ["AGGREGATION"]
