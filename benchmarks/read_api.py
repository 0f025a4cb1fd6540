"""Part of stage ``queries`` (issue 20): the same questions as the CLI table, asked of the read API.

A ``lineage serve`` process (intake off) on the tier's built lake; once its index is loaded, each
(direction, node, depth) question is asked once untimed over ``/api/v2/<direction>`` (it must answer 200
with the CLI's JSON) and then ``runs`` times on one keep-alive connection: warm latency as a client sees it
over loopback (request, walk, JSON, response), p50/p95. The index's Arrow bytes (from ``/healthz``) and the
server's resident memory are recorded beside them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

from benchmarks.queries import (
    DEPTHS,
    DIRECTIONS,
    QueryContext,
    _name,
    answer_size,
    history_questions,
    pick_nodes,
    run_history,
    spread,
)

READY_TIMEOUT_S = 600.0


def _free_port() -> int:
    from lineage.io.local_kafka import free_port

    return free_port()


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def _rss_mib(pid: int) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def wait_ready(
    port: int, process: subprocess.Popen[bytes], timeout_s: float = READY_TIMEOUT_S
) -> dict[str, Any]:
    """The ``read`` part of ``/healthz`` once the index is loaded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"lineage serve exited with {process.returncode}")
        with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            status, body = _get(conn, "/healthz")
            conn.close()
            read = json.loads(body).get("read", {}) if status == 200 else {}
            if read.get("ready"):
                return read
        time.sleep(0.5)
    raise TimeoutError(f"the read index was not loaded within {timeout_s:.0f} s")


def timed_get(conn: http.client.HTTPConnection, path: str, runs: int) -> tuple[bytes, dict[str, Any]]:
    """``GET path`` once untimed (it must answer 200; its body is returned), then ``runs`` timed times:
    the body and :func:`spread` of the timed requests."""
    status, body = _get(conn, path)
    if status != 200:
        raise RuntimeError(f"GET {path} answered {status}: {body[:500]!r}")
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        status, _body = _get(conn, path)
        seconds.append(time.perf_counter() - started)
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}")
    return body, spread(seconds, digits=6)


def measure_questions(port: int, questions: list[tuple[str, str, int]], runs: int) -> list[dict[str, Any]]:
    """``(direction, node, depth)`` -> one row each: nodes and edges answered, warm p50/p95 in ms."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    rows = []
    try:
        for direction, node, depth in questions:
            path = f"/api/v2/{direction}?" + urllib.parse.urlencode({"node": node, "depth": depth})
            body, timed = timed_get(conn, path, runs)
            answer = json.loads(body)
            rows.append(
                {
                    "query": direction,
                    "node": node,
                    "depth": depth,
                    "nodes": len(answer.get("nodes", [])),
                    "edges": len(answer.get("edges", [])),
                    "runs": timed["runs"],
                    "p50_ms": round(timed["p50_s"] * 1000, 2),
                    "p95_ms": round(timed["p95_s"] * 1000, 2),
                    "max_ms": round(timed["max_s"] * 1000, 2),
                }
            )
    finally:
        conn.close()
    return rows


# Marquez's paths (issue 38), asked of the same server: lineage from the leaf at the web UI's default depth
# (2 job layers) and from the hub at depth 1 (the hub is read by hundreds of jobs: one layer already holds
# thousands of nodes, 17 s an answer at tier M), column lineage of the hub, a search, two jobs lists. Few
# timed runs: the large answers take seconds each.
MARQUEZ_RUNS = 5


def marquez_paths(estate: Any, nodes: dict[str, tuple[Any, str]]) -> list[tuple[str, str, str]]:
    """(label, node key, path) of the Marquez questions for the picked datasets."""
    hub, _why = nodes["hub"]
    writers = [j for j in estate.jobs if hub.index in j.outputs and j.namespace]
    out = []
    for key, depth in (("leaf", 2), ("hub", 1)):
        dataset, _why = nodes[key]
        query = urllib.parse.urlencode(
            {"nodeId": f"dataset:{dataset.namespace}:{dataset.name}", "depth": depth}
        )
        out.append((f"lineage depth {depth}", key, f"/api/v1/lineage?{query}"))
    hub_id = f"dataset:{hub.namespace}:{hub.name}"
    query = urllib.parse.urlencode({"nodeId": hub_id, "depth": 2, "withDownstream": "true"})
    out.append(("column-lineage depth 2, with downstream", "hub", f"/api/v1/column-lineage?{query}"))
    term = hub.name.rsplit("/", 1)[-1].rsplit(".", 1)[-1][:6]
    out.append((f"search {term!r}", "hub", "/api/v1/search?" + urllib.parse.urlencode({"q": term})))
    if writers:
        namespace = urllib.parse.quote(writers[0].namespace, safe="")
        jobs_path = f"/api/v1/namespaces/{namespace}/jobs?limit=100"
        out.append(("jobs of the hub writer's namespace", "hub", jobs_path))
    out.append(("jobs, every namespace", "hub", "/api/v1/jobs?limit=100"))
    return out


def history_paths(estate: Any) -> list[tuple[str, str, str]]:
    """(label, node key, path) of the CLI's over-time and health questions (:func:`history_questions`)."""
    return [
        (q.label, q.node, f"{q.path}?{urllib.parse.urlencode(q.query)}") for q in history_questions(estate)
    ]


def measure_paths(port: int, paths: list[tuple[str, str, str]], runs: int) -> list[dict[str, Any]]:
    """``(label, node, path)`` -> one row each: answer size, warm p50/p95 in ms."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    rows = []
    try:
        for label, node, path in paths:
            body, timed = timed_get(conn, path, runs)
            answer = json.loads(body)
            listed = next((answer[k] for k in ("graph", "results", "jobs") if k in answer), None)
            rows.append(
                {
                    "query": label,
                    "node": node,
                    "path": path,
                    "items": len(listed) if listed is not None else answer_size(answer),
                    "bytes": len(body),
                    "runs": timed["runs"],
                    "p50_ms": round(timed["p50_s"] * 1000, 2),
                    "p95_ms": round(timed["p95_s"] * 1000, 2),
                    "max_ms": round(timed["max_s"] * 1000, 2),
                }
            )
    finally:
        conn.close()
    return rows


def run_read_api(ctx: QueryContext, runs: int = 100) -> dict[str, Any]:
    """The CLI table's questions, asked of a ``lineage serve`` on the same lake."""
    ctx.work_dir.mkdir(parents=True, exist_ok=True)
    nodes = pick_nodes(ctx.estate)
    port = _free_port()
    env = {**ctx.env, "LINEAGE__SERVE__PORT": str(port), "LINEAGE__SERVE__INTAKE": "false"}
    env["LINEAGE__SERVE__ACCESS_LOG"] = "false"
    script = Path(ctx.python[0]).parent / "lineage"
    with (ctx.work_dir / "read-api-serve.log").open("wb") as log:
        process = subprocess.Popen(
            [str(script), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        started = time.monotonic()
        read = wait_ready(port, process)
        questions = [
            (direction, _name(dataset), depth)
            for dataset, _why in nodes.values()
            for direction in DIRECTIONS
            for depth in DEPTHS
        ]
        rows = measure_questions(port, questions, runs)
        which = {_name(d): k for k, (d, _why) in nodes.items()}
        for row in rows:
            row["name"], row["node"] = row["node"], which[row["node"]]
        marquez = measure_paths(port, marquez_paths(ctx.estate, nodes), MARQUEZ_RUNS)
        paths = history_paths(ctx.estate)
        history = measure_paths(port, paths, runs)
        # The CLI asking this server (a new process each time, as the CLI rows; issues 41 and 42).
        cli_history = run_history(ctx, api=f"http://127.0.0.1:{port}")
        return {
            "status": "ok",
            "ready_s": round(time.monotonic() - started, 2),
            "index_bytes": read.get("index_bytes"),
            "index_load_s": read.get("load_seconds"),
            "server_rss_mib": _rss_mib(process.pid),
            "rows": rows,
            "p95_max_ms": max(r["p95_ms"] for r in rows),
            "marquez_rows": marquez,
            "history_rows": history,
            "cli_history_rows": cli_history,
        }
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
