# ruff: noqa: E501  (the inline tables read best one row per line)
"""The read API's Marquez mapping and in-memory index, on a tiny inline lineage model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from lineage.query.errors import LookupError_, UnknownNode
from lineage.serve import marquez
from lineage.serve.index import IndexedStore
from lineage.settings import Settings

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
T1 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
FIELDS = pa.list_(pa.struct([("name", pa.string()), ("type", pa.string()), ("description", pa.string())]))
KAFKA = "kafka://kafka-1:19092"
RUN_LOST, RUN_DONE = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


def _table(rows: list[dict], schema: list[tuple[str, pa.DataType]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema(schema))


def tiny_store() -> IndexedStore:
    """``topic`` (kafka, alias via broker:9092) -> job ``load`` -> ``s3://lake/t`` (field ``total`` from ``price``)."""
    datasets = _table(
        [
            {"dataset_id": "d1", "namespace": KAFKA, "name": "orders", "first_seen": T0, "last_seen": T1,
             "schema_fields": [{"name": "price", "type": "double", "description": None}]},
            {"dataset_id": "d2", "namespace": "s3://lake", "name": "db/totals", "first_seen": T1, "last_seen": T1,
             "schema_fields": [{"name": "total", "type": "double", "description": "sum"}]},
        ],
        [("dataset_id", pa.string()), ("namespace", pa.string()), ("name", pa.string()),
         ("first_seen", TS), ("last_seen", TS), ("schema_fields", FIELDS)],
    )  # fmt: skip
    aliases = _table(
        [
            {"alias_namespace": KAFKA, "alias_name": "orders", "dataset_id": "d1", "alias_kind": "self"},
            {"alias_namespace": "kafka://broker:9092", "alias_name": "orders", "dataset_id": "d1",
             "alias_kind": "alias_rule"},
            {"alias_namespace": "s3://lake", "alias_name": "db/totals", "dataset_id": "d2", "alias_kind": "self"},
        ],
        [("alias_namespace", pa.string()), ("alias_name", pa.string()), ("dataset_id", pa.string()),
         ("alias_kind", pa.string())],
    )  # fmt: skip
    jobs = _table(
        [{"job_namespace": "etl", "job_name": "load", "processing_type": "STREAMING", "first_seen": T0,
          "last_seen": T1}],
        [("job_namespace", pa.string()), ("job_name", pa.string()), ("processing_type", pa.string()),
         ("first_seen", TS), ("last_seen", TS)],
    )  # fmt: skip
    summary = _table(
        [{"job_namespace": "etl", "job_name": "load", "last_run_state": "LOST", "last_run_id": RUN_LOST,
          "last_run_reported_state": "RUNNING", "run_count": 2, "lost_runs": 1, "failed_runs": 0}],
        [("job_namespace", pa.string()), ("job_name", pa.string()), ("last_run_state", pa.string()),
         ("last_run_id", pa.string()), ("last_run_reported_state", pa.string()), ("run_count", pa.int64()),
         ("lost_runs", pa.int64()), ("failed_runs", pa.int64())],
    )  # fmt: skip
    edges = _table(
        [
            {"job_namespace": "etl", "job_name": "load", "dataset_id": "d1", "direction": "input", "first_seen": T0},
            {"job_namespace": "etl", "job_name": "load", "dataset_id": "d2", "direction": "output", "first_seen": T1},
        ],
        [("job_namespace", pa.string()), ("job_name", pa.string()), ("dataset_id", pa.string()),
         ("direction", pa.string()), ("first_seen", TS)],
    )  # fmt: skip
    column_edges = _table(
        [{"source_dataset_id": "d1", "source_field": "price", "target_dataset_id": "d2", "target_field": "total",
          "job_namespace": "etl", "job_name": "load", "subtypes": ["AGGREGATION"], "is_direct": True,
          "transformations": [{"type": "DIRECT", "subtype": "AGGREGATION", "description": None, "masking": False}],
          "first_seen": T1},
         # dataset-level: a filter on price affects every row of totals, no one field
         {"source_dataset_id": "d1", "source_field": "price", "target_dataset_id": "d2", "target_field": None,
          "job_namespace": "etl", "job_name": "load", "subtypes": ["FILTER"], "is_direct": False,
          "transformations": [{"type": "INDIRECT", "subtype": "FILTER", "description": None, "masking": False}],
          "first_seen": T1}],
        [("source_dataset_id", pa.string()), ("source_field", pa.string()), ("target_dataset_id", pa.string()),
         ("target_field", pa.string()), ("job_namespace", pa.string()), ("job_name", pa.string()),
         ("subtypes", pa.list_(pa.string())), ("is_direct", pa.bool_()),
         ("transformations", pa.list_(pa.struct([("type", pa.string()), ("subtype", pa.string()),
                                                 ("description", pa.string()), ("masking", pa.bool_())]))),
         ("first_seen", TS)],
    )  # fmt: skip
    runs = _table(
        [
            {"run_id": RUN_LOST, "job_namespace": "etl", "job_name": "load", "reported_state": "RUNNING",
             "inferred_state": "LOST", "started_at": T1, "ended_at": None, "last_event_at": T1,
             "duration_seconds": None, "liveness_reason": "silent"},
            {"run_id": RUN_DONE, "job_namespace": "etl", "job_name": "load", "reported_state": "COMPLETE",
             "inferred_state": "COMPLETE", "started_at": T0, "ended_at": T1, "last_event_at": T1,
             "duration_seconds": 3600.5, "liveness_reason": None},
        ],
        [("run_id", pa.string()), ("job_namespace", pa.string()), ("job_name", pa.string()),
         ("reported_state", pa.string()), ("inferred_state", pa.string()), ("started_at", TS), ("ended_at", TS),
         ("last_event_at", TS), ("duration_seconds", pa.float64()), ("liveness_reason", pa.string())],
    )  # fmt: skip
    run_io = _table(
        [{"run_id": RUN_DONE, "dataset_id": "d1", "direction": "input", "first_seen": T0},
         {"run_id": RUN_DONE, "dataset_id": "d2", "direction": "output", "first_seen": T1}],
        [("run_id", pa.string()), ("dataset_id", pa.string()), ("direction", pa.string()), ("first_seen", TS)],
    )  # fmt: skip
    schemas = _table(
        [
            {"dataset_id": "d2", "schema_hash": "h1", "version": 1, "first_seen": T0, "last_seen": T0,
             "schema_fields": [{"name": "total", "type": "int", "description": None}], "first_run_id": RUN_DONE},
            {"dataset_id": "d2", "schema_hash": "h2", "version": 2, "first_seen": T1, "last_seen": T1,
             "schema_fields": [{"name": "total", "type": "double", "description": "sum"}], "first_run_id": None},
        ],
        [("dataset_id", pa.string()), ("schema_hash", pa.string()), ("version", pa.int32()), ("first_seen", TS),
         ("last_seen", TS), ("schema_fields", FIELDS), ("first_run_id", pa.string())],
    )  # fmt: skip
    tables = {
        "dataset_schemas": schemas,
        "datasets": datasets,
        "dataset_aliases": aliases,
        "jobs": jobs,
        "job_summary": summary,
        "job_edges": edges,
        "column_edges": column_edges,
        "runs": runs,
        "run_io": run_io,
    }
    return IndexedStore(Settings(), tables).warm()


def test_node_ids_with_colons_in_the_namespace_and_alias_names() -> None:
    store = tiny_store()
    node, field = marquez.parse_node_id(store, f"dataset:{KAFKA}:orders")
    assert (node.dataset_id, field) == ("d1", None)
    alias, _ = marquez.parse_node_id(store, "dataset:kafka://broker:9092:orders")
    assert alias.dataset_id == "d1"
    job, _ = marquez.parse_node_id(store, "job:etl:load")
    assert (job.kind, job.name) == ("job", "load")
    column, field = marquez.parse_node_id(store, "datasetField:s3://lake:db/totals:total")
    assert (column.dataset_id, field) == ("d2", "total")


def test_unknown_node_ids_are_404_with_suggestions_and_bad_ones_400() -> None:
    store = tiny_store()
    with pytest.raises(UnknownNode) as unknown:
        marquez.parse_node_id(store, f"dataset:{KAFKA}:ordes")
    assert f"{KAFKA}/orders" in unknown.value.suggestions
    with pytest.raises(LookupError_) as bad:
        marquez.parse_node_id(store, "table:x:y")
    assert not isinstance(bad.value, UnknownNode)


def test_runs_keep_marquez_states_and_add_the_inferred_one() -> None:
    store = tiny_store()
    lost = marquez.run_json(store, store.run(RUN_LOST))
    assert (lost["state"], lost["inferredState"], lost["livenessReason"]) == ("RUNNING", "LOST", "silent")
    done = marquez.run_json(store, store.run(RUN_DONE[:8]))  # a unique prefix, as the CLI takes
    assert (done["state"], done["durationMs"]) == ("COMPLETED", 3_600_500)
    # each input and output is the dataset version in effect when the run touched it (0: no schema history)
    assert done["inputDatasetVersions"] == [
        {"datasetVersionId": {"namespace": KAFKA, "name": "orders", "version": marquez.dataset_version_id("d1", 0)},
         "facets": {}}
    ]  # fmt: skip
    assert done["outputDatasetVersions"][0]["datasetVersionId"]["version"] == marquez.dataset_version_id(
        "d2", 2
    )
    assert [r["run_id"] for r in store.runs(states=["LOST"])] == [RUN_LOST]  # filtered in memory


def test_job_and_dataset_shapes() -> None:
    store = tiny_store()
    job = marquez.job_json(store, store.job_node("etl", "load"))
    assert job["id"] == {"namespace": "etl", "name": "load"}
    assert (job["type"], job["latestRun"]["id"], job["latestRunInferredState"]) == (
        "STREAM",
        RUN_LOST,
        "LOST",
    )
    assert job["inputs"] == [{"namespace": KAFKA, "name": "orders"}]
    assert job["outputs"] == [{"namespace": "s3://lake", "name": "db/totals"}]
    topic = marquez.dataset_json(store, store.dataset_nodes["d1"])
    assert topic["type"] == "STREAM"
    assert topic["fields"] == [{"name": "price", "type": "double", "tags": [], "description": None}]
    assert topic["aliases"] == [{"namespace": "kafka://broker:9092", "name": "orders", "kind": "alias_rule"}]
    namespaces = [n["name"] for n in marquez.namespace_list(store)["namespaces"]]
    assert namespaces == ["etl", KAFKA, "s3://lake"]


def test_dataset_fields_carry_the_tags_their_producers_declared() -> None:
    store = tiny_store()
    store.datasets["d1"]["field_tags"] = [
        {"field": "price", "key": "confidential", "value": None, "source": "producer"},
        {"field": "price", "key": "owner", "value": "finance", "source": "producer"},
        {"field": "gone", "key": "pii", "value": None, "source": "producer"},  # not in the schema
    ]
    fields = marquez.dataset_json(store, store.dataset_nodes["d1"])["fields"]
    assert fields == [
        {"name": "price", "type": "double", "tags": ["confidential", "owner=finance"], "description": None}
    ]
    assert marquez.dataset_json(store, store.dataset_nodes["d2"])["fields"][0]["tags"] == []
    assert {"name": "owner=finance", "description": None} in marquez.tags(store)


def test_lineage_graph_edges_point_from_producer_to_consumer() -> None:
    store = tiny_store()
    graph = {n["id"]: n for n in marquez.lineage_graph(store, store.dataset_nodes["d2"], 5)["graph"]}
    edge_in = {"origin": f"dataset:{KAFKA}:orders", "destination": "job:etl:load"}
    edge_out = {"origin": "job:etl:load", "destination": "dataset:s3://lake:db/totals"}
    assert graph["job:etl:load"]["inEdges"] == [edge_in]
    assert graph["job:etl:load"]["outEdges"] == [edge_out]
    assert graph["dataset:s3://lake:db/totals"]["inEdges"] == [edge_out]
    assert graph["dataset:s3://lake:db/totals"]["type"] == "DATASET"


def test_a_graph_reads_the_latest_runs_of_all_its_jobs_at_once() -> None:
    tables = dict(tiny_store()._tables)
    run_report = "33333333-3333-4333-8333-333333333333"

    def more(name: str, *rows: dict) -> None:
        tables[name] = pa.concat_tables(
            [tables[name], pa.Table.from_pylist(list(rows), schema=tables[name].schema)]
        )

    more("jobs", {"job_namespace": "etl", "job_name": "report", "first_seen": T1, "last_seen": T1})
    more("job_summary", {"job_namespace": "etl", "job_name": "report", "last_run_id": run_report,
                         "last_run_state": "COMPLETE", "last_run_reported_state": "COMPLETE"})  # fmt: skip
    more(
        "job_edges", {"job_namespace": "etl", "job_name": "report", "dataset_id": "d2", "direction": "input"}
    )
    more("runs", {"run_id": run_report, "job_namespace": "etl", "job_name": "report",
                  "reported_state": "COMPLETE", "inferred_state": "COMPLETE", "started_at": T1, "last_event_at": T1})  # fmt: skip
    more("run_io", {"run_id": run_report, "dataset_id": "d2", "direction": "input", "first_seen": T1})
    store = IndexedStore(Settings(), tables).warm()
    store.job_summary[("etl", "load")]["last_run_id"] = RUN_DONE
    alone = marquez.job_json(store, store.job_node("etl", "load"))
    report = marquez.job_json(store, store.job_node("etl", "report"))
    reads: list[str] = []
    read = store.arrow

    def counted(table: str, columns: Any = None, row_filter: Any = None) -> Any:
        reads.append(table)
        return read(table, columns, row_filter)

    store.arrow = counted  # type: ignore[method-assign]
    graph = {n["id"]: n for n in marquez.lineage_graph(store, store.dataset_nodes["d2"], 5)["graph"]}
    assert graph["job:etl:load"]["data"] == alone and graph["job:etl:report"]["data"] == report
    assert report["latestRun"]["inputDatasetVersions"][0]["datasetVersionId"]["name"] == "db/totals"
    written = alone["latestRun"]["outputDatasetVersions"]
    assert [(v["datasetVersionId"]["name"], v["datasetVersionId"]["version"]) for v in written] == [
        ("db/totals", marquez.dataset_version_id("d2", 2))
    ]
    assert alone["latestRun"]["id"] == RUN_DONE and alone["currentVersion"] is not None
    assert reads.count("runs") == 1  # one read for every job of the graph, not one per job


def test_job_tags_and_latest_runs() -> None:
    store = tiny_store()
    store.jobs[("etl", "load")]["tags"] = [
        {"key": "team", "value": "finance", "source": "USER"},
        {"key": "pii", "value": None, "source": "USER"},
    ]
    job = marquez.job_json(store, store.job_node("etl", "load"))
    assert job["tags"] == ["pii", "team=finance"]
    assert [r["id"] for r in job["latestRuns"]] == [RUN_LOST]
    assert job["parentJobUuid"] is None
    store.job_summary[("etl", "load")]["last_run_id"] = None  # a job without runs
    bare = marquez.job_json(store, store.job_node("etl", "load"))
    assert bare["tags"] == ["pii", "team=finance"]
    assert "latestRuns" not in bare and bare["latestRun"] is None


def test_column_lineage_edges_follow_marquez_convention_without_dataset_level_nodes() -> None:
    store = tiny_store()
    both = marquez.column_lineage(store, store.dataset_nodes["d1"], "price", 1, True)["graph"]
    by_id = {n["id"]: n for n in both}
    price, total = f"datasetField:{KAFKA}:orders:price", "datasetField:s3://lake:db/totals:total"
    assert set(by_id) == {price, total}  # the dataset-level edge makes no "*" node
    # every edge starts at its node: inEdges lead upstream, outEdges downstream
    assert by_id[total]["inEdges"] == [{"origin": total, "destination": price}]
    assert by_id[total]["outEdges"] == []
    assert by_id[price]["outEdges"] == [{"origin": price, "destination": total}]
    assert by_id[price]["inEdges"] == []


def test_datasets_carry_their_column_lineage() -> None:
    store = tiny_store()
    totals = marquez.dataset_json(store, store.dataset_nodes["d2"])
    assert totals["columnLineage"] == [
        {"name": "total", "transformationDescription": None, "transformationType": "DIRECT",
         "inputFields": [{"namespace": KAFKA, "dataset": "orders", "field": "price",
                          "transformationDescription": None, "transformationType": "DIRECT"}]}
    ]  # fmt: skip
    assert marquez.dataset_json(store, store.dataset_nodes["d1"])["columnLineage"] is None


def test_dataset_versions_from_the_schema_history() -> None:
    store = tiny_store()
    versions = marquez.dataset_versions(store, store.dataset_nodes["d2"])
    assert [v["version"] for v in versions] == [
        marquez.dataset_version_id("d2", 2),
        marquez.dataset_version_id("d2", 1),
    ]  # newest first
    assert [f["type"] for v in versions for f in v["fields"]] == ["double", "int"]
    assert versions[1]["createdByRun"]["id"] == RUN_DONE
    assert versions[0]["createdByRun"] is None
    # a dataset never reported with a schema: one version, no fields
    (only,) = marquez.dataset_versions(store, store.dataset_nodes["d1"])
    assert (only["version"], only["fields"]) == (marquez.dataset_version_id("d1", 0), [])


def test_sources_and_tags() -> None:
    store = tiny_store()
    assert [(s["name"], s["type"]) for s in marquez.sources(store)] == [(KAFKA, "KAFKA"), ("s3://lake", "S3")]
    store.jobs[("etl", "load")]["tags"] = [{"key": "team", "value": "finance", "source": "USER"}]
    assert marquez.tags(store) == [{"name": "team=finance", "description": None}]


def test_search_sorts_and_filters_as_marquez() -> None:
    store = tiny_store()
    everything = marquez.search(store, "%", None, "update_at", 10)
    assert [r["name"] for r in everything["results"]] == ["db/totals", "load", "orders"]  # all updated at T1
    in_etl = marquez.search(store, "%", None, "name", 10, namespace="etl")
    assert [r["nodeId"] for r in in_etl["results"]] == ["job:etl:load"]
    assert marquez.search(store, "%", None, "name", 10, after=T1 + (T1 - T0))["totalCount"] == 0
    assert marquez.search(store, "%", None, "name", 10, before=T1)["totalCount"] == 0
    assert marquez.search(store, "%", None, "name", 0) == {"totalCount": 3, "results": []}


def test_column_lineage_input_fields_and_depth() -> None:
    store = tiny_store()
    graph = marquez.column_lineage(store, store.dataset_nodes["d2"], "total", 1, False)["graph"]
    total = next(n for n in graph if n["id"] == "datasetField:s3://lake:db/totals:total")["data"]
    assert total["fieldType"] == "double"
    assert [
        (f["field"], f["transformationType"], f["transformationSubtypes"]) for f in total["inputFields"]
    ] == [("price", "DIRECT", ["AGGREGATION"])]
    downstream_only = marquez.column_lineage(store, store.dataset_nodes["d1"], "price", 1, False)["graph"]
    assert downstream_only == []  # upstream of a source field: nothing, unless withDownstream
    both = marquez.column_lineage(store, store.dataset_nodes["d1"], "price", 1, True)["graph"]
    assert {n["id"] for n in both} == {
        f"datasetField:{KAFKA}:orders:price",
        "datasetField:s3://lake:db/totals:total",
    }


@pytest.mark.parametrize(
    ("pattern", "text", "hit"),
    [
        ("ord", "ORDERS", True),
        ("o%s", "orders", True),
        ("t_tals", "db/totals", True),
        ("x%", "orders", False),
    ],
)
def test_search_patterns(pattern: str, text: str, hit: bool) -> None:
    assert bool(marquez.like(pattern).search(text)) is hit


def test_search_finds_aliases_once_and_filters_by_type() -> None:
    store = tiny_store()
    found = marquez.search(store, "orders", "dataset", "name", 10)
    assert found == {
        "totalCount": 1,
        "results": [
            {"type": "DATASET", "name": "orders", "updatedAt": "2026-11-20T09:00:00Z", "namespace": KAFKA,
             "nodeId": f"dataset:{KAFKA}:orders"}
        ],
    }  # fmt: skip
    assert [r["type"] for r in marquez.search(store, "load", None, "name", 10)["results"]] == ["JOB"]
