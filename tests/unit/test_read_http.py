"""The read half over real HTTP (aiohttp's test server on loopback) on the tiny inline model: API keys,
errors, the not-built state. The index is the inline one; no catalog is involved."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer

from lineage.serve import marquez
from lineage.serve.app import create_app
from lineage.serve.auth import hash_key
from lineage.serve.index import IndexedStore
from lineage.serve.read import READ, READ_POOL
from lineage.settings import Settings
from tests.unit.test_read_mapping import KAFKA, tiny_store

KEY = "read-api-test-key"


def settings(tmp_path: Path, **serve: Any) -> Settings:
    base = Settings()
    catalog = base.catalog.model_copy(update={"sqlite_path": tmp_path / "none.db"})  # no lake: never loads
    return base.model_copy(
        update={"catalog": catalog, "serve": base.serve.model_copy(update={"intake": False, **serve})}
    )


async def _ask(
    config: Settings, loaded: bool | IndexedStore, *requests: tuple[str, dict[str, str]]
) -> list[tuple[int, Any]]:
    app = create_app(config)
    async with TestClient(TestServer(app)) as client:
        if loaded:
            app[READ].current = loaded if isinstance(loaded, IndexedStore) else tiny_store()
        answers = []
        for path, headers in requests:
            response = await client.get(path, headers=headers)
            answers.append((response.status, await response.json()))
        return answers


def test_api_keys_guard_the_read_paths_when_configured(tmp_path: Path) -> None:
    config = settings(tmp_path, api_key_hashes=[hash_key(KEY)])
    path = f"/api/v1/namespaces/{KAFKA.replace('/', '%2F')}/datasets"
    (refused, body), (wrong, _), (allowed, listed) = asyncio.run(
        _ask(
            config,
            True,
            (path, {}),
            (path, {"Authorization": "Bearer nope"}),
            (path, {"Authorization": f"Bearer {KEY}"}),
        )
    )
    assert (refused, wrong, allowed) == (401, 401, 200)
    assert body["error"]["code"] == "UNAUTHORIZED"
    assert [d["name"] for d in listed["datasets"]] == ["orders"]


def test_errors_and_the_not_built_state(tmp_path: Path) -> None:
    (unknown, missing), (bad, depth) = asyncio.run(
        _ask(
            settings(tmp_path),
            True,
            ("/api/v1/lineage?nodeId=job:etl:lod", {}),
            ("/api/v1/lineage?nodeId=job:etl:load&depth=-1", {}),
        )
    )
    assert unknown == 404 and missing["error"]["suggestions"] == ["etl/load"]
    assert bad == 400 and depth["error"]["code"] == "BAD_PARAMETER"
    [(status, body)] = asyncio.run(_ask(settings(tmp_path), False, ("/api/v1/namespaces", {})))
    assert status == 503
    assert body["error"]["code"] == "LINEAGE_NOT_BUILT"
    assert "no catalog" in body["error"]["message"] or "loaded" in body["error"]["message"]


def test_walks_take_the_clis_via_granularity_and_tag(tmp_path: Path) -> None:
    # Control flow: etl/extract -> etl/load (declared); etl/load is a task of the DAG etl/dag.
    store = tiny_store()
    store.__dict__["job_dependency_rows"] = [
        {"upstream_job_namespace": "etl", "upstream_job_name": "extract", "downstream_job_namespace": "etl",
         "downstream_job_name": "load", "source": "jobDependencies"},
    ]  # fmt: skip
    store.__dict__["parent_jobs"] = {("etl", "load"): ("etl", "dag")}
    store.__dict__["dataset_tags"] = {}
    store.jobs[("etl", "load")]["tags"] = [{"key": "team", "value": "finance", "source": "USER"}]
    up = "/api/v2/upstream?node=s3://lake/db/totals&depth=3"
    answers = asyncio.run(
        _ask(
            settings(tmp_path),
            store,
            (up, {}),
            (f"{up}&via=both", {}),
            (f"{up}&granularity=parent", {}),
            (f"{up}&tag=team=finance", {}),
            (f"{up}&tag=team=sales", {}),
            ("/api/v2/runs?tag=team=finance", {}),
            ("/api/v2/runs?tag=team=sales", {}),
            (f"{up}&via=rivers", {}),
            (f"{up}&tag==x", {}),
            ("/api/v2/graph?node=etl/load&format=json&via=dependencies&direction=upstream", {}),
            ("/api/v2/graph?node=etl/load&format=svg", {}),
            ("/api/v2/graph?node=etl/load&direction=sideways", {}),
        )
    )
    assert [status for status, _ in answers[:5]] == [200] * 5
    both, untagged = answers[1][1], answers[4][1]
    names = ("plain", "both", "parent", "tagged", "untagged")
    ids = {name: {n["id"] for n in body["nodes"]} for name, (_, body) in zip(names, answers[:5], strict=True)}
    assert ids["plain"] == {"job:etl/load", f"dataset:{KAFKA}/orders"}
    assert ids["both"] == ids["plain"] | {"job:etl/extract"}
    assert [d["source"] for d in both["dependencies"]] == ["job:etl/extract"]
    assert ids["parent"] == {"job:etl/dag", f"dataset:{KAFKA}/orders"}
    assert ids["tagged"] == {"job:etl/load"}  # the dataset carries no tag; the root always stays
    assert ids["untagged"] == set() and untagged["edges"] == []
    (r0, finance), (r1, sales) = answers[5:7]
    assert (r0, r1) == (200, 200)
    assert len(finance) == 2 and sales == []  # both runs of the tagged job
    (bad_via, via_body), (bad_tag, tag_body) = answers[7:9]
    assert (bad_via, bad_tag) == (400, 400)
    assert "via must be one of datasets, dependencies, both" in via_body["error"]["message"]
    assert "not a tag" in tag_body["error"]["message"]
    status, graph = answers[9]
    assert status == 200
    assert {n["id"] for n in graph["nodes"]} >= {"job:etl/load", "job:etl/extract"}
    (bad_format, format_body), (bad_direction, direction_body) = answers[10:12]
    assert (bad_format, bad_direction) == (400, 400)
    assert "format must be one of html, dot, mermaid, json, got 'svg'" in format_body["error"]["message"]
    assert "direction must be one of both, upstream, downstream" in direction_body["error"]["message"]


def test_a_hostile_search_is_answered_and_a_long_q_refused(tmp_path: Path) -> None:
    """Issue 37: ten ``%_`` pairs made the search backtrack for minutes. A ``q`` holds at most 1,000
    characters."""
    hostile = quote("%_%_%_%_%_%_%_%_%_%_D")
    started = time.perf_counter()
    (status, found), (at_most, _), (too_long, refused) = asyncio.run(
        _ask(
            settings(tmp_path),
            True,
            (f"/api/v1/search?q={hostile}", {}),
            (f"/api/v1/search?q={'a' * 1000}", {}),
            (f"/api/v1/search?q={'a' * 1001}", {}),
        )
    )
    assert time.perf_counter() - started < 5  # the former regex: some 10 s on the tiny model's names
    assert status == 200
    assert [r["nodeId"] for r in found["results"]] == [
        "dataset:s3://lake:db/totals",
        f"dataset:{KAFKA}:orders",
    ]
    assert at_most == 200
    assert too_long == 400
    assert refused["error"] == {
        "code": "BAD_PARAMETER",
        "message": "q must be at most 1000 characters, got 1001",
    }


def test_healthz_answers_while_a_read_is_worked_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read's work runs in the read pool's threads, not on the event loop: ``/healthz`` (and the intake)
    answer while it runs; the pool ends with the app."""
    entered, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def slow_search(
        store: IndexedStore, q: str, what: str | None, sort: str, limit: int, **_: Any
    ) -> dict[str, Any]:
        seen["thread"] = threading.current_thread().name
        entered.set()
        seen["released"] = release.wait(10)  # on the event loop this would hold /healthz for 10 s
        return {"totalCount": 0, "results": []}

    monkeypatch.setattr(marquez, "search", slow_search)

    async def scenario() -> tuple[int, float, int]:
        app = create_app(settings(tmp_path))
        async with TestClient(TestServer(app)) as client:
            app[READ].current = tiny_store()
            slow = asyncio.ensure_future(client.get("/api/v1/search?q=orders"))
            assert await asyncio.to_thread(entered.wait, 10)
            started = time.perf_counter()
            health = await client.get("/healthz")
            took = time.perf_counter() - started
            release.set()
            answer = await slow
            assert app[READ_POOL].executor is not None
        assert app[READ_POOL].executor is None  # shut down by the app's lifespan
        return health.status, took, answer.status

    health, took, answered = asyncio.run(scenario())
    assert (health, answered) == (200, 200)
    assert took < 2
    assert seen == {"thread": seen["thread"], "released": True}
    assert seen["thread"].startswith("lineage-read")


LAKE, TOTALS = quote("s3://lake", safe=""), quote("db/totals", safe="")


def test_marquez_paging_search_sorts_and_the_ui_endpoints(tmp_path: Path) -> None:
    """What Marquez's web UI and client send: ``limit=0``, ``sort=UPDATE_AT``, ``/api/v1/jobs`` with
    ``lastRunStates``, tags, sources, dataset versions."""
    answers = asyncio.run(
        _ask(
            settings(tmp_path),
            True,
            ("/api/v1/namespaces?limit=0", {}),
            ("/api/v1/search?q=o&sort=UPDATE_AT&limit=0", {}),
            ("/api/v1/search?q=%25&namespace=etl&filter=JOB", {}),
            ("/api/v1/jobs?lastRunStates=RUNNING", {}),
            ("/api/v1/jobs?lastRunStates=FAILED", {}),
            ("/api/v1/jobs?lastRunStates=STUCK", {}),
            ("/api/v1/sources", {}),
            ("/api/v1/tags", {}),
            (f"/api/v1/namespaces/{LAKE}/datasets/{TOTALS}/versions", {}),
            ("/api/v1/search?q=o&sort=size", {}),
        )
    )
    statuses = [status for status, _ in answers]
    assert statuses == [200] * 5 + [400] + [200] * 3 + [400]
    assert answers[0][1] == {"namespaces": [], "totalCount": 3}
    assert answers[1][1] == {"totalCount": 3, "results": []}
    assert [r["nodeId"] for r in answers[2][1]["results"]] == ["job:etl:load"]
    assert [j["name"] for j in answers[3][1]["jobs"]] == ["load"]  # its latest run reports RUNNING
    assert answers[4][1] == {"jobs": [], "totalCount": 0}
    assert [s["name"] for s in answers[6][1]["sources"]] == [KAFKA, "s3://lake"]
    assert answers[7][1] == {"tags": [], "totalCount": 0}
    assert [v["fields"][0]["type"] for v in answers[8][1]["versions"]] == ["double", "int"]


def test_marquez_writes_are_refused_as_read_only(tmp_path: Path) -> None:
    async def scenario() -> list[tuple[int, Any, str | None]]:
        app = create_app(settings(tmp_path))
        async with TestClient(TestServer(app)) as client:
            app[READ].current = tiny_store()
            answers = []
            for method, path in (
                ("PUT", "/api/v1/namespaces/etl"),
                ("POST", "/api/v1/jobs/runs/11111111-1111-4111-8111-111111111111/complete"),
                ("PUT", "/api/v1/tags/pii"),
                ("DELETE", "/api/v1/namespaces/etl/jobs/load"),
            ):
                response = await client.request(method, path, json={})
                answers.append((response.status, await response.json(), response.headers.get("Allow")))
            return answers

    for status, body, allow in asyncio.run(scenario()):
        assert (status, body["error"]["code"], allow) == (405, "READ_ONLY", "GET, HEAD")
        assert "read-only" in body["error"]["message"]


def test_versions_of_a_dataset_and_the_chain_upstream_of_one(tmp_path: Path) -> None:
    from tests.unit.test_query_history import run_id
    from tests.unit.test_query_history import store as history_store

    (listed, versions), (chained, chain), (shallow, one), (unknown, missing), (bad, _) = asyncio.run(
        _ask(
            settings(tmp_path),
            history_store(),
            ("/api/v2/versions?node=orders", {}),
            (f"/api/v2/versions?node=summary&version={run_id(3)}", {}),
            (f"/api/v2/versions?node=summary&version={run_id(3)}&depth=0", {}),
            ("/api/v2/versions?node=orders&version=s7", {}),
            ("/api/v2/versions?node=orders&version=s1&depth=-1", {}),
        )
    )
    assert (listed, chained, shallow, unknown, bad) == (200, 200, 200, 404, 400)
    assert [(v["version"], v["run_id"]) for v in versions["versions"]] == [
        (run_id(6), run_id(6)),
        ("s2", run_id(2)),
        ("s1", run_id(1)),
    ]
    assert [(s["name"], s["version"], s["depth"]) for s in chain["steps"]] == [
        ("summary", run_id(3), 0),
        ("orders", "s1", 1),
    ]
    assert len(one["steps"]) == 1
    assert "no version 's7'" in missing["error"]["message"]


def test_diff_of_two_windows_and_a_bad_window(tmp_path: Path) -> None:
    from tests.unit.test_query_diff import NOW, ago
    from tests.unit.test_query_diff import store as diff_store

    window = f"from={quote(ago(24).isoformat())}&to={quote(NOW.isoformat())}"
    (ok, changes), (around, near), (bad, refused) = asyncio.run(
        _ask(
            settings(tmp_path),
            diff_store(),
            (f"/api/v2/diff?{window}", {}),
            (f"/api/v2/diff?{window}&node=legacy&depth=1", {}),
            (f"/api/v2/diff?from={quote(NOW.isoformat())}&to={quote(ago(1).isoformat())}", {}),
        )
    )
    assert (ok, around, bad) == (200, 200, 400)
    assert changes["dataset_edges"]["appeared"] == [
        {"source": "ns/prices", "target": "ns/orders", "job": "etl/load"}
    ]
    assert [o["job"] for o in changes["outcomes"]] == ["etl/report"]
    assert near["job_edges"] == {
        "appeared": [],
        "stopped": [{"job": "etl/old", "dataset": "ns/legacy", "direction": "output"}],
    }
    assert near["node"]["label"] == "ns/legacy" and near["depth"] == 1
    assert "must end after it starts" in refused["error"]["message"]


def test_a_diff_lists_the_first_changes_of_each_kind_unless_all_are_asked_for(tmp_path: Path) -> None:
    from tests.unit.test_query_diff import NOW, ago
    from tests.unit.test_query_diff import store as diff_store

    window = f"from={quote(ago(24).isoformat())}&to={quote(NOW.isoformat())}"
    (ok, first), (also, whole), (bad, refused) = asyncio.run(
        _ask(
            settings(tmp_path),
            diff_store(),
            (f"/api/v2/diff?{window}&limit=1", {}),
            (f"/api/v2/diff?{window}&limit=1&all=true", {}),
            (f"/api/v2/diff?{window}&limit=-1", {}),
        )
    )
    assert (ok, also, bad) == (200, 200, 400)
    assert first["limit"] == 1 and whole["limit"] is None
    assert first["counts"] == whole["counts"] and first["counts"]["job_edges"] == {
        "appeared": 3,
        "stopped": 2,
    }
    assert first["job_edges"]["appeared"] == whole["job_edges"]["appeared"][:1]
    assert len(whole["job_edges"]["appeared"]) == 3
    assert "limit must be >= 0" in refused["error"]["message"]
