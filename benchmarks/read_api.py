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

from benchmarks.queries import DEPTHS, DIRECTIONS, QueryContext, _name, pick_nodes, spread

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


def measure_questions(port: int, questions: list[tuple[str, str, int]], runs: int) -> list[dict[str, Any]]:
    """``(direction, node, depth)`` -> one row each: nodes and edges answered, warm p50/p95 in ms."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    rows = []
    try:
        for direction, node, depth in questions:
            path = f"/api/v2/{direction}?" + urllib.parse.urlencode({"node": node, "depth": depth})
            status, body = _get(conn, path)
            if status != 200:
                raise RuntimeError(f"GET {path} answered {status}: {body[:500]!r}")
            answer = json.loads(body)
            seconds = []
            for _ in range(runs):
                started = time.perf_counter()
                status, _body = _get(conn, path)
                seconds.append(time.perf_counter() - started)
                if status != 200:
                    raise RuntimeError(f"GET {path} answered {status}")
            timed = spread(seconds, digits=6)
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
        return {
            "status": "ok",
            "ready_s": round(time.monotonic() - started, 2),
            "index_bytes": read.get("index_bytes"),
            "index_load_s": read.get("load_seconds"),
            "server_rss_mib": _rss_mib(process.pid),
            "rows": rows,
            "p95_max_ms": max(r["p95_ms"] for r in rows),
        }
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
