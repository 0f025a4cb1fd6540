"""Property tests of column_edges (lineage.transforms.columns) on generated column-lineage facets.

Seeded random generation (no extra dependency): every run generates the same facets, so a failure is
reproducible, and the message names the generated job and its facet. Many small facets are batched into ONE
DataFrame and one ``column_edges`` run (a Spark job per example would cost minutes); each facet has its own
job and output dataset (its permuted copy another job, same output), so their edges never mix.

Generated: ``columnLineage`` facets (new form with ``transformations[]``, legacy form with
``transformationType``/``transformationDescription`` and no ``transformations``, an empty
``transformations[]``), the newer ``lineage`` facet, and both on one output; types DIRECT, INDIRECT, lower
case or padded, absent or JSON null; subtypes, descriptions, masking given or not; dataset-wide entries;
one to four output fields, inputs repeated under every output field (the near-cartesian rule's case, with
every kind of type), entries without a field (ignored).

Checked, for every facet:

- no target field lost: every output field with a usable input is the target of a field-scope edge, unless
  every one of its inputs is an INDIRECT transformation repeated under every output field, which the
  documented near-cartesian rule moves to a dataset-scope edge of that source (the whole dataset);
- scope and target agree: field scope has a target field, dataset scope none;
- the edges equal those of a plain-Python statement of the rules (``_expected``);
- the result does not depend on the order of fields, entries and transformations, nor on duplicated events:
  a permuted copy of each facet, sent three times by another job, gives the same edges.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections import defaultdict
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lineage.transforms import columns
from lineage.transforms.column_facets import column_entries, facet_digest
from tests.unit.model_events import at, run_id

SEED = 37
FACETS = 60
SOURCES = [("s3://lake", "p1"), ("s3://lake", "p2")]
SOURCE_FIELDS = ["x", "y", "z"]
OUTPUT_FIELDS = ["a", "b", "c", "d"]
ABSENT, JSON_NULL = object(), object()
TYPES: list[Any] = ["DIRECT", "INDIRECT", "direct", " Indirect ", ABSENT, JSON_NULL]
SUBTYPES: list[Any] = [ABSENT, "IDENTITY", "JOIN", "filter", JSON_NULL]
DESCRIPTIONS: list[Any] = [ABSENT, "copied", "a + 1"]
MASKINGS: list[Any] = [ABSENT, False, True]
LEGACY_TYPES: list[Any] = [ABSENT, "IDENTITY", "MASKED", "TRANSFORMATION", "masked hash"]

# A transformation as column_edges reports it: (type, subtype, description, masking).
T = tuple[str | None, str | None, str | None, bool]
# An edge of one facet: (source dataset, source field, target field or None, scope).
Key = tuple[tuple[str, str], str, str | None, str]


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not ABSENT:
        out[key] = None if value is JSON_NULL else value


def _transformation(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, choices in (
        ("type", TYPES),
        ("subtype", SUBTYPES),
        ("description", DESCRIPTIONS),
        ("masking", MASKINGS),
    ):
        _put(out, key, rng.choice(choices))
    return out


def _input(rng: random.Random) -> dict[str, Any]:
    """An input field: new form (1-2 transformations), legacy (no key) or an empty list; rarely no field."""
    ns, name = rng.choice(SOURCES)
    out: dict[str, Any] = {"namespace": ns, "name": name, "field": rng.choice(SOURCE_FIELDS)}
    kind = rng.random()
    if kind < 0.55:
        out["transformations"] = [_transformation(rng) for _ in range(rng.randint(1, 2))]
    elif kind < 0.65:
        out["transformations"] = []
    if rng.random() < 0.04:
        del out["field"]  # not a column: ignored
    return out


def _facet(rng: random.Random) -> dict[str, dict[str, Any]]:
    """``{facet name: facet}``: a columnLineage facet, a lineage facet, or both."""
    names = rng.sample(OUTPUT_FIELDS, rng.choice([1, 2, 2, 3, 3, 4]))
    # Inputs repeated, identical, under every output field: the near-cartesian rule's case.
    shared = [_input(rng) for _ in range(rng.choice([0, 1, 1, 2]))]
    fields: dict[str, dict[str, Any]] = {}
    for f in names:
        entry: dict[str, Any] = {"inputFields": [_input(rng) for _ in range(rng.randint(0, 2))] + shared}
        if rng.random() < 0.5:  # legacy: the output field's transformationType/Description
            _put(entry, "transformationType", rng.choice(LEGACY_TYPES))
            _put(entry, "transformationDescription", rng.choice(DESCRIPTIONS))
        rng.shuffle(entry["inputFields"])
        fields[f] = entry
    dataset_wide = [_input(rng) for _ in range(rng.choice([0, 0, 1, 2]))]
    form = rng.choice(["columnLineage", "columnLineage", "lineage", "both"])
    column_lineage: dict[str, Any] = {"fields": fields}
    if dataset_wide:
        column_lineage["dataset"] = dataset_wide
    if form == "columnLineage":
        return {"columnLineage": column_lineage}
    lineage = _as_lineage_facet(column_lineage, rng)
    if form == "lineage":
        return {"lineage": lineage}
    # Both facets on one output: the fields split between them, one field possibly in both.
    split = rng.randint(0, len(names))
    first = {f: fields[f] for f in names[:split]}
    second = {f: fields[f] for f in names[max(0, split - 1) :]}
    return {
        "columnLineage": {**column_lineage, "fields": first},
        "lineage": _as_lineage_facet({"fields": second}, rng),
    }


def _as_lineage_facet(column_lineage: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The same content as a ``lineage`` dataset facet (``inputs``, typed DATASET; JOB inputs ignored)."""

    def typed(i: dict[str, Any]) -> dict[str, Any]:
        return {**i, "type": "DATASET"} if rng.random() < 0.7 else dict(i)  # type defaults to DATASET

    job = {"namespace": "gen", "name": "generator", "type": "JOB"}
    fields = {}
    for f, entry in column_lineage["fields"].items():
        out = {k: v for k, v in entry.items() if k != "inputFields"}
        out["inputs"] = [typed(i) for i in entry["inputFields"]] + ([job] if rng.random() < 0.2 else [])
        fields[f] = out
    facet: dict[str, Any] = {"fields": fields}
    if column_lineage.get("dataset"):
        facet["inputs"] = [typed(i) for i in column_lineage["dataset"]]
    return facet


def _permuted(facets: dict[str, dict[str, Any]], rng: random.Random) -> dict[str, dict[str, Any]]:
    """The same facets with fields, entries and transformations in another order."""

    def shuffled(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            rng.shuffle(items)
            return {k: shuffled(v) for k, v in items}
        if isinstance(value, list):
            out = [shuffled(v) for v in value]
            rng.shuffle(out)
            return out
        return value

    return shuffled(copy.deepcopy(facets))


# ---------------------------------------------------------------------------------------------------------
# The rules in plain Python (docs/architecture.md, "Column lineage"; columns.column_edges)


def _upper(value: Any) -> str | None:
    return value.strip(" ").upper() if isinstance(value, str) else None


def _given(t: dict[str, Any]) -> T:
    return (_upper(t.get("type")), _upper(t.get("subtype")), t.get("description"), bool(t.get("masking")))


def _entries(facets: dict[str, dict[str, Any]]) -> list[tuple[str | None, tuple[str, str], str, T]]:
    """(target field or None, source dataset, source field, transformation) of both facets."""
    out = []
    for name, facet in facets.items():
        inputs_key, dataset_key = (
            ("inputFields", "dataset") if name == "columnLineage" else ("inputs", "inputs")
        )
        for target, entry in facet.get("fields", {}).items():
            kind = entry.get("transformationType")
            legacy: T = (
                None,
                kind,
                entry.get("transformationDescription"),
                "MASK" in kind.upper() if kind is not None else False,
            )
            for i in entry.get(inputs_key, []):
                if i.get("type", "DATASET") == "DATASET" and "field" in i:
                    ts = [_given(t) for t in i.get("transformations", [])] or [legacy]
                    out += [(target, (i["namespace"], i["name"]), i["field"], t) for t in ts]
        for i in facet.get(dataset_key, []):
            if i.get("type", "DATASET") == "DATASET" and "field" in i:
                ts = [_given(t) for t in i.get("transformations", [])] or [("INDIRECT", None, None, False)]
                out += [(None, (i["namespace"], i["name"]), i["field"], t) for t in ts]
    return out


def _expected(facets: dict[str, dict[str, Any]]) -> dict[Key, set[T]]:
    entries = _entries(facets)
    fields = {target for target, *_ in entries if target is not None}
    under: dict[tuple[tuple[str, str], str, T], set[str]] = defaultdict(set)
    for target, ds, field, t in entries:
        if target is not None:
            under[(ds, field, t)].add(target)
    edges: dict[Key, set[T]] = defaultdict(set)
    for target, ds, field, t in entries:
        # Near-cartesian: an INDIRECT transformation under every output field (2+) is one dataset-wide edge.
        repeated = t[0] == "INDIRECT" and len(fields) >= 2 and under[(ds, field, t)] == fields
        if target is None or repeated:
            edges[(ds, field, None, "dataset")].add(t)
        else:
            edges[(ds, field, target, "field")].add(t)
    return dict(edges)


# ---------------------------------------------------------------------------------------------------------
# One column_edges run over every generated facet


def _id(namespace: str, name: str) -> str:
    return hashlib.sha256(f"{namespace}\u0001{name}".encode()).hexdigest()[:16]


SOURCE_IDS = {_id(*ds): ds for ds in SOURCES}


def _mentions(spark: SparkSession, sent: list[tuple[int, int, str, str, dict[str, Any]]]) -> DataFrame:
    """Output mentions as :func:`~lineage.transforms.model_datasets.dataset_mentions` gives them (the
    columns column_edges reads), the column-lineage columns computed by the extraction's own functions
    (:mod:`lineage.transforms.column_facets`). Whole events are not parsed: the full extraction's plan
    costs more than everything else here, and tests/unit/test_columns.py covers that path.

    ``sent``: (output n, run n, job, event type, facets) per event.
    """
    rows = [
        (
            job,
            run_id(run),
            at(run),
            kind,
            f"out_{n}",
            *[_json(facets.get(k)) for k in ("columnLineage", "lineage")],
        )
        for n, run, job, kind, facets in sent
    ]
    schema = (
        "job_name string, run_id string, event_time timestamp, event_type string, name string, "
        "column_lineage string, lineage string"
    )
    cl, lineage = F.try_parse_json(F.col("column_lineage")), F.try_parse_json(F.col("lineage"))
    return spark.createDataFrame(rows, schema).select(
        F.lit("RunEvent").alias("event_kind"),
        "event_type",
        "event_time",
        "run_id",
        F.lit("gen").alias("job_namespace"),
        "job_name",
        F.lit("output").alias("role"),
        F.lit("s3://lake").alias("namespace"),
        "name",
        facet_digest(cl, lineage).alias("column_facet"),
        column_entries(cl, lineage).alias("column_entries"),
    )


def _json(facet: dict[str, Any] | None) -> str | None:
    return None if facet is None else json.dumps(facet)


@pytest.fixture(scope="module")
def generated() -> list[dict[str, dict[str, Any]]]:
    rng = random.Random(SEED)
    return [_facet(rng) for _ in range(FACETS)]


@pytest.fixture(scope="module")
def edges(spark: SparkSession, generated: list[dict[str, dict[str, Any]]]) -> dict[str, dict[Key, Row]]:
    """job name -> its edges, from one column_edges run. ``orig_<n>`` sends facet n once for output n;
    ``perm_<n>`` a permuted copy for the same output three times (START and COMPLETE of one run, the
    COMPLETE twice), its events spread among the others."""
    rng = random.Random(SEED + 1)
    sent = [(n, n, f"orig_{n}", "COMPLETE", facets) for n, facets in enumerate(generated)]
    for n, facets in enumerate(generated):
        again = _permuted(facets, rng)
        sent += [(n, FACETS + n, f"perm_{n}", kind, again) for kind in ("START", "COMPLETE", "COMPLETE")]
    rng.shuffle(sent)
    outputs = [("s3://lake", f"out_{n}") for n in range(FACETS)]
    aliases = spark.createDataFrame(
        [(ns, name, ns, name, _id(ns, name), "self") for ns, name in outputs],
        "alias_namespace string, alias_name string, dataset_namespace string, dataset_name string, "
        "dataset_id string, alias_kind string",
    )
    rows = columns.column_edges(_mentions(spark, sent), aliases).collect()
    out: dict[str, dict[Key, Row]] = defaultdict(dict)
    for r in rows:
        key = (SOURCE_IDS[r.source_dataset_id], r.source_field, r.target_field, r.scope)
        assert key not in out[r.job_name], f"two rows for one edge key {key} of {r.job_name}"
        out[r.job_name][key] = r
    return dict(out)


def _show(n: int, facets: dict[str, Any]) -> str:
    return f"facet {n} (seed {SEED}): {json.dumps(facets, sort_keys=True)}"


def test_scope_and_target_field_agree(edges: dict[str, dict[Key, Row]]) -> None:
    bad = [
        (job, key)
        for job, rows in edges.items()
        for key, r in rows.items()
        if (r.scope == "field") != (r.target_field is not None) or r.scope not in ("field", "dataset")
    ]
    assert bad == []


def test_no_output_field_is_lost(
    edges: dict[str, dict[Key, Row]], generated: list[dict[str, dict[str, Any]]]
) -> None:
    for n, facets in enumerate(generated):
        got = edges.get(f"orig_{n}", {})
        targets = {k[2] for k in got if k[3] == "field"}
        entries = _entries(facets)
        for field in {e[0] for e in entries if e[0] is not None} - targets:
            # Only the documented collapse may take a field's every input: each is INDIRECT and kept on a
            # dataset-scope edge of its source (which covers every column of the output).
            for target, ds, source_field, t in entries:
                if target == field:
                    collapsed = got.get((ds, source_field, None, "dataset"))
                    assert t[0] == "INDIRECT", f"{field} lost its input {source_field}: {_show(n, facets)}"
                    assert collapsed is not None, f"{field} lost its input {source_field}: {_show(n, facets)}"
                    assert t in {tuple(x) for x in collapsed.transformations}, _show(n, facets)


def test_edges_follow_the_rules(
    edges: dict[str, dict[Key, Row]], generated: list[dict[str, dict[str, Any]]]
) -> None:
    for n, facets in enumerate(generated):
        got = edges.get(f"orig_{n}", {})
        expected = _expected(facets)
        assert {k: {tuple(t) for t in r.transformations} for k, r in got.items()} == expected, _show(
            n, facets
        )
        for key, r in got.items():
            ts = [tuple(t) for t in r.transformations]
            assert len(ts) == len(set(ts)), _show(n, facets)
            assert r.is_direct is any(t[0] == "DIRECT" for t in ts), (key, _show(n, facets))
            assert r.masking is any(t[3] for t in ts), (key, _show(n, facets))
            assert r.subtypes == sorted({t[1] for t in ts if t[1] is not None}), (key, _show(n, facets))
            assert (r.run_count, r.target_dataset_id) == (1, _id("s3://lake", f"out_{n}")), _show(n, facets)


def test_order_and_duplicates_do_not_change_the_edges(
    edges: dict[str, dict[Key, Row]], generated: list[dict[str, dict[str, Any]]]
) -> None:
    def comparable(job: str) -> dict[Key, tuple[Any, ...]]:
        return {
            k: (r.transformations, r.is_direct, r.subtypes, r.masking, r.run_count)
            for k, r in edges.get(job, {}).items()
        }

    for n, facets in enumerate(generated):
        assert comparable(f"perm_{n}") == comparable(f"orig_{n}"), _show(n, facets)


def test_the_generator_covers_the_cases(generated: list[dict[str, dict[str, Any]]]) -> None:
    """Guards the generator itself: the facets exercise what the properties are about."""
    unknown_everywhere = collapsed = legacy = 0
    for facets in generated:
        entries = _entries(facets)
        fields = {e[0] for e in entries if e[0] is not None}
        under: dict[tuple[Any, ...], set[str]] = defaultdict(set)
        for target, ds, field, t in entries:
            if target is not None:
                under[(ds, field, t)].add(target)
        everywhere = {k[2][0] for k, v in under.items() if len(fields) >= 2 and v == fields}
        unknown_everywhere += None in everywhere  # issue 37's case
        collapsed += "INDIRECT" in everywhere  # the near-cartesian rule's case
        legacy += any(
            "transformationType" in f for facet in facets.values() for f in facet["fields"].values()
        )
    forms = {tuple(sorted(facets)) for facets in generated}
    assert (unknown_everywhere >= 5, collapsed >= 5, legacy >= 20) == (True, True, True)
    assert forms == {("columnLineage",), ("lineage",), ("columnLineage", "lineage")}
    types = {e[3][0] for facets in generated for e in _entries(facets)}
    assert types == {"DIRECT", "INDIRECT", None}
