"""Tags along column lineage: ``lineage.column_tags``. Pure transforms, no I/O, no actions.

A tag starts at a column (a *seed*) and flows downstream along the column edges that carry it:

- seeds: the entries of a dataset's latest tags facet that name a field (``datasets.field_tags``; origin
  ``facet``), and every ``[tags.rules]`` rule whose pattern matches a field name, of the dataset's latest
  schema or of a column edge (origin ``rule``, with the rule's name). A tag of the whole dataset (an entry
  without ``field``) stays on the dataset (``datasets.tags``) and is not given to its columns: a dataset tag
  such as ``environment=production`` says nothing about the data of a column derived from it.
- carrying edges (:func:`tag_edges`): a column edge carries a tag when it has a DIRECT transformation
  whose subtype is not one of ``stop_subtypes`` (e.g. AGGREGATION: a count of emails is not an email), and
  none of its transformations is masking. INDIRECT edges (filters, joins, sorts) never carry a tag.
- each column reached keeps, per origin, its shortest path (fewest hops, then the smallest path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lineage.transforms.column_facets import DIRECT, FIELD_SCOPE

FACET = "facet"
RULE = "rule"
# What identifies a row of ``lineage.column_tags`` (``value`` and ``rule`` may be null).
TAG_KEY = ["dataset_id", "field", "tag", "value", "origin_kind", "rule", "origin_dataset_id", "origin_field"]
STEP_TYPE = "struct<job_namespace:string,job_name:string,dataset_id:string,field:string>"
TAG_COLUMNS = [*TAG_KEY, "hops", "path"]


def _held(rows: DataFrame) -> tuple[DataFrame, Column]:
    """``rows``' keys renamed apart, and the null-safe condition that a row of the other side has them."""
    held = rows.select(*[F.col(k).alias(f"_held_{k}") for k in TAG_KEY])
    return held, reduce(lambda a, b: a & b, [F.col(k).eqNullSafe(F.col(f"_held_{k}")) for k in TAG_KEY])


def _seed(
    dataset: Column, field: Column, tag: Column, value: Column, kind: str, rule: Column
) -> list[Column]:
    return [
        dataset.alias("dataset_id"),
        field.alias("field"),
        tag.alias("tag"),
        value.alias("value"),
        F.lit(kind).alias("origin_kind"),
        rule.alias("rule"),
        dataset.alias("origin_dataset_id"),
        field.alias("origin_field"),
        F.lit(0).alias("hops"),
        F.array().cast(f"array<{STEP_TYPE}>").alias("path"),
    ]


def tag_seeds(
    datasets: DataFrame, column_edges: DataFrame, rules: Mapping[str, tuple[str, str, str | None]]
) -> DataFrame:
    """The columns where tags start.

    Args:
        datasets: rows of ``lineage.datasets`` (at least ``dataset_id, schema_fields, field_tags``).
        column_edges: rows of ``lineage.column_edges`` whose fields the rules are matched on too (a column
            known only from column lineage, e.g. of a source without a schema facet).
        rules: rule name -> (pattern, tag, value); the pattern is searched in the field name (``regexp``).

    Returns:
        :data:`TAG_COLUMNS`, ``hops`` 0 and an empty ``path``, one row per key. Facet entries are kept as
        given (any tag text, an empty one too).
    """
    facet = datasets.select("dataset_id", F.explode("field_tags").alias("t")).select(
        *_seed(
            F.col("dataset_id"),
            F.col("t.field"),
            F.col("t.key"),
            F.col("t.value"),
            FACET,
            F.lit(None).cast("string"),
        )
    )
    seeds = facet
    if rules:
        schema = datasets.select("dataset_id", F.explode("schema_fields.name").alias("field"))
        fields = (
            schema.unionByName(
                column_edges.select(
                    F.col("source_dataset_id").alias("dataset_id"), F.col("source_field").alias("field")
                )
            )
            .unionByName(
                column_edges.select(
                    F.col("target_dataset_id").alias("dataset_id"), F.col("target_field").alias("field")
                )
            )
            .where(F.col("field").isNotNull())
            .distinct()
        )
        listed = F.array(
            *[
                F.struct(
                    F.lit(name).alias("name"),
                    F.lit(pattern).alias("pattern"),
                    F.lit(tag).alias("tag"),
                    F.lit(value).cast("string").alias("value"),
                )
                for name, (pattern, tag, value) in sorted(rules.items())
            ]
        )
        matched = (
            fields.select("dataset_id", "field", F.explode(listed).alias("r"))
            .where(F.regexp(F.col("field"), F.col("r.pattern")))
            .select(
                *_seed(
                    F.col("dataset_id"),
                    F.col("field"),
                    F.col("r.tag"),
                    F.col("r.value"),
                    RULE,
                    F.col("r.name"),
                )
            )
        )
        seeds = seeds.unionByName(matched)
    return seeds.dropDuplicates(TAG_KEY)


def tag_edges(column_edges: DataFrame, stop_subtypes: Sequence[str]) -> DataFrame:
    """The column edges that carry a tag, one per (source column, target column), with the smallest job.

    Args:
        column_edges: rows of ``lineage.column_edges``.
        stop_subtypes: subtypes (upper case) of DIRECT transformations that do not carry a tag.

    Returns:
        ``source_dataset_id, source_field, target_dataset_id, target_field, job_namespace, job_name``.
    """
    stops = F.array(*[F.lit(s) for s in stop_subtypes]).cast("array<string>")
    carries = F.exists(
        "transformations",
        lambda t: (
            F.coalesce(t["type"] == DIRECT, F.lit(False))
            & ~F.coalesce(F.array_contains(stops, F.upper(t["subtype"])), F.lit(False))
        ),
    )
    kept = column_edges.where(
        (F.col("scope") == FIELD_SCOPE)
        & F.col("source_field").isNotNull()
        & F.col("target_field").isNotNull()
        & ~F.coalesce(F.col("masking"), F.lit(False))
        & carries
    )
    pair = ["source_dataset_id", "source_field", "target_dataset_id", "target_field"]
    return (
        kept.groupBy(*pair)
        .agg(F.min(F.struct("job_namespace", "job_name")).alias("_job"))
        .select(*pair, "_job.job_namespace", "_job.job_name")
    )


def next_tags(frontier: DataFrame, known: DataFrame, edges: DataFrame) -> DataFrame:
    """Tags one edge further than ``frontier`` (the rows found in the last round, all of the same hops) to
    columns that do not hold them yet from the same origin (``known``: every row found so far). A row
    reached before was reached by a path no longer than the frontier's, so only the rows new in a round can
    lead to new rows; a cycle ends when it comes back to a column already holding the tag.

    Args:
        frontier: :data:`TAG_COLUMNS` rows.
        known: at least the :data:`TAG_KEY` of every row found so far (frontier included).
        edges: output of :func:`tag_edges`.

    Returns:
        :data:`TAG_COLUMNS`: new rows only, each the shortest (then smallest) path of its key.
    """
    f, e = frontier.alias("f"), edges.alias("e")
    step = F.struct(
        F.col("e.job_namespace").alias("job_namespace"),
        F.col("e.job_name").alias("job_name"),
        F.col("e.target_dataset_id").alias("dataset_id"),
        F.col("e.target_field").alias("field"),
    )
    reached = f.join(
        e,
        (F.col("f.dataset_id") == F.col("e.source_dataset_id"))
        & (F.col("f.field") == F.col("e.source_field")),
    ).select(
        F.col("e.target_dataset_id").alias("dataset_id"),
        F.col("e.target_field").alias("field"),
        *[F.col(f"f.{c}").alias(c) for c in TAG_KEY[2:]],
        (F.col("f.hops") + 1).alias("hops"),
        F.concat(F.col("f.path"), F.array(step)).alias("path"),
    )
    held, same = _held(known)
    fresh = reached.join(held, same, "left_anti")
    return (
        fresh.groupBy(*TAG_KEY)
        .agg(F.min(F.struct("hops", "path")).alias("_p"))
        .select(*TAG_KEY, "_p.hops", "_p.path")
    )


def column_tags(seeds: DataFrame, edges: DataFrame, *, max_depth: int) -> DataFrame:
    """Every column a seed's tag reaches in at most ``max_depth`` hops, with its origin and path: the rounds
    of :func:`next_tags` chained into one plan (the build materialises each round and stops at the first
    that finds nothing, which gives the same rows).

    Args:
        seeds: output of :func:`tag_seeds`.
        edges: output of :func:`tag_edges`.
        max_depth: the most hops followed.

    Returns:
        :data:`TAG_COLUMNS`, seeds included (``hops`` 0).
    """
    found = frontier = seeds.select(*TAG_COLUMNS)
    for _ in range(max_depth):
        frontier = next_tags(frontier, found, edges)
        found = found.unionByName(frontier)
    return found
