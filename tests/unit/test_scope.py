# ruff: noqa: E501  (the inline tables read best one row per line)
"""API keys scoped to namespaces: the glob matching, the keys' principals, the intake's check, the read
index as a scoped key sees it (lists, walks and their withheld counts, 404s), on small inline data."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pytest
from aiohttp.test_utils import TestClient, TestServer

from lineage.query import answers
from lineage.query.errors import UnknownNode
from lineage.serve import marquez
from lineage.serve.app import ConfigurationError, api_keys, create_app
from lineage.serve.auth import ANONYMOUS, ApiKeys, Principal, Scope, hash_key
from lineage.serve.index import IndexedStore
from lineage.serve.read import READ
from lineage.serve.scope import (
    NameMask,
    ScopedStore,
    hidden_terms,
    out_of_scope,
    prune,
    scoped_store,
    visible_json,
)
from lineage.settings import ApiKeySettings, Settings

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")
S = pa.string()
SCOPE = Scope(("team-a", "s3://a-*"))
# Every name the scoped key must never see (namespaces, names and aliases out of its scope).
HIDDEN = ("team-b", "b_report", "orchestrator", "s3://b-bucket", "b_out", "hive://b-meta", "b_alias_of_raw")


def test_globs_match_whole_namespaces_case_sensitively() -> None:
    assert SCOPE.allows("team-a") and SCOPE.allows("s3://a-lake") and SCOPE.allows("s3://a-")
    assert not SCOPE.allows("team-a2") and not SCOPE.allows("Team-A") and not SCOPE.allows("x-team-a")
    assert not SCOPE.allows("s3://b-bucket") and not SCOPE.allows(None)
    assert Scope(("kafka://broker-?:9092", "[xy]*")).allows("kafka://broker-1:9092")
    assert Scope(("[xy]*",)).allows("y") and not Scope(("[xy]*",)).allows("z")
    assert Scope().allows("anything") and Scope().unlimited and Scope().allows(None)
    assert not Scope(()).allows("team-a") and not Scope(()).unlimited  # an empty list: nothing


def test_keys_carry_their_principal_and_unscoped_keys_keep_full_access() -> None:
    limited = Principal("team-a", SCOPE, frozenset({"read"}))
    keys = ApiKeys([hash_key("full")], [(hash_key("scoped").upper(), limited)])
    assert keys.authenticate("Bearer full") == ANONYMOUS and ANONYMOUS.scope.unlimited
    assert keys.authenticate("Bearer scoped") == limited
    assert not limited.may("write") and limited.may("read")
    assert keys.authenticate("Bearer other") is None and keys.authenticate(None) is None
    assert keys.allows("Bearer scoped") and not keys.allows("Basic scoped")
    assert ApiKeys([]).authenticate(None) == ANONYMOUS
    with pytest.raises(ValueError, match="configured twice"):
        ApiKeys([hash_key("k")], [(hash_key("k"), limited)])


def test_the_settings_make_the_principals() -> None:
    entries = [
        ApiKeySettings(digest=hash_key("r"), name="readers", namespaces=["team-a"], access=["read"]),
        ApiKeySettings(digest=hash_key("w"), name="writers", namespaces=["s3://a-*", "team-a"]),
    ]
    base = Settings()
    config = base.model_copy(update={"serve": base.serve.model_copy(update={"api_keys": entries})})
    keys = api_keys(config)
    assert keys.authenticate("Bearer r") == Principal("readers", Scope(("team-a",)), frozenset({"read"}))
    writer = keys.authenticate("Bearer w")
    assert writer is not None and writer.may("write") and writer.may("read")
    assert writer.scope == Scope(("s3://a-*", "team-a"))
    with pytest.raises(ValueError, match="SHA-256"):
        ApiKeySettings(digest="not-a-digest")
    twice = [*entries, ApiKeySettings(digest=hash_key("r"))]
    with pytest.raises(ConfigurationError, match="configured twice"):
        api_keys(config.model_copy(update={"serve": config.serve.model_copy(update={"api_keys": twice})}))


def _event(job_namespace: str, inputs: list[str] = (), outputs: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "eventType": "START",
        "job": {"namespace": job_namespace, "name": "j"},
        "inputs": [{"namespace": n, "name": "i"} for n in inputs],
        "outputs": [{"namespace": n, "name": "o"} for n in outputs],
    }


def test_the_intake_check_names_what_is_out_of_scope() -> None:
    assert out_of_scope(_event("team-a", ["s3://a-lake"], ["s3://a-lake"]), SCOPE) is None
    assert out_of_scope(_event("team-b"), SCOPE) == "namespace outside this key's scope: team-b"
    why = out_of_scope(_event("team-a", ["s3://b-bucket"], ["hive://b-meta"]), SCOPE)
    assert why == "namespaces outside this key's scope: hive://b-meta, s3://b-bucket"
    assert out_of_scope({"dataset": {"namespace": "s3://a-lake", "name": "t"}}, SCOPE) is None
    assert "names no job or dataset namespace" in (out_of_scope(None, SCOPE) or "")
    assert "names no job or dataset namespace" in (out_of_scope({"job": {"name": "x"}}, SCOPE) or "")
    assert out_of_scope(None, Scope()) is None  # an unscoped key: the validation alone decides


def test_prune_takes_out_every_object_naming_a_hidden_namespace() -> None:
    event = _event("team-a", ["s3://a-lake", "s3://b-bucket"])
    event["run"] = {
        "facets": {"parent": {"job": {"namespace": "team-b", "name": "orchestrator"}, "run": {"runId": "r"}}}
    }
    event["outputs"] = [
        {"namespace": "s3://a-lake", "name": "o", "facets": {"symlinks": {"identifiers": [
            {"namespace": "hive://b-meta", "name": "b_alias_of_raw"}, {"namespace": "s3://a-lake", "name": "x"}]}}}
    ]  # fmt: skip
    pruned = prune(event, SCOPE)
    text = json.dumps(pruned)
    assert not [name for name in HIDDEN if name in text]
    assert pruned["inputs"] == [{"namespace": "s3://a-lake", "name": "i"}]
    assert pruned["run"]["facets"]["parent"] == {"run": {"runId": "r"}}
    assert pruned["outputs"][0]["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "s3://a-lake", "name": "x"}
    ]
    assert prune(event, None) is event


def _table(rows: list[dict], schema: list[tuple[str, pa.DataType]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema(schema))


def two_teams() -> IndexedStore:
    """raw (s3://a-lake) -> team-a/load -> clean (s3://a-lake) -> team-b/b_report -> b_out (s3://b-bucket)
    -> team-a/publish -> final (s3://a-lake); raw is also hive://b-meta/b_alias_of_raw; load's run is a
    child of team-b/orchestrator's."""
    ds = [
        ("a1", "s3://a-lake", "raw"),
        ("a2", "s3://a-lake", "clean"),
        ("b1", "s3://b-bucket", "b_out"),
        ("a3", "s3://a-lake", "final"),
    ]
    datasets = _table(
        [{"dataset_id": i, "namespace": n, "name": m, "first_seen": T0, "last_seen": T0} for i, n, m in ds],
        [("dataset_id", S), ("namespace", S), ("name", S), ("first_seen", TS), ("last_seen", TS)],
    )
    aliases = _table(
        [{"alias_namespace": n, "alias_name": m, "dataset_id": i, "alias_kind": "self"} for i, n, m in ds]
        + [
            {
                "alias_namespace": "hive://b-meta",
                "alias_name": "b_alias_of_raw",
                "dataset_id": "a1",
                "alias_kind": "symlink",
            }
        ],
        [("alias_namespace", S), ("alias_name", S), ("dataset_id", S), ("alias_kind", S)],
    )
    job_rows = [("team-a", "load", "team-b", "orchestrator"), ("team-b", "b_report", None, None),
                ("team-a", "publish", None, None), ("team-b", "orchestrator", None, None)]  # fmt: skip
    jobs = _table(
        [{"job_namespace": a, "job_name": b, "parent_job_namespace": c, "parent_job_name": d, "first_seen": T0,
          "last_seen": T0, "tags": [{"key": f"owner-{b}", "value": None}]} for a, b, c, d in job_rows],
        [("job_namespace", S), ("job_name", S), ("parent_job_namespace", S), ("parent_job_name", S),
         ("first_seen", TS), ("last_seen", TS), ("tags", pa.list_(pa.struct([("key", S), ("value", S)])))],
    )  # fmt: skip
    summary = _table(
        [{"job_namespace": a, "job_name": b} for a, b, _, _ in job_rows],
        [("job_namespace", S), ("job_name", S), ("last_run_state", S), ("last_run_id", S),
         ("last_run_reported_state", S), ("run_count", pa.int64()), ("lost_runs", pa.int64()), ("failed_runs", pa.int64())],
    )  # fmt: skip
    edge_rows = [("team-a", "load", "a1", "input"), ("team-a", "load", "a2", "output"), ("team-b", "b_report", "a2", "input"),
                 ("team-b", "b_report", "b1", "output"), ("team-a", "publish", "b1", "input"), ("team-a", "publish", "a3", "output")]  # fmt: skip
    edges = _table(
        [
            {"job_namespace": a, "job_name": b, "dataset_id": c, "direction": d, "first_seen": T0}
            for a, b, c, d in edge_rows
        ],
        [("job_namespace", S), ("job_name", S), ("dataset_id", S), ("direction", S), ("first_seen", TS)],
    )
    column_edges = _table(
        [{"source_dataset_id": s, "source_field": "x", "target_dataset_id": t, "target_field": "x", "job_namespace": a,
          "job_name": b, "subtypes": [], "is_direct": True, "transformations": [], "first_seen": T0}
         for s, t, a, b in [("a1", "a2", "team-a", "load"), ("a2", "b1", "team-b", "b_report"), ("b1", "a3", "team-a", "publish")]],
        [("source_dataset_id", S), ("source_field", S), ("target_dataset_id", S), ("target_field", S),
         ("job_namespace", S), ("job_name", S), ("subtypes", pa.list_(S)), ("is_direct", pa.bool_()),
         ("transformations", pa.list_(pa.struct([("type", S)]))), ("first_seen", TS)],
    )  # fmt: skip
    run_cols = ["run_id", "job_namespace", "job_name", "parent_run_id", "parent_job_namespace", "parent_job_name",
                "root_run_id", "root_job_namespace", "root_job_name"]  # fmt: skip
    runs = _table(
        [dict(zip(run_cols, r, strict=True)) | {"reported_state": "COMPLETE", "inferred_state": "COMPLETE",
                                                "started_at": T0, "last_event_at": T0}
         for r in [("11111111-1111-4111-8111-111111111111", "team-a", "load", "99999999-9999-4999-8999-999999999999",
                    "team-b", "orchestrator", "99999999-9999-4999-8999-999999999999", "team-b", "orchestrator"),
                   ("99999999-9999-4999-8999-999999999999", "team-b", "orchestrator", None, None, None,
                    "99999999-9999-4999-8999-999999999999", "team-b", "orchestrator")]],
        [(c, S) for c in run_cols] + [("reported_state", S), ("inferred_state", S), ("started_at", TS), ("last_event_at", TS)],
    )  # fmt: skip
    run_io = _table(
        [{"run_id": "11111111-1111-4111-8111-111111111111", "dataset_id": "a1", "direction": "input", "first_seen": T0},
         {"run_id": "99999999-9999-4999-8999-999999999999", "dataset_id": "b1", "direction": "output", "first_seen": T0}],
        [("run_id", S), ("dataset_id", S), ("direction", S), ("first_seen", TS), ("last_seen", TS), ("row_count", pa.int64())],
    )  # fmt: skip
    deps = _table(
        [{"upstream_job_namespace": "team-a", "upstream_job_name": "load", "downstream_job_namespace": "team-b",
          "downstream_job_name": "b_report", "source": "jobDependencies"}],
        [("upstream_job_namespace", S), ("upstream_job_name", S), ("downstream_job_namespace", S),
         ("downstream_job_name", S), ("source", S)],
    )  # fmt: skip
    quality = _table(
        [{"run_id": "11111111-1111-4111-8111-111111111111", "dataset_id": "a1", "column_name": "x", "assertion": "not_null",
          "success": False, "checked_at": T0},
         {"run_id": "99999999-9999-4999-8999-999999999999", "dataset_id": "a1", "column_name": "x", "assertion": "b_check",
          "success": False, "checked_at": T0},
         {"run_id": "11111111-1111-4111-8111-111111111111", "dataset_id": "b1", "column_name": "x", "assertion": "b_check",
          "success": False, "checked_at": T0}],
        [("run_id", S), ("dataset_id", S), ("column_name", S), ("assertion", S), ("success", pa.bool_()),
         ("checked_at", TS), ("problem", S)],
    )  # fmt: skip
    tables = {"datasets": datasets, "dataset_aliases": aliases, "jobs": jobs, "job_summary": summary, "job_edges": edges,
              "column_edges": column_edges, "runs": runs, "run_io": run_io, "job_dependencies": deps,
              "quality_results": quality}  # fmt: skip
    return IndexedStore(Settings(), tables).warm()


def _leaks(answer: Any) -> list[str]:
    text = json.dumps(answer, default=str)
    return [name for name in HIDDEN if name in text]


def test_the_scoped_view_holds_only_visible_names() -> None:
    full = two_teams()
    store = scoped_store(full, SCOPE)
    assert isinstance(store, ScopedStore) and scoped_store(full, SCOPE) is store  # made once per index
    assert scoped_store(full, Scope()) is full
    assert store.job_keys == {("team-a", "load"), ("team-a", "publish")}
    assert sorted(n.name for n in store.dataset_nodes.values()) == ["clean", "final", "raw"]
    assert store.parent_jobs == {}  # load's parent is team-b's
    [run] = store.runs()
    assert run["parent_run_id"] is None and run["root_job_name"] is None
    assert store.job_dependency_rows == [] and store.run_datasets(run["run_id"])[0]["dataset_id"] == "a1"
    for answer in (
        marquez.namespace_list(store),
        marquez.sources(store),
        marquez.tags(store),
        marquez.search(store, "%", None, "name", 100),
        [marquez.job_json(store, store.job_node(*k)) for k in store.job_keys],
        [marquez.dataset_json(store, n) for n in store.dataset_nodes.values()],
        answers.run_detail(store, run["run_id"]),
    ):
        assert not _leaks(answer), answer
    assert [n["name"] for n in marquez.namespace_list(store)["namespaces"]] == ["s3://a-lake", "team-a"]
    assert marquez.search(full, "team-b", None, "name", 10)["totalCount"] == 2  # the whole index finds them
    assert marquez.search(store, "team-b", None, "name", 10)["totalCount"] == 0


def test_quality_results_are_seen_only_with_their_run_and_dataset() -> None:
    store = scoped_store(two_teams(), SCOPE)
    rows = store.rows("quality_results")
    assert [(r["dataset_id"], r["assertion"]) for r in rows] == [("a1", "not_null")]


def test_a_hidden_node_is_unknown_as_an_absent_one_with_visible_suggestions_only() -> None:
    store = scoped_store(two_teams(), SCOPE)
    for hidden in ("job:team-b/b_report", "s3://b-bucket/b_out", "hive://b-meta/b_alias_of_raw", "b_report"):
        with pytest.raises(UnknownNode) as refused:
            store.resolve(hidden)
        assert not _leaks(refused.value.suggestions)
    with pytest.raises(UnknownNode) as near:
        store.resolve("team-a/loads")
    assert near.value.suggestions[0] == "team-a/load" and not _leaks(near.value.suggestions)
    with pytest.raises(UnknownNode):
        store.run("99999999-9999-4999-8999-999999999999")


def test_walks_stop_at_hidden_nodes_and_count_what_they_withheld() -> None:
    full = two_teams()
    store = scoped_store(full, SCOPE)
    assert isinstance(store, ScopedStore)
    raw = store.resolve("s3://a-lake/raw")
    with store.counting() as withheld:
        walk = store.traverse(raw, "downstream", None, columns=True)
    # the walk stops at team-b/b_report: it, b_out, team-a/publish and final are withheld
    assert sorted(n.name for n in walk.hops) == ["clean", "load", "raw"]
    assert withheld == [4]
    assert not _leaks(answers.traversal_json(store, walk, None))
    with store.counting() as withheld:
        graph = marquez.lineage_graph(store, store.resolve("s3://a-lake/final"), 20)
    assert [n["id"] for n in graph["graph"]] == ["dataset:s3://a-lake:final", "job:team-a:publish"]
    assert withheld == [5] and not _leaks(graph)
    with store.counting() as withheld:
        columns = marquez.column_lineage(store, raw, None, 20, True)
    assert withheld == [4] and not _leaks(columns)
    with store.counting() as withheld:
        store.traverse(store.resolve("team-a/load"), "downstream", None, via="dependencies")
    assert withheld == [1]  # the dependency on team-b/b_report
    store.traverse(raw, "upstream", 3)  # outside counting(): nothing counted, nothing fails


async def _ask(
    config: Settings, store: IndexedStore, key: str, paths: list[str]
) -> list[tuple[int, dict, Any]]:
    app = create_app(config)
    async with TestClient(TestServer(app)) as client:
        app[READ].current = store
        answers = []
        for path in paths:
            response = await client.get(path, headers={"Authorization": f"Bearer {key}"})
            answers.append((response.status, dict(response.headers), await response.json()))
        return answers


def test_the_read_paths_answer_a_scoped_key_from_its_view(tmp_path: Path) -> None:
    base = Settings()
    catalog = base.catalog.model_copy(update={"sqlite_path": tmp_path / "none.db"})
    entries = [
        ApiKeySettings(digest=hash_key("a"), namespaces=list(SCOPE.patterns or ())),
        ApiKeySettings(digest=hash_key("w"), access=["write"]),
    ]
    config = base.model_copy(
        update={
            "catalog": catalog,
            "serve": base.serve.model_copy(update={"intake": False, "api_keys": entries}),
        }
    )
    q = quote
    paths = [
        "/api/v1/namespaces",
        "/api/v1/jobs",
        "/api/v1/search?q=%25",
        "/api/v1/tags",
        f"/api/v1/namespaces/{q('team-b', safe='')}/jobs",
        f"/api/v2/downstream?node={q('s3://a-lake/raw')}",
        f"/api/v1/lineage?nodeId={q('dataset:s3://a-lake:final')}",
        f"/api/v1/namespaces/{q('s3://a-lake', safe='')}/datasets/raw",
    ]
    answers = asyncio.run(_ask(config, two_teams(), "a", paths))
    assert [status for status, _, _ in answers] == [200] * len(paths)
    for _, _, body in answers:
        assert not _leaks(body), body
    (_, _, jobs), (_, _, hidden_jobs), (_, headers, down), (_, _, graph), (_, _, raw) = (
        answers[1], answers[4], answers[5], answers[6], answers[7]
    )  # fmt: skip
    assert jobs["totalCount"] == 2 and hidden_jobs == {"jobs": [], "totalCount": 0}
    assert down["withheld"] == 4 and headers["X-Lineage-Withheld-Nodes"] == "4"
    assert graph["withheld"] == 5
    assert [a["namespace"] for a in raw["aliases"]] == []  # its hive://b-meta alias is hidden
    # a hidden node and an absent one: the same 404, nothing but the asked name echoed
    hidden, absent = asyncio.run(
        _ask(
            config,
            two_teams(),
            "a",
            ["/api/v2/upstream?node=job:team-b/b_report", "/api/v2/upstream?node=job:team-x/b_report"],
        )
    )
    assert hidden[0] == absent[0] == 404
    assert hidden[2]["error"]["message"].replace("team-b", "team-x") == absent[2]["error"]["message"]
    assert hidden[2]["error"]["suggestions"] == absent[2]["error"]["suggestions"] == []
    [(status, _, body)] = asyncio.run(_ask(config, two_teams(), "w", ["/api/v1/namespaces"]))
    assert status == 403 and body["error"]["code"] == "FORBIDDEN"


def test_a_replaced_index_and_its_views_are_collected() -> None:
    full = two_teams()
    view = scoped_store(full, SCOPE)
    with view.counting():  # type: ignore[attr-defined]
        view.traverse(view.resolve("s3://a-lake/raw"), "downstream", None)
    whole, scoped = weakref.ref(full), weakref.ref(view)
    del full, view
    gc.collect()
    assert whole() is None and scoped() is None


def test_hidden_names_in_free_text_are_masked() -> None:
    mask = NameMask({"default.orders", "s3://b-bucket", "team-b"})
    assert mask("Table default.orders not found") == "Table ***HIDDEN*** not found"
    assert mask("read lake.default.orders and s3://b-bucket/x/y.csv") == (
        "read lake.***HIDDEN*** and ***HIDDEN***/x/y.csv"
    )
    assert (
        mask("job team-b/b_report failed; team-bx is another")
        == "job ***HIDDEN***/b_report failed; team-bx is another"
    )
    assert mask("nothing hidden here") == "nothing hidden here" and NameMask(set())("team-b") == "team-b"
    full = two_teams()
    store = scoped_store(full, SCOPE)
    assert isinstance(store, ScopedStore)
    assert hidden_terms(full, store) == {
        "team-b",
        "b_report",
        "orchestrator",
        "s3://b-bucket",
        "b_out",
        "hive://b-meta",
        "b_alias_of_raw",
    }
    event = {"run": {"facets": {"errorMessage": {"message": "cannot read hive://b-meta/b_alias_of_raw"}}}}
    assert visible_json(store, event) == {
        "run": {"facets": {"errorMessage": {"message": "cannot read ***HIDDEN***/***HIDDEN***"}}}
    }
    assert visible_json(full, event) is event


def test_run_error_messages_of_a_scoped_view_are_masked() -> None:
    full = two_teams()
    runs = full._tables["runs"]
    message = pa.array(["upstream team-b/b_report wrote no s3://b-bucket/b_out"] * runs.num_rows)
    tables = {**full._tables, "runs": runs.append_column("error_message", message)}
    store = scoped_store(IndexedStore(Settings(), tables).warm(), SCOPE)
    [run] = store.runs()
    assert run["error_message"] == "upstream ***HIDDEN***/***HIDDEN*** wrote no ***HIDDEN***/***HIDDEN***"
