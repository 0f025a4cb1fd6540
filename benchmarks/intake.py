"""Intake benchmark (issue 15): our `lineage serve` against Data.Rentgen's http2kafka, on one Kafka broker.

``python -m benchmarks.intake`` (``make bench-intake``) starts a Kafka **3.9** broker (Data.Rentgen's
aiokafka cannot talk to Kafka 4.x, aio-libs/aiokafka#1085; confluent-kafka talks to both), then, one after
the other on the same broker and topic:

- ours: ``lineage serve`` (defaults of conf/lineage.toml: access log on, acks=all, idempotent producer,
  an answer only after Kafka's acknowledgement);
- theirs: ``python -m data_rentgen.http2kafka`` (Data.Rentgen's venv, one uvicorn worker, its defaults)
  with a personal token made through its own server on a private PostgreSQL cluster (it checks the token
  against its database). Its endpoint answers 201 before Kafka acknowledges (``no_confirm=True`` in its
  source) and takes one RunEvent per request: it has no batch endpoint.

Scenarios, each for ``--duration`` seconds after a warm-up, in ``--repeat`` rounds on the same running
service (each number reported is the median over the rounds, with min and max):

- ``single``: closed loop, ``--concurrency`` clients each sending one event per request, as fast as the
  answers come: events/s and request latency p50/p99;
- ``batch`` (ours only): closed loop, ``--batch-concurrency`` clients sending ``--batch-size`` events per
  request: events/s, request latency p50/p99;
- ``rate``: open loop at ``--rate`` events/s, one event per request, latency measured from each request's
  scheduled time (so a stall is not hidden by the generator waiting): p50/p99.

The load generator is a separate process (aiohttp client on uvloop) on the same 2 cores as the service
and the broker, so every number here is for the three sharing the machine. The service's memory is its
peak RSS, sampled every 100 ms during each scenario. Results: ``var/bench/results/intake.json``, which
``python -m benchmarks report`` renders into BENCHMARKS.md. Goals of issue 15: ours >= 10x http2kafka
events/s; >= 20,000 events/s with batches; p99 <= 50 ms for single events at 1,000 events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from benchmarks import measure
from lineage.io.local_kafka import LocalKafka, create_topic, free_port
from lineage.io.publish import topic_message_count

REPO = Path(__file__).resolve().parents[1]
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
PARTITIONS = 4
EVENT_POOL = 4000  # distinct events the generator cycles through
READY_TIMEOUT_S = 120.0


# --- the load generator (a process of its own) --------------------------------------------------------------


def uuid7() -> str:
    """A version 7 UUID (time-ordered): Data.Rentgen refuses other run id versions."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def sample_event(number: int) -> dict[str, Any]:
    """A START event as openlineage-python writes it for a small SQL job: two inputs, one output, a schema."""
    fields = [{"name": f"column_{i}", "type": "string"} for i in range(8)]
    schema = {
        "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python",
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
        "fields": fields,
    }
    return {
        "eventTime": "2026-11-20T08:00:00.000000+00:00",
        "eventType": "START",
        "inputs": [
            {
                "namespace": "postgres://db:5432",
                "name": f"shop.public.orders_{number % 50}",
                "facets": {"schema": schema},
            },
            {"namespace": "postgres://db:5432", "name": "shop.public.customers", "facets": {}},
        ],
        "job": {"namespace": "bench", "name": f"etl.job_{number % 200}", "facets": {}},
        "outputs": [
            {
                "namespace": "s3://warehouse",
                "name": f"marts/orders_{number % 50}",
                "facets": {"schema": schema},
            }
        ],
        "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python",
        "run": {"runId": uuid7(), "facets": {}},
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(latencies: list[float], statuses: dict[int, int], events: int, elapsed: float) -> dict[str, Any]:
    return {
        "requests": len(latencies),
        "events": events,
        "seconds": round(elapsed, 3),
        "events_per_s": round(events / elapsed, 1) if elapsed > 0 else None,
        "p50_ms": round((_percentile(latencies, 0.50) or 0) * 1000, 2),
        "p99_ms": round((_percentile(latencies, 0.99) or 0) * 1000, 2),
        "max_ms": round(max(latencies, default=0) * 1000, 2),
        "statuses": {str(k) if k else "no answer": v for k, v in sorted(statuses.items())},
    }


async def _post(session: Any, url: str, body: bytes, headers: dict[str, str]) -> int:
    """The answer's status; 0 for a request that failed or timed out (60 s) without one."""
    import aiohttp

    try:
        async with session.post(url, data=body, headers=headers) as answer:
            await answer.read()
            return int(answer.status)
    except (TimeoutError, aiohttp.ClientError, OSError):
        return 0


async def _closed_loop(
    url: str, headers: dict[str, str], bodies: list[bytes], per_body: int, concurrency: int, duration_s: float
) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    ok_events = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        started = time.perf_counter()
        deadline = started + duration_s

        async def worker(offset: int) -> None:
            nonlocal ok_events
            i = offset
            while time.perf_counter() < deadline:
                body = bodies[i % len(bodies)]
                i += concurrency
                sent = time.perf_counter()
                status = await _post(session, url, body, headers)
                latencies.append(time.perf_counter() - sent)
                statuses[status] = statuses.get(status, 0) + 1
                if 200 <= status < 300:
                    ok_events += per_body

        await asyncio.gather(*(worker(n) for n in range(concurrency)))
        elapsed = time.perf_counter() - started
    return _summary(latencies, statuses, ok_events, elapsed)


async def _open_loop(
    url: str, headers: dict[str, str], bodies: list[bytes], rate: float, duration_s: float
) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    ok_events = 0
    connector = aiohttp.TCPConnector(limit=512)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        total = int(rate * duration_s)
        started = time.perf_counter() + 0.1
        tasks = []

        async def one(number: int, due: float) -> None:
            nonlocal ok_events
            status = await _post(session, url, bodies[number % len(bodies)], headers)
            latencies.append(time.perf_counter() - due)  # from the scheduled time: a stall is not hidden
            statuses[status] = statuses.get(status, 0) + 1
            if 200 <= status < 300:
                ok_events += 1

        for number in range(total):
            due = started + number / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(number, due)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    return _summary(latencies, statuses, ok_events, elapsed)


def loadgen_main(args: argparse.Namespace) -> int:
    headers = {
        "Content-Type": "application/json",
        **({"Authorization": f"Bearer {args.token}"} if args.token else {}),
    }
    singles = [json.dumps(sample_event(n)).encode() for n in range(EVENT_POOL)]
    if args.mode == "batch":
        size = args.batch_size
        bodies = [
            b"[" + b",".join(singles[(i * size + j) % EVENT_POOL] for j in range(size)) + b"]"
            for i in range(64)
        ]
        per_body = size
    else:
        bodies, per_body = singles, 1
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    if args.mode == "rate":
        result = asyncio.run(_open_loop(args.url, headers, bodies, args.rate, args.duration))
    else:
        result = asyncio.run(
            _closed_loop(args.url, headers, bodies, per_body, args.concurrency, args.duration)
        )
    result["event_bytes"] = len(singles[0])
    print(json.dumps(result))
    return 0


# --- the services ------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    single_url: str
    batch_url: str | None
    token: str | None
    process: subprocess.Popen[bytes]


def _wait_http(
    url: str, process: subprocess.Popen[bytes], log: Path, expect: tuple[int, ...] = (200,)
) -> float:
    import urllib.error
    import urllib.request

    started = time.monotonic()
    while time.monotonic() - started < READY_TIMEOUT_S:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {process.returncode}\n{measure.tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status in expect:
                    return time.monotonic() - started
        except urllib.error.HTTPError as exc:
            if exc.code in expect:
                return time.monotonic() - started
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {READY_TIMEOUT_S:.0f} s\n{measure.tail(log)}")


def _spawn(command: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
            start_new_session=True,
        )  # fmt: skip


def start_ours(bootstrap: str, topic: str, work: Path, access_log: bool, workers: int = 1) -> Target:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "LINEAGE__KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "LINEAGE__KAFKA__TOPIC": topic,
        "LINEAGE__SERVE__PORT": str(port),
        "LINEAGE__SERVE__ACCESS_LOG": "true" if access_log else "false",
        "LINEAGE__SERVE__WORKERS": str(workers),
    }
    log = work / "ours.log"
    process = _spawn([sys.executable, "-m", "lineage.cli.main", "serve"], log, env, REPO)
    base = f"http://127.0.0.1:{port}"
    _wait_http(f"{base}/healthz", process, log)
    return Target("ours", f"{base}/api/v1/lineage", f"{base}/api/v1/lineage/batch", None, process)


def _rentgen_env(work: Path, config: dict[str, Any]) -> dict[str, str]:
    path = work / f"rentgen-{uuid.uuid4().hex[:6]}.yml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    env = {**os.environ, "DATA_RENTGEN_CONFIG_FILE": str(path)}
    env.pop("PYTHONPATH", None)
    return env


def start_rentgen(python: Path, bootstrap: str, topic: str, work: Path) -> tuple[Target, Any]:
    """Data.Rentgen's http2kafka with a personal token; returns it and the PostgreSQL cluster to stop."""
    import urllib.request

    from benchmarks import rentgen

    bindir = rentgen.find_postgres_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries missing (apt-get install -y postgresql)")
    cluster = rentgen.PgCluster(work / "pg", free_port(), bindir)
    cluster.init()
    cluster.start()
    cluster.sql(f"CREATE DATABASE {rentgen.DATABASE}")
    secret = uuid.uuid4().hex
    base_config = {
        "database": {"url": cluster.url()},
        "auth": {"personal_tokens": {"enabled": True, "secret_key": secret}},
    }
    env = _rentgen_env(work, base_config)
    done = subprocess.run(
        [str(python), "-m", "data_rentgen.db.migrations", "upgrade", "head"],
        env=env,
        cwd=work,
        capture_output=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"Data.Rentgen migrations failed: {done.stdout[-2000:]!r} {done.stderr[-2000:]!r}")
    # Its server (dummy auth) makes the personal token http2kafka requires.
    port = free_port()
    server_env = _rentgen_env(
        work,
        {
            **base_config,
            "auth": {
                "access_token": {"secret_key": uuid.uuid4().hex},
                "personal_tokens": {"enabled": True, "secret_key": secret},
            },
            "server": {"static_files": {"enabled": False}},
        },
    )
    log = work / "rentgen-server.log"
    server = _spawn(
        [str(python), "-m", "data_rentgen.server", "--host", "127.0.0.1", "--port", str(port)],
        log,
        server_env,
        work,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(f"{base}/monitoring/ping", server, log)
        from benchmarks.rentgen_api import token

        access = token(base)
        request = urllib.request.Request(
            f"{base}/v1/personal-tokens",
            data=json.dumps({"name": f"bench-{uuid.uuid4().hex[:6]}"}).encode(),
            headers={"Authorization": f"Bearer {access}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            personal = str(json.loads(answer.read())["content"])
    finally:
        measure.stop_tree(server, timeout_s=15)
    port = free_port()
    h2k_env = _rentgen_env(
        work,
        {
            **base_config,
            "kafka": {"bootstrap_servers": [bootstrap]},
            "producer": {"main_topic": topic},
            # Its default serves static files from a source checkout's folder, absent from the wheel.
            "server": {"static_files": {"enabled": False}},
        },
    )
    log = work / "rentgen-http2kafka.log"
    process = _spawn(
        [str(python), "-m", "data_rentgen.http2kafka", "--host", "127.0.0.1", "--port", str(port)],
        log,
        h2k_env,
        work,
    )
    base = f"http://127.0.0.1:{port}"
    _wait_http(f"{base}/monitoring/ping", process, log)
    return Target("http2kafka", f"{base}/v1/openlineage", None, personal, process), cluster


@contextmanager
def rss_sampler(pid: int) -> Iterator[dict[str, float]]:
    """Peak RSS (MiB) of the process and its children while the block runs."""
    found = {"peak_rss_mib": 0.0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                total = sum(p.memory_info().rss for p in measure.process_tree(pid))
                found["peak_rss_mib"] = max(found["peak_rss_mib"], total / measure.MIB)
            except psutil.Error:
                pass
            stop.wait(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join()
        found["peak_rss_mib"] = round(found["peak_rss_mib"], 1)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its living descendants (a service's workers)."""
    total = 0.0
    for process in measure.process_tree(pid):
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def run_scenario(target: Target, mode: str, args: argparse.Namespace, duration_s: float) -> dict[str, Any]:
    url = target.batch_url if mode == "batch" else target.single_url
    assert url is not None
    command = [sys.executable, "-m", "benchmarks.intake", "loadgen", "--url", url, "--mode", mode]
    command += ["--duration", str(duration_s), "--rate", str(args.rate), "--batch-size", str(args.batch_size)]
    command += ["--concurrency", str(args.batch_concurrency if mode == "batch" else args.concurrency)]
    if target.token:
        command += ["--token", target.token]
    cpu_before = tree_cpu_s(target.process.pid)
    with rss_sampler(target.process.pid) as memory:
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=duration_s + 300)
    if done.returncode != 0:
        raise RuntimeError(f"load generator failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    cpu_s = tree_cpu_s(target.process.pid) - cpu_before
    result.update(memory)
    result["service_cpu_s"] = round(cpu_s, 2)
    if result["events"]:
        result["service_cpu_us_per_event"] = round(cpu_s / result["events"] * 1e6, 1)
    result["load_average"] = measure.load_average()
    return result


def measure_target(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    """Every scenario ``--repeat`` times on one running service (after one warm-up), in rounds."""
    run_scenario(target, "single", args, 2.0)  # warm-up: connections, the producer's first metadata
    modes = ["single", *(["batch"] if target.batch_url is not None else []), "rate"]
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode in modes:
            runs[mode].append(run_scenario(target, mode, args, args.duration))
    out = {mode: median_run(found) for mode, found in runs.items()}
    for mode, result in out.items():
        logline = (
            f"{target.name:>10} {mode:>6}: {result['events_per_s']} events/s, p50 {result['p50_ms']} ms, "
            f"p99 {result['p99_ms']} ms, statuses {result['statuses']}, peak RSS {result['peak_rss_mib']} MiB"
        )
        print(logline, flush=True)
    return out


SPREAD_KEYS = ("events_per_s", "p50_ms", "p99_ms", "peak_rss_mib", "service_cpu_us_per_event")


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one scenario: each number the median over the runs, with ``spread`` [min, max] per number,
    the answers' statuses summed and every run kept under ``runs``."""
    out: dict[str, Any] = {"n": len(runs), "runs": runs}
    out["spread"] = {}
    for key in SPREAD_KEYS:
        values = [run[key] for run in runs if run.get(key) is not None]
        if values:
            out[key] = round(statistics.median(values), 2)
            out["spread"][key] = [min(values), max(values)]
    statuses: dict[str, int] = {}
    for run in runs:
        for status, count in run.get("statuses", {}).items():
            statuses[status] = statuses.get(status, 0) + count
    out["statuses"] = statuses
    out["events"] = sum(run.get("events", 0) for run in runs)
    return out


def run_main(args: argparse.Namespace) -> int:
    work = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    jars = args.kafka_jars.resolve()
    if not any(jars.glob("kafka_*.jar")):
        print(
            f"no Kafka 3.9 jars in {jars}: make {args.kafka_jars}/.fetched (Maven profile kafka39)",
            file=sys.stderr,
        )
        return 2
    broker = LocalKafka(
        data_dir=work / "kafka",
        jars_dir=jars,
        port=free_port(),
        controller_port=free_port(),
        max_message_bytes=MAX_MESSAGE_BYTES,
        partitions=PARTITIONS,
    )
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": measure.machine(),
        "command": " ".join(["python", "-m", "benchmarks.intake", *sys.argv[1:]]),
        "settings": {k: str(v) for k, v in vars(args).items() if k not in ("func",)},
        "kafka_broker": sorted(p.name for p in jars.glob("kafka_2.13-*.jar")),
        "note": "load generator, service and broker share the machine's cores",
    }
    try:
        broker.start()
        for name in ("ours", "theirs"):
            topic = f"intake.bench.{name}"
            create_topic(broker.bootstrap_servers, topic, PARTITIONS, MAX_MESSAGE_BYTES)
            cluster = None
            try:
                if name == "ours":
                    target = start_ours(
                        broker.bootstrap_servers, topic, work, not args.no_access_log, args.workers
                    )
                else:
                    if args.skip_rentgen:
                        results["theirs"] = {"status": "skipped", "reason": "--skip-rentgen"}
                        continue
                    python = args.rentgen_python.absolute()
                    if not python.exists():
                        results["theirs"] = {
                            "status": "skipped",
                            "reason": f"{python} missing: make bench-rentgen",
                        }
                        continue
                    target, cluster = start_rentgen(python, broker.bootstrap_servers, topic, work)
                try:
                    results[name] = measure_target(target, args)
                finally:
                    measure.stop_tree(target.process, timeout_s=30)
                results[name]["messages_in_topic"] = topic_message_count(broker.bootstrap_servers, topic)
            finally:
                if cluster is not None:
                    cluster.stop()
        ours, theirs = results.get("ours", {}), results.get("theirs", {})
        if "single" in ours and "single" in theirs and theirs["single"]["events_per_s"]:
            best = max(ours["single"]["events_per_s"], ours.get("batch", {}).get("events_per_s") or 0)
            results["ratio_single"] = round(
                ours["single"]["events_per_s"] / theirs["single"]["events_per_s"], 2
            )
            results["ratio_best"] = round(best / theirs["single"]["events_per_s"], 2)
    finally:
        broker.stop()
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2))
    print(f"results: {args.results}")
    for key in ("ratio_single", "ratio_best"):
        if key in results:
            print(f"{key}: {results[key]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.intake", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="the benchmark (default)")
    load = sub.add_parser("loadgen", help="one load generator run (used by run)")
    for p in (run, load):
        p.add_argument("--duration", type=float, default=15.0, help="seconds per scenario")
        p.add_argument("--concurrency", type=int, default=32, help="clients of the single-event closed loop")
        p.add_argument("--batch-size", type=int, default=500, help="events per batch request")
        p.add_argument("--rate", type=float, default=1000.0, help="events/s of the open loop")
    run.add_argument("--batch-concurrency", type=int, default=4, help="clients of the batch closed loop")
    run.add_argument("--repeat", type=int, default=3, help="runs of every scenario (the median is reported)")
    run.add_argument("--rentgen-python", type=Path, default=Path(".venv-rentgen/bin/python"))
    run.add_argument("--kafka-jars", type=Path, default=Path(".jars/kafka39"))
    run.add_argument("--skip-rentgen", action="store_true")
    run.add_argument("--no-access-log", action="store_true", help="run ours without its request log")
    run.add_argument("--workers", type=int, default=1, help="worker processes of ours (serve.workers)")
    run.add_argument("--work", type=Path, default=Path("var/bench/work/intake"))
    run.add_argument("--results", type=Path, default=Path("var/bench/results/intake.json"))
    load.add_argument("--url", required=True)
    load.add_argument("--mode", choices=["single", "batch", "rate"], required=True)
    load.add_argument("--token")
    args = parser.parse_args(
        ["run", *(argv if argv is not None else sys.argv[1:])] if _no_command(argv) else argv
    )
    if args.command == "loadgen":
        return loadgen_main(args)
    return run_main(args)


def _no_command(argv: list[str] | None) -> bool:
    first = (argv if argv is not None else sys.argv[1:])[:1]
    return not first or first[0] not in ("run", "loadgen", "-h", "--help")


if __name__ == "__main__":
    sys.exit(main())
