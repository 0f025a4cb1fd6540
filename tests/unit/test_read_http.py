"""The read half over real HTTP (aiohttp's test server on loopback) on the tiny inline model: API keys,
errors, the not-built state. The index is the inline one; no catalog is involved."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from lineage.serve.app import create_app
from lineage.serve.auth import hash_key
from lineage.serve.read import READ
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
    config: Settings, loaded: bool, *requests: tuple[str, dict[str, str]]
) -> list[tuple[int, Any]]:
    app = create_app(config)
    async with TestClient(TestServer(app)) as client:
        if loaded:
            app[READ].current = tiny_store()
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
            ("/api/v1/lineage?nodeId=job:etl:load&depth=0", {}),
        )
    )
    assert unknown == 404 and missing["error"]["suggestions"] == ["etl/load"]
    assert bad == 400 and depth["error"]["code"] == "BAD_PARAMETER"
    [(status, body)] = asyncio.run(_ask(settings(tmp_path), False, ("/api/v1/namespaces", {})))
    assert status == 503
    assert body["error"]["code"] == "LINEAGE_NOT_BUILT"
    assert "no catalog" in body["error"]["message"] or "loaded" in body["error"]["message"]
