"""Data.Rentgen's lineage endpoint on the data its consumer wrote (issue 6, measurement 4, their side).

After the side by side, Data.Rentgen's PostgreSQL holds the tier's events in its own model. Its server
(``python -m data_rentgen.server``, FastAPI on uvicorn) is started on that database with its default
dummy auth provider, and ``GET /v1/datasets/lineage`` is asked the same questions as our CLI: upstream and
downstream at depth 1, 3 and 10 from the same hub and leaf datasets, at job granularity (jobs and datasets,
the nodes our CLI walks).

What is timed differs from our CLI on purpose and the report says so: a request to a server that is
already up (HTTP round trip, query, JSON) against a new ``lineage`` process per query (interpreter start
and imports included).
"""

from __future__ import annotations

import json
import statistics
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from benchmarks.queries import DEPTHS, spread

ENDPOINT = "/v1/datasets/lineage"
GRANULARITY = "JOB"
DIRECTIONS = {"upstream": "UPSTREAM", "downstream": "DOWNSTREAM"}


class EndpointError(RuntimeError):
    """The server did not answer as expected (status and the start of its body in the message)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def http(url: str, *, data: bytes | None = None, headers: Mapping[str, str] | None = None) -> Answer:
    """One request with the standard library; HTTP errors are answers, not exceptions."""
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return Answer(response.status, response.read())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read())


def wait_ready(base_url: str, alive: Callable[[], bool], timeout_s: float = 120.0) -> float:
    """Poll ``/monitoring/ping`` until it answers 200; seconds waited. Fails when the server died."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if not alive():
            raise EndpointError("Data.Rentgen's server exited before answering")
        try:
            if http(base_url + "/monitoring/ping").status == 200:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.5)
    raise EndpointError(f"Data.Rentgen's server did not answer /monitoring/ping within {timeout_s:.0f} s")


def token(base_url: str, user: str = "bench") -> str:
    """An access token from the dummy auth provider (any user name and password)."""
    form = urllib.parse.urlencode({"username": user, "password": user}).encode()
    answer = http(
        base_url + "/v1/auth/token",
        data=form,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    if answer.status != 200:
        raise EndpointError(f"POST /v1/auth/token: HTTP {answer.status}: {answer.body[:300]!r}")
    return str(json.loads(answer.body)["access_token"])


def dataset_id_sql(location: str, name: str) -> str:
    """SQL for Data.Rentgen's id of the dataset ``name`` at location ``location`` (e.g. ``s3://bucket``).

    Data.Rentgen stores a namespace as a location (type = URI scheme, name = the rest) and the dataset name
    as given; its location types fold ``s3a`` into ``s3``, so both spellings are accepted.
    """
    scheme, _, rest = location.partition("://")
    schemes = {scheme, "s3"} if scheme in ("s3a", "s3n") else {scheme}
    quoted = ", ".join(_literal(s) for s in sorted(schemes))
    return (
        "SELECT dataset.id FROM dataset JOIN location ON location.id = dataset.location_id "
        f"WHERE dataset.name = {_literal(name)} AND location.name = {_literal(rest)} "
        f"AND location.type IN ({quoted}) ORDER BY dataset.id LIMIT 1"
    )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def count_answer(answer: Mapping[str, Any]) -> dict[str, int]:
    """Datasets, jobs and input/output relations in a lineage response."""
    nodes = answer.get("nodes") or {}
    relations = answer.get("relations") or {}
    return {
        "datasets": len(nodes.get("datasets") or {}),
        "jobs": len(nodes.get("jobs") or {}),
        "relations": len(relations.get("inputs") or []) + len(relations.get("outputs") or []),
    }


def lineage_url(base_url: str, dataset_id: int, direction: str, depth: int, since: datetime) -> str:
    query = {
        "start_node_id": dataset_id,
        "direction": DIRECTIONS[direction],
        "depth": depth,
        "granularity": GRANULARITY,
        "since": since.isoformat(),
    }
    return f"{base_url}{ENDPOINT}?{urllib.parse.urlencode(query)}"


def measure_endpoint(
    base_url: str,
    access_token: str,
    nodes: Mapping[str, tuple[str, int]],
    since: datetime,
    runs: int,
    fetch: Callable[..., Answer] = http,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Every (node, direction, depth) request: one untimed check, then ``runs`` timed requests.

    Args:
        nodes: ``{"hub": (our name, Data.Rentgen dataset id), "leaf": ...}``.
    """
    headers = {"Authorization": f"Bearer {access_token}"}
    rows: list[dict[str, Any]] = []
    for which, (name, dataset_id) in nodes.items():
        for direction in DIRECTIONS:
            for depth in DEPTHS:
                url = lineage_url(base_url, dataset_id, direction, depth, since)
                started = clock()
                first = fetch(url, headers=headers)
                first_s = clock() - started
                if first.status != 200:
                    raise EndpointError(f"GET {url}: HTTP {first.status}: {first.body[:300]!r}")
                counts = count_answer(json.loads(first.body))
                times = []
                for _ in range(runs):
                    started = clock()
                    answer = fetch(url, headers=headers)
                    times.append(clock() - started)
                    if answer.status != 200:
                        raise EndpointError(f"GET {url}: HTTP {answer.status}")
                rows.append(
                    {
                        "query": direction,
                        "node": which,
                        "name": name,
                        "dataset_id": dataset_id,
                        "depth": depth,
                        **counts,
                        "first_s": round(first_s, 4),
                        **spread(times, digits=4),
                    }
                )
    return {
        "status": "ok",
        "granularity": GRANULARITY,
        "rows": rows,
        "p95_max_s": max(r["p95_s"] for r in rows),
        "p50_median_s": statistics.median(r["p50_s"] for r in rows),
    }
