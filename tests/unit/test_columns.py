"""Column lineage (lineage.transforms.columns): column edges from the facets, end-to-end column paths."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lineage.transforms import columns, model
from tests.unit.column_events import (
    EDGES_SCHEMA,
    column_lineage,
    direct,
    indirect,
    input_field,
    legacy_field,
)
from tests.unit.model_events import (
    at,
    dataset,
    demo_event_dicts,
    events_df,
    job_event,
    run_event,
    run_id,
    utc,
)

HIVE = "hive://hive-metastore:9083"
KAFKA = "kafka://kafka-1:19092"
RULES = [("kafka://broker:9092", KAFKA)]
SRC = ("s3://lake", "src")
ICEBERG = ("s3://warehouse", "default.db/orders")


def _src(field: str, *transformations: dict[str, Any]) -> dict[str, Any]:
    return input_field(SRC, field, *transformations)


# One output dataset `s3://lake/out_<job>` per job, each facet exercising one group of rules.
FACETS: dict[str, dict[str, Any]] = {
    "direct": column_lineage(
        {
            "id": [_src("id", direct("IDENTITY"))],
            "amount": [_src("price", direct("TRANSFORMATION", "price * qty"))],
            "total": [_src("price", direct("AGGREGATION", "sum(price)"))],
            "email_hash": [_src("email", direct("TRANSFORMATION", "sha2(email)", masking=True))],
        }
    ),
    "indirect": column_lineage(
        {
            "x": [
                _src("id", direct("IDENTITY")),
                _src("k", indirect("JOIN")),
                _src("g", indirect("GROUP_BY")),
                _src("f", indirect("FILTER")),
            ],
            "y": [
                _src("s", indirect("SORT")),
                _src("w", indirect("WINDOW")),
                _src("c", indirect("CONDITIONAL", "CASE WHEN c", masking=True)),
            ],
        }
    ),
    "multi_1": column_lineage(
        {
            "x": [
                _src("a", direct("TRANSFORMATION", "a + 1"), direct("AGGREGATION", "sum"), indirect("FILTER"))
            ]
        }
    ),
    "multi_2": column_lineage({"x": [_src("a", direct("TRANSFORMATION", "a * 2"))]}),
    "legacy": column_lineage(
        {
            "l_identity": legacy_field([_src("a")], "IDENTITY", "copied"),
            "l_transformation": legacy_field([_src("b")], "TRANSFORMATION", "b + 1"),
            "l_aggregation": legacy_field([_src("c")], "AGGREGATION", "sum(c)"),
            "l_masked": legacy_field([_src("d")], "MASKED", "sha2(d)"),
            "l_custom": legacy_field([_src("e")], "concat"),
            "l_unknown": legacy_field([_src("f")], None),
        }
    ),
    "dataset": column_lineage(
        {"region": [_src("region", direct("IDENTITY"))], "total": [_src("amount", direct("AGGREGATION"))]},
        dataset=[_src("region", indirect("GROUP_BY")), _src("flag", indirect("FILTER")), _src("day")],
    ),
    # openlineage-spark < 1.23: the INDIRECT inputs repeated under every output field.
    "cartesian": column_lineage(
        {
            "a": [
                _src("a", direct("IDENTITY")),
                _src("key", indirect("JOIN")),
                _src("flag", indirect("FILTER")),
                _src("rank", indirect("SORT")),
            ],
            "b": [
                _src("b", direct("IDENTITY")),
                _src("key", indirect("JOIN")),
                _src("flag", indirect("FILTER")),
            ],
            "c": [
                _src("c", direct("IDENTITY")),
                _src("key", indirect("JOIN")),
                _src("flag", indirect("FILTER")),
            ],
        }
    ),
    "alias": column_lineage(
        {
            "p": [input_field(("s3a://warehouse", "default.db/orders/"), "price", direct("IDENTITY"))],
            "q": [input_field((HIVE, "default.orders"), "qty", direct("IDENTITY"))],
            "r": [input_field(("kafka://broker:9092,b2:9092", "clicks"), "url", direct("IDENTITY"))],
        }
    ),
    "static": column_lineage({"s": [_src("s", direct("IDENTITY"))]}),
    # Issue 37: source columns under every output field with a transformation of unknown (null) type: x as
    # dbt and Airflow's SQL parser send it (legacy facet: `transformationType` on the output field, no
    # `transformations`), y with a `transformations[]` item without `type`; z INDIRECT, a real repeat.
    "unknown_shared": column_lineage(
        {
            f: {
                "inputFields": [_src("x"), _src("y", {"subtype": "JOIN"}), _src("z", indirect("FILTER"))],
                "transformationType": "IDENTITY",
                "transformationDescription": "copied",
            }
            for f in ("a", "b")
        }
    ),
}

# The newer `lineage` dataset facet (spec LineageDatasetFacet) of `s3://lake/out_new_facet`.
NEW_FACET = {
    "fields": {
        "t": {
            "inputs": [
                {**_src("u", direct("IDENTITY")), "type": "DATASET"},
                {"namespace": "spark", "name": "generator", "type": "JOB"},
            ]
        }
    },
    "inputs": [
        {**_src("k", indirect("FILTER")), "type": "DATASET"},
        {"namespace": SRC[0], "name": SRC[1], "type": "DATASET"},  # no field: dataset-level only
    ],
}


def _out(name: str, lineage: dict[str, Any] | None = None) -> dict[str, Any]:
    return dataset("s3://lake", f"out_{name}", column_lineage=lineage)


def _run(
    n: int,
    job: str,
    lineage: dict[str, Any] | None,
    *,
    seconds: float = 0,
    inputs: Any = None,
    facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    output = _out(job, lineage)
    output["facets"].update(facets or {})
    ins = [dataset(*SRC)] if inputs is None else inputs
    return run_event("COMPLETE", at(seconds), run_id(n), ("spark", job), inputs=ins, outputs=[output])


def _scenario() -> list[dict[str, Any]]:
    iceberg_in = dataset("s3a://warehouse", "default.db/orders/", symlinks=[(HIVE, "default.orders")])
    return [
        _run(1, "direct", FACETS["direct"]),
        _run(2, "indirect", FACETS["indirect"]),
        _run(3, "multi", FACETS["multi_1"], seconds=100),
        _run(4, "multi", FACETS["multi_2"], seconds=300),
        _run(5, "legacy", FACETS["legacy"]),
        _run(6, "dataset", FACETS["dataset"]),
        _run(7, "cartesian", FACETS["cartesian"]),
        _run(8, "alias", FACETS["alias"], inputs=[iceberg_in]),
        _run(9, "new_facet", None, facets={"lineage": NEW_FACET}),
        _run(10, "unknown_shared", FACETS["unknown_shared"]),
        job_event(
            at(50), ("spark", "static"), inputs=[dataset(*SRC)], outputs=[_out("static", FACETS["static"])]
        ),
    ]


def _mentions(events: list[dict[str, Any]], spark: SparkSession) -> DataFrame:
    """Persisted mentions (as the build persists them: the aliases read them once per round)."""
    return model.dataset_mentions(events_df(spark, events)).localCheckpoint()


def _edges(mentions: DataFrame) -> DataFrame:
    aliases = model.dataset_aliases(mentions, RULES, max_iterations=2).localCheckpoint()
    return columns.column_edges(mentions, aliases, alias_rules=RULES)


def _id(namespace: str, name: str) -> str:
    """model_common.dataset_id computed in Python."""
    return hashlib.sha256(f"{namespace}\u0001{name}".encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def edges(spark: SparkSession) -> list[Row]:
    mentions = _mentions(_scenario(), spark)
    rows = _edges(mentions).collect()
    mentions.unpersist()
    return rows


def _by_job(edges: list[Row], job: str) -> dict[tuple[str | None, str | None, str], Row]:
    """(source field, target field, scope) -> edge, for the job's edges from SRC into its output."""
    got = {}
    for r in edges:
        if r.job_name == job:
            assert r.source_dataset_id == _id(*SRC)
            got[(r.source_field, r.target_field, r.scope)] = r
    return got


def _ts(row: Row) -> list[tuple[Any, ...]]:
    return [tuple(t) for t in row.transformations]


def test_direct_identity(edges: list[Row]) -> None:
    row = _by_job(edges, "direct")[("id", "id", "field")]
    assert row.target_dataset_id == _id("s3://lake", "out_direct")
    assert (_ts(row), row.is_direct, row.subtypes, row.masking) == (
        [("DIRECT", "IDENTITY", None, False)],
        True,
        ["IDENTITY"],
        False,
    )
    assert (row.run_count, utc(row.first_seen), utc(row.last_seen)) == (1, at(0), at(0))


def test_direct_transformation_keeps_its_description(edges: list[Row]) -> None:
    row = _by_job(edges, "direct")[("price", "amount", "field")]
    assert _ts(row) == [("DIRECT", "TRANSFORMATION", "price * qty", False)]


def test_direct_aggregation(edges: list[Row]) -> None:
    row = _by_job(edges, "direct")[("price", "total", "field")]
    assert (_ts(row), row.subtypes) == ([("DIRECT", "AGGREGATION", "sum(price)", False)], ["AGGREGATION"])


def test_masking_transformation_marks_the_edge(edges: list[Row]) -> None:
    row = _by_job(edges, "direct")[("email", "email_hash", "field")]
    assert (_ts(row), row.masking) == ([("DIRECT", "TRANSFORMATION", "sha2(email)", True)], True)


@pytest.mark.parametrize(
    ("source", "target", "subtype", "masking"),
    [
        ("k", "x", "JOIN", False),
        ("g", "x", "GROUP_BY", False),
        ("f", "x", "FILTER", False),
        ("s", "y", "SORT", False),
        ("w", "y", "WINDOW", False),
        ("c", "y", "CONDITIONAL", True),
    ],
)
def test_indirect_subtype_is_a_field_edge(
    edges: list[Row], source: str, target: str, subtype: str, masking: bool
) -> None:
    row = _by_job(edges, "indirect")[(source, target, "field")]
    assert [(t.type, t.subtype, t.masking) for t in row.transformations] == [("INDIRECT", subtype, masking)]
    assert (row.is_direct, row.subtypes, row.masking) == (False, [subtype], masking)


def test_several_transformations_on_one_pair_are_all_kept(edges: list[Row]) -> None:
    got = _by_job(edges, "multi")
    # One output field only: its INDIRECT FILTER is not a cartesian repeat and stays field-level.
    assert list(got) == [("a", "x", "field")]
    row = got[("a", "x", "field")]
    assert _ts(row) == [
        ("DIRECT", "AGGREGATION", "sum", False),
        ("DIRECT", "TRANSFORMATION", "a * 2", False),
        ("DIRECT", "TRANSFORMATION", "a + 1", False),
        ("INDIRECT", "FILTER", None, False),
    ]
    assert (row.is_direct, row.subtypes) == (True, ["AGGREGATION", "FILTER", "TRANSFORMATION"])
    assert (row.run_count, utc(row.first_seen), utc(row.last_seen)) == (2, at(100), at(300))


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("a", "l_identity", (None, "IDENTITY", "copied", False)),
        ("b", "l_transformation", (None, "TRANSFORMATION", "b + 1", False)),
        ("c", "l_aggregation", (None, "AGGREGATION", "sum(c)", False)),
        ("d", "l_masked", (None, "MASKED", "sha2(d)", True)),
        ("e", "l_custom", (None, "concat", None, False)),
        ("f", "l_unknown", (None, None, None, False)),
    ],
)
def test_legacy_transformation_keeps_its_type_as_given_and_is_not_direct(
    edges: list[Row], source: str, target: str, expected: tuple[Any, ...]
) -> None:
    row = _by_job(edges, "legacy")[(source, target, "field")]
    assert (_ts(row), row.is_direct) == ([expected], False)


def test_dataset_wide_dependencies_are_dataset_scope_edges_not_exploded(edges: list[Row]) -> None:
    got = {k: _ts(r) for k, r in _by_job(edges, "dataset").items()}
    assert got == {
        ("region", "region", "field"): [("DIRECT", "IDENTITY", None, False)],
        ("amount", "total", "field"): [("DIRECT", "AGGREGATION", None, False)],
        ("region", None, "dataset"): [("INDIRECT", "GROUP_BY", None, False)],
        ("flag", None, "dataset"): [("INDIRECT", "FILTER", None, False)],
        ("day", None, "dataset"): [("INDIRECT", None, None, False)],
    }


def test_indirect_input_repeated_under_every_output_field_becomes_one_dataset_edge(edges: list[Row]) -> None:
    got = {k: _ts(r) for k, r in _by_job(edges, "cartesian").items()}
    assert got == {
        ("a", "a", "field"): [("DIRECT", "IDENTITY", None, False)],
        ("b", "b", "field"): [("DIRECT", "IDENTITY", None, False)],
        ("c", "c", "field"): [("DIRECT", "IDENTITY", None, False)],
        # Under one output field only: a real field-level dependency.
        ("rank", "a", "field"): [("INDIRECT", "SORT", None, False)],
        ("key", None, "dataset"): [("INDIRECT", "JOIN", None, False)],
        ("flag", None, "dataset"): [("INDIRECT", "FILTER", None, False)],
    }


def test_unknown_type_repeated_under_every_output_field_stays_on_each_field(edges: list[Row]) -> None:
    """Issue 37: the near-cartesian rule is for INDIRECT only; a null type compared with `==` made the rule's
    condition null, and every such edge lost its target field into one `field` row with a null target."""
    got = {k: _ts(r) for k, r in _by_job(edges, "unknown_shared").items()}
    legacy = [(None, "IDENTITY", "copied", False)]
    untyped = [(None, "JOIN", None, False)]
    assert got == {
        ("x", "a", "field"): legacy,
        ("x", "b", "field"): legacy,
        ("y", "a", "field"): untyped,
        ("y", "b", "field"): untyped,
        ("z", None, "dataset"): [("INDIRECT", "FILTER", None, False)],
    }
    assert not any(r.is_direct for r in _by_job(edges, "unknown_shared").values())


def test_aliases_map_physical_and_catalog_names_to_one_dataset(edges: list[Row]) -> None:
    got = {r.target_field: r.source_dataset_id for r in edges if r.job_name == "alias"}
    assert got["p"] == got["q"] == _id(*ICEBERG)


def test_unmapped_input_gets_the_id_of_its_normalised_aliased_name(edges: list[Row]) -> None:
    [row] = [r for r in edges if r.job_name == "alias" and r.target_field == "r"]
    assert row.source_dataset_id == _id(KAFKA, "clicks")


def test_newer_lineage_facet_gives_field_and_dataset_edges(edges: list[Row]) -> None:
    got = {k: _ts(r) for k, r in _by_job(edges, "new_facet").items()}
    assert got == {
        ("u", "t", "field"): [("DIRECT", "IDENTITY", None, False)],
        ("k", None, "dataset"): [("INDIRECT", "FILTER", None, False)],
    }


def test_job_event_static_lineage_counts_no_run(edges: list[Row]) -> None:
    row = _by_job(edges, "static")[("s", "s", "field")]
    assert (row.run_count, utc(row.first_seen)) == (0, at(50))


def test_duplicated_and_shuffled_events_give_identical_edges(spark: SparkSession) -> None:
    events = _scenario()[2:8]  # multi (two runs), legacy, dataset-wide, cartesian, aliases
    shuffled = events + events[:3]
    random.Random(7).shuffle(shuffled)
    frames = [_mentions(events, spark), _mentions(shuffled, spark)]
    # Persisted so that chispa's schema check and collect evaluate each plan once.
    expected, got = (_edges(m).localCheckpoint() for m in frames)
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)
    for frame in (*frames, expected, got):
        frame.unpersist()


def test_a_facet_repeated_by_many_runs_counts_each_run_once(spark: SparkSession) -> None:
    """Facets are exploded once per distinct content; the runs and times of every copy still count."""
    same = column_lineage({"x": [_src("a", direct("IDENTITY"))]})
    changed = column_lineage(
        {"x": [_src("a", direct("TRANSFORMATION", "a + 1"))], "y": [_src("b", direct("IDENTITY"))]}
    )

    def send(kind: str, seconds: float, n: int, facet: dict[str, Any]) -> dict[str, Any]:
        return run_event(
            kind,
            at(seconds),
            run_id(n),
            ("spark", "repeat"),
            inputs=[dataset(*SRC)],
            outputs=[_out("repeat", facet)],
        )

    events = [
        send("START", 10, 11, same),
        send("COMPLETE", 11, 11, same),
        send("COMPLETE", 20, 12, same),
        send("COMPLETE", 20, 12, same),  # a duplicate
        send("COMPLETE", 30, 13, same),
        send("START", 40, 14, same),  # one run reporting both versions
        send("COMPLETE", 45, 14, changed),
    ]
    mentions = _mentions(events, spark)
    got = _by_job(_edges(mentions).collect(), "repeat")
    mentions.unpersist()
    assert sorted(got) == [("a", "x", "field"), ("b", "y", "field")]
    ax, by = got[("a", "x", "field")], got[("b", "y", "field")]
    assert _ts(ax) == [("DIRECT", "IDENTITY", None, False), ("DIRECT", "TRANSFORMATION", "a + 1", False)]
    assert (ax.run_count, utc(ax.first_seen), utc(ax.last_seen)) == (4, at(10), at(45))
    assert (by.run_count, utc(by.first_seen), utc(by.last_seen)) == (1, at(45), at(45))


# ---------------------------------------------------------------------------------------------------------
# column_paths on hand-made edges

GRAPH = [
    # chain A.a -> B.b -> C.c -> D.d -> E.e (j3 INDIRECT)
    ("A", "a", "B", "b", "j1", "field", True),
    ("B", "b", "C", "c", "j2", "field", True),
    ("C", "c", "D", "d", "j3", "field", False),
    ("D", "d", "E", "e", "j4", "field", True),
    # dataset-wide dependency: not followed
    ("A", "a", "X", None, "jx", "dataset", False),
    # 2-cycle M.m <-> N.n
    ("M", "m", "N", "n", "c1", "field", True),
    ("N", "n", "M", "m", "c2", "field", True),
    # diamond P.p -> S.s through z1, z2 (all DIRECT) and a1 (INDIRECT), a2
    ("P", "p", "Q", "q", "z1", "field", True),
    ("Q", "q", "S", "s", "z2", "field", True),
    ("P", "p", "R", "r", "a1", "field", False),
    ("R", "r", "S", "s", "a2", "field", True),
]


@pytest.fixture(scope="module")
def graph(spark: SparkSession) -> DataFrame:
    rows = [(s, sf, t, tf, "ns", job, scope, d) for s, sf, t, tf, job, scope, d in GRAPH]
    return spark.createDataFrame(rows, EDGES_SCHEMA)


@pytest.fixture(scope="module")
def paths(graph: DataFrame) -> Iterator[dict[tuple[str, str], tuple[int, list[str], bool]]]:
    yield {
        (f"{r.target_dataset_id}.{r.target_field}", f"{r.source_dataset_id}.{r.source_field}"): (
            r.hops,
            list(r.jobs),
            r.all_direct,
        )
        for r in columns.column_paths(graph, max_depth=3).collect()
    }


def test_paths_follow_several_hops_with_jobs_from_source_to_target(paths: dict[Any, Any]) -> None:
    chain = {k: v for k, v in paths.items() if k[0][0] in "BCDE"}
    assert chain == {
        ("B.b", "A.a"): (1, ["j1"], True),
        ("C.c", "B.b"): (1, ["j2"], True),
        ("C.c", "A.a"): (2, ["j1", "j2"], True),
        ("D.d", "C.c"): (1, ["j3"], False),
        ("D.d", "B.b"): (2, ["j2", "j3"], False),
        ("D.d", "A.a"): (3, ["j1", "j2", "j3"], False),
        ("E.e", "D.d"): (1, ["j4"], True),
        ("E.e", "C.c"): (2, ["j3", "j4"], False),
        ("E.e", "B.b"): (3, ["j2", "j3", "j4"], False),
    }


def test_paths_stop_at_max_depth(paths: dict[Any, Any]) -> None:
    assert ("E.e", "A.a") not in paths  # 4 hops > max_depth 3
    assert max(hops for hops, _, _ in paths.values()) == 3


def test_two_cycle_terminates_and_no_column_is_its_own_upstream(paths: dict[Any, Any]) -> None:
    cycle = {k: v for k, v in paths.items() if k[0][0] in "MN"}
    assert cycle == {("N.n", "M.m"): (1, ["c1"], True), ("M.m", "N.n"): (1, ["c2"], True)}


def test_shortest_paths_tie_break_on_jobs_and_direct_if_any_shortest_is(paths: dict[Any, Any]) -> None:
    # Two 2-hop paths: [a1, a2] (a1 INDIRECT) is the smaller job list; [z1, z2] is all DIRECT.
    assert paths[("S.s", "P.p")] == (2, ["a1", "a2"], True)


def test_dataset_scope_edges_are_not_followed(paths: dict[Any, Any]) -> None:
    assert not [k for k in paths if k[0].startswith("X.")]


def test_field_scope_edge_without_a_target_field_is_not_followed(spark: SparkSession) -> None:
    """A field-scope row with a null target field (issue 37 stored such rows; an incremental build keeps old
    ones) names no column: no path into a null column (the self-loop test let it through, `x OR NULL`)."""
    rows = [
        ("A", "a", "X", None, "ns", "bad", "field", False),
        ("A", "a", "A", None, "ns", "bad", "field", False),
        ("X", "x", "Y", "y", "ns", "j", "field", True),
    ]
    edges = spark.createDataFrame(rows, EDGES_SCHEMA)
    got = columns.column_paths(edges, max_depth=2).collect()
    assert [(r.target_dataset_id, r.target_field, r.source_field) for r in got] == [("Y", "y", "x")]


def test_checkpointing_each_round_gives_the_same_paths(graph: DataFrame) -> None:
    lazy = columns.column_paths(graph, max_depth=3)
    checkpointed = columns.column_paths(graph, max_depth=3, checkpoint=lambda df: df.localCheckpoint())
    assert_df_equality(checkpointed, lazy, ignore_row_order=True, ignore_nullable=True)


def test_caller_can_drive_rounds_and_stop_when_nothing_is_added(graph: DataFrame) -> None:
    state = columns.column_paths(graph, max_depth=1).localCheckpoint()
    rounds = 1
    while True:
        state_next = columns.extend_column_paths(state, graph, hops=rounds).localCheckpoint()
        if state_next.where(F.col("hops") == rounds + 1).isEmpty():
            break
        state, rounds = state_next, rounds + 1
    assert rounds == 4  # the longest shortest path, E.e <- A.a
    assert_df_equality(state, columns.column_paths(graph, max_depth=4), ignore_row_order=True)


def test_frontier_rounds_give_the_same_paths_as_the_whole_search(graph: DataFrame) -> None:
    frontier = found = columns.column_paths(graph, max_depth=1).localCheckpoint()
    rounds = 1
    while True:
        frontier = columns.next_column_paths(frontier, found, graph).localCheckpoint()
        if frontier.isEmpty():
            break
        assert frontier.where(F.col("hops") != rounds + 1).isEmpty()  # only new pairs, one edge longer
        found, rounds = found.unionByName(frontier), rounds + 1
    assert rounds == 4
    assert_df_equality(found, columns.column_paths(graph, max_depth=4), ignore_row_order=True)


def test_max_depth_must_be_positive(graph: DataFrame) -> None:
    with pytest.raises(ValueError, match="max_depth"):
        columns.column_paths(graph, max_depth=0)


def test_demo_total_price_traces_back_to_the_kafka_topic(spark: SparkSession) -> None:
    mentions = model.dataset_mentions(events_df(spark, demo_event_dicts())).localCheckpoint()
    aliases = model.dataset_aliases(mentions, RULES, max_iterations=4).localCheckpoint()
    # The build reads column_edges back from its table; a local checkpoint stands in for that here.
    edges = columns.column_edges(mentions, aliases, alias_rules=RULES).localCheckpoint()
    stats = _id("s3://warehouse", "default.db/supplier_stats")
    upstream = {
        (r.source_dataset_id, r.source_field): (r.hops, list(r.jobs), r.all_direct)
        for r in columns.column_paths(edges, max_depth=3)
        .where((F.col("target_dataset_id") == stats) & (F.col("target_field") == "total_price"))
        .collect()
    }
    overwrite = "supplier_stats_app.overwrite_by_expression_default_supplier_stats"
    assert upstream == {
        (_id(*ICEBERG), "price"): (1, [overwrite], True),
        (_id(KAFKA, "orders"), "price"): (2, ["iceberg-ingestion", overwrite], True),
    }
    mentions.unpersist()
