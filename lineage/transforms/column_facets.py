"""Column-lineage facets read into typed entries, once, at extraction. Pure column expressions.

Facet (OpenLineage ``ColumnLineageDatasetFacet``, spec/facets/ColumnLineageDatasetFacet.json)::

    fields: {<output field>: {inputFields: [{namespace, name, field,
                                             transformations: [{type, subtype, description, masking}]}],
                              transformationDescription?, transformationType?}}   # the last two: legacy
    dataset: [{namespace, name, field, transformations: [...]}]                   # dataset-wide dependencies

The newer ``lineage`` dataset facet (spec/facets/LineageDatasetFacet.json: ``fields.<f>.inputs[]`` and a
dataset-wide ``inputs[]``, inputs typed ``DATASET``/``JOB``) has the same input shape and is read too.
Every path is read from the VARIANT one at a time, so a mistyped part nulls that part only. The rules that
turn entries into edges (legacy transformations, dataset scope, near-cartesian INDIRECT duplicates) are in
:mod:`lineage.transforms.columns`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from lineage.transforms.model_common import get

DIRECT = "DIRECT"
INDIRECT = "INDIRECT"
FIELD_SCOPE = "field"
DATASET_SCOPE = "dataset"

# Spark DDL type of one transformation, as kept in ``column_edges.transformations``.
TRANSFORMATION_TYPE = "struct<type:string,subtype:string,description:string,masking:boolean>"
ENTRY_TYPE = (
    "struct<target_field:string,namespace:string,name:string,field:string,transformations:array<"
    + TRANSFORMATION_TYPE
    + ">>"
)


def _transformation(node: Column) -> Column:
    # Spec enums are upper case; a producer sending "direct" means DIRECT. `masking` defaults to false (spec).
    return F.struct(
        F.upper(F.trim(get(node, "$.type"))).alias("type"),
        F.upper(F.trim(get(node, "$.subtype"))).alias("subtype"),
        get(node, "$.description").alias("description"),
        F.coalesce(get(node, "$.masking", "boolean"), F.lit(False)).alias("masking"),
    )


def _legacy_transformation(field_entry: Column) -> Column:
    """The one transformation of an input field without ``transformations`` (facet 1-0-x, dbt, Airflow's SQL
    parser).

    The first facet versions put ``transformationType`` (IDENTITY or MASKED, spec/facets/
    ColumnLineageDatasetFacet.md of 1-0-x) and ``transformationDescription`` on the output field. Whether
    the input's values flow into the output (DIRECT) or only influence it (INDIRECT) is not said, so the type
    is unknown (null); ``transformationType`` is kept as given in ``subtype`` and the description as given.
    """
    kind = get(field_entry, "$.transformationType")
    return F.struct(
        F.lit(None).cast("string").alias("type"),
        kind.alias("subtype"),
        get(field_entry, "$.transformationDescription").alias("description"),
        # Facet 1-0-x: MASKED = "a hash of the input value that doesn't expose the original value".
        F.coalesce(F.upper(kind).contains("MASK"), F.lit(False)).alias("masking"),
    )


def _input_entry(
    node: Column, target_field: Column, default: Column, type_ok: Callable[[Column], Column] | None
) -> Column:
    given = F.transform(get(node, "$.transformations", "array<variant>"), _transformation)
    transformations = F.when(F.size(given) > 0, given).otherwise(F.array(default))
    entry = F.struct(
        target_field.cast("string").alias("target_field"),
        get(node, "$.namespace").alias("namespace"),
        get(node, "$.name").alias("name"),
        get(node, "$.field").alias("field"),
        transformations.alias("transformations"),
    )
    return entry if type_ok is None else F.when(type_ok(node), entry)


def _facet_entries(v: Column, inputs_key: str, dataset_key: str, *, typed: bool) -> Column:
    """Every input of a facet (a VARIANT) as ``array<entry>``: field-level (target_field set), then
    dataset-wide (null target_field)."""
    empty = F.array().cast(f"array<{ENTRY_TYPE}>")

    def type_ok(node: Column) -> Column:
        # `lineage` facet: inputs may be JOBs (a generator job); only DATASET inputs have columns.
        return F.coalesce(F.upper(get(node, "$.type")), F.lit("DATASET")) == "DATASET"

    check = type_ok if typed else None
    fields = F.map_entries(get(v, "$.fields", "map<string,variant>"))
    field_level = F.flatten(
        F.transform(
            fields,
            lambda e: F.coalesce(
                F.transform(
                    get(e["value"], inputs_key, "array<variant>"),
                    lambda i: _input_entry(i, e["key"], _legacy_transformation(e["value"]), check),
                ),
                empty,
            ),
        )
    )
    # Dataset-wide dependencies (`dataset[]`, openlineage-spark >= 1.23 with datasetLineageEnabled) are
    # INDIRECT by definition; an entry without transformations gets one INDIRECT of unknown subtype.
    unknown_indirect = F.struct(
        F.lit(INDIRECT).alias("type"),
        F.lit(None).cast("string").alias("subtype"),
        F.lit(None).cast("string").alias("description"),
        F.lit(False).alias("masking"),
    )
    dataset_level = F.transform(
        get(v, dataset_key, "array<variant>"),
        lambda i: _input_entry(i, F.lit(None), unknown_indirect, check),
    )
    return F.filter(
        F.concat(F.coalesce(field_level, empty), F.coalesce(dataset_level, empty)),
        lambda x: x.isNotNull(),
    )


def lineage_entries(lineage: Column) -> Column:
    """Every input entry of a ``lineage`` facet, or of a DATASET entry of the job-level one (same shape), as
    ``array<ENTRY_TYPE>``: empty when it has none or is null."""
    empty = F.array().cast(f"array<{ENTRY_TYPE}>")
    return F.coalesce(_facet_entries(lineage, "$.inputs", "$.inputs", typed=True), empty)


def column_entries(column_lineage: Column, lineage: Column) -> Column:
    """Every input entry of a dataset's two column-lineage facets (VARIANTs, either may be null), as
    ``array<ENTRY_TYPE>``; null when the dataset carries neither facet."""
    empty = F.array().cast(f"array<{ENTRY_TYPE}>")
    entries = F.concat(
        F.coalesce(_facet_entries(column_lineage, "$.inputFields", "$.dataset", typed=False), empty),
        lineage_entries(lineage),
    )
    return F.when(column_lineage.isNotNull() | lineage.isNotNull(), entries)


def facet_digest(column_lineage: Column, lineage: Column) -> Column:
    """SHA-256 of the two facets' content (``to_json`` of a VARIANT writes keys sorted, so it is stable):
    identifies a distinct facet, which a job sends again on every run; null without either facet."""
    text = F.concat_ws(
        "\u0001", F.coalesce(F.to_json(column_lineage), F.lit("")), F.coalesce(F.to_json(lineage), F.lit(""))
    )
    return F.when(column_lineage.isNotNull() | lineage.isNotNull(), F.sha2(text, 256))
