"""End to end with real Flink producers: PyFlink jobs with the OpenLineage Flink integration (Flink 2.x
listener factory, Flink 1.x job listener) -> Kafka transport -> our topic -> ingestion -> build ->
``lake.lineage.*``; the first Flink 2.x run sends over HTTP (gzip, an API key) to our intake instead
(``lineage serve``, conf/flink/openlineage-http.yml), which produces into the same topic.

One scenario per module (``flink_lake``), run once: orders go into a source topic, then five real jobs run
one after the other on local Flink clusters (tests/producers/flink/):

* Flink 2.0 SQL job ``supplier-stats-sql``: once to completion (bounded source, over HTTP), once
  cancelled;
* Flink 1.20 DataStream job ``supplier-stats``: once to completion, once cancelled through the REST API,
  once killed hard (SIGKILL to the whole process group) after its START and RUNNING heartbeats: the seed
  lab's application cluster torn down, no terminal event.

Their events are ingested and built once; the tests assert on the lineage tables. Needs `make flink-setup`
(.venv-flink1/2 and .jars/flink1/2). Set ``FLINK_GOLDEN_DIR`` to also write the captured events there, one
file per Flink version (how tests/resources/golden/flink_real/ was made).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import string
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from lineage.io.local_kafka import LocalKafka, create_topic, free_port
from lineage.serve.auth import hash_key, new_key
from lineage.settings import Settings
from tests.fixtures.intake import Intake, start_intake
from tests.fixtures.lake import lake_settings
from tests.fixtures.topics import Captured, ProducerScenario, TopicWatcher, write_events

pytestmark = [pytest.mark.integration, pytest.mark.flink]

REPO = Path(__file__).resolve().parents[2]
FLINK2_PYTHON = REPO / ".venv-flink2/bin/python"
FLINK1_PYTHON = REPO / ".venv-flink1/bin/python"
FLINK2_JOB = ("flink-jobs", "supplier-stats-sql")  # the 2.x integration's default namespace
FLINK1_JOB = ("flink1-lab", "supplier-stats")  # the namespace the job gives the 1.x listener builder
TRACKING_INTERVAL_S = 1  # openlineage.yml (2.x) and the 1.x tracking interval: a RUNNING per second or two
EVENT_TIMEOUT_S = 180.0
SILENCE = timedelta(hours=2)  # the build runs this long after the last event: the stuck run is long silent
LINEAGE_TABLES = (  # the tables the tests read, beside the raw events
    "jobs",
    "runs",
    "datasets",
    "dataset_aliases",
    "dataset_schemas",
    "run_io",
    "dataset_edges",
    "job_summary",
)


@dataclass
class FlinkProcess:
    """A PyFlink job running as a subprocess in its own process group (its gateway JVM included)."""

    name: str
    process: subprocess.Popen[bytes]
    output: Path
    log_dir: Path

    @classmethod
    def start(
        cls, name: str, python: Path, module: str, args: list[str], work: Path, openlineage_yml: Path
    ) -> FlinkProcess:
        if not python.exists():
            pytest.fail(f"{python} is missing: run `make flink-setup` (mk/flink.mk)")
        out_dir = work / name
        out_dir.mkdir(parents=True)
        output = out_dir / "stdout.txt"
        env = {
            **os.environ,
            "OPENLINEAGE_CONFIG": str(openlineage_yml),
            "FLINK_LOG_DIR": str(out_dir / "log"),
            "PYTHONPATH": str(REPO),
        }
        with output.open("wb") as sink:
            process = subprocess.Popen(
                [str(python), "-m", module, *args, "--lib-dir", str(out_dir / "lib")],
                cwd=REPO,
                env=env,
                stdin=subprocess.PIPE,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(name, process, output, out_dir / "log")

    def send(self, line: str) -> None:
        stdin: IO[bytes] | None = self.process.stdin
        assert stdin is not None
        stdin.write(f"{line}\n".encode())
        stdin.flush()

    def finish(self, timeout: float = 120) -> None:
        """Close stdin (the job then exits) and wait for the process."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not exit\n{self.diagnostics()}") from None
        assert self.process.returncode == 0, (
            f"{self.name} exited with {self.process.returncode}\n{self.diagnostics()}"
        )

    def kill(self) -> None:
        """SIGKILL the whole process group: the Python client and the JVM with Flink and the listener."""
        # The group outlives its leader while the JVM is alive: kill it even when Python already exited.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stdout_lines(self) -> list[str]:
        return self.output.read_text(errors="replace").splitlines()

    def diagnostics(self) -> str:
        logs = sorted(self.log_dir.glob("*.log"))
        log_tail = logs[0].read_text(errors="replace")[-4000:] if logs else "(no Flink log)"
        output = self.output.read_text(errors="replace")[-4000:]
        return f"--- {self.name} output ---\n{output}\n--- Flink log ---\n{log_tail}"

    def failed(self) -> str | None:
        """Why the job can send nothing more (it exited with an error), or None while it can."""
        if self.process.poll() is not None and self.process.returncode != 0:
            return f"{self.name} exited with {self.process.returncode}"
        return None


@dataclass
class Scenario(ProducerScenario):
    source_topic: str
    flink2_sink: str
    flink1_sink: str


ORDERS = [
    {
        "order_id": f"o{i}",
        "item": f"item-{i % 2}",
        "price": 10.0 + i,
        "supplier": s,
        "bid_time": f"2026-11-20 08:00:0{i}",
    }
    for i, s in enumerate(["acme", "globex", "initech", "acme", "globex", "initech"])
]


def produce_orders(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for order in ORDERS:
        producer.produce(topic, json.dumps(order).encode(), key=str(order["order_id"]).encode())
    assert producer.flush(30) == 0


def rest_cancel(port: int, flink_job_id: str) -> None:
    """Cancel a job the way the Flink web UI does (PATCH /jobs/<id>?mode=cancel)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/jobs/{flink_job_id}?mode=cancel", method="PATCH"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202


def types(events: list[Captured]) -> list[str]:
    return [c.type for c in events]


def run_scenario(scenario: Scenario, work: Path, intake: Intake, api_key: str) -> None:
    settings = scenario.settings
    bootstrap = settings.kafka.bootstrap_servers
    openlineage_yml = work / "openlineage.yml"
    template = string.Template((REPO / "conf/flink/openlineage.yml").read_text())
    openlineage_yml.write_text(
        template.substitute(
            bootstrap_servers=bootstrap,
            topic=settings.kafka.topic,
            tracking_interval_seconds=TRACKING_INTERVAL_S,
        )
    )
    over_http = work / "openlineage-http.yml"
    template = string.Template((REPO / "conf/flink/openlineage-http.yml").read_text())
    over_http.write_text(
        template.substitute(
            intake_url=intake.url, api_key=api_key, tracking_interval_seconds=TRACKING_INTERVAL_S
        )
    )
    watcher = TopicWatcher(bootstrap, settings.kafka.topic, 3, EVENT_TIMEOUT_S)
    started: list[FlinkProcess] = []

    def wait(what: str, ready: Callable[[], bool], process: FlinkProcess) -> None:
        watcher.wait(what, ready, process.diagnostics, process.failed)

    def job2(step: str, mode: str, config: Path = openlineage_yml) -> tuple[FlinkProcess, int]:
        port = free_port()
        args = [
            *("--bootstrap", bootstrap, "--source-topic", scenario.source_topic),
            *("--sink-topic", scenario.flink2_sink, "--job-name", FLINK2_JOB[1]),
            *("--rest-port", str(port), "--mode", mode),
        ]
        process = FlinkProcess.start(
            step, FLINK2_PYTHON, "tests.producers.flink.flink2_sql_job", args, work, config
        )
        started.append(process)
        return process, port

    def job1(step: str, mode: str) -> tuple[FlinkProcess, int]:
        port = free_port()
        args = [
            *("--bootstrap", bootstrap, "--source-topic", scenario.source_topic),
            *(
                "--sink-topic",
                scenario.flink1_sink,
                "--namespace",
                FLINK1_JOB[0],
                "--job-name",
                FLINK1_JOB[1],
            ),
            *("--rest-port", str(port), "--mode", mode, "--tracking-interval", str(TRACKING_INTERVAL_S)),
        ]
        process = FlinkProcess.start(
            step, FLINK1_PYTHON, "tests.producers.flink.flink1_datastream_job", args, work, openlineage_yml
        )
        started.append(process)
        return process, port

    def new_run(step: str, job: tuple[str, str], process: FlinkProcess) -> str:
        known = set(scenario.runs.values())
        wait(f"a new run of {job}", lambda: watcher.new_run(known, job) is not None, process)
        run_id = watcher.new_run(known, job)
        assert run_id is not None
        scenario.runs[step] = run_id
        return run_id

    def has(job: tuple[str, str], run_id: str, *wanted: str, running: int = 0) -> Callable[[], bool]:
        def check() -> bool:
            seen = types(watcher.run_events(run_id, job))
            return all(t in seen for t in wanted) and seen.count("RUNNING") >= running

        return check

    try:
        # Flink 2.x, bounded source, over HTTP to the intake: START, RUNNING (checkpoints), COMPLETE.
        t0 = time.monotonic()
        process, _ = job2("flink2_complete", "complete", over_http)
        run = new_run("flink2_complete", FLINK2_JOB, process)
        wait("flink2 COMPLETE", has(FLINK2_JOB, run, "START", "COMPLETE"), process)
        process.finish()
        assert "FINISHED" in process.stdout_lines()
        scenario.seconds["flink2_complete"] = time.monotonic() - t0

        # Flink 2.x, unbounded source, cancelled through its JobClient once a heartbeat was sent: ABORT.
        t0 = time.monotonic()
        process, _ = job2("flink2_cancel", "cancel")
        run = new_run("flink2_cancel", FLINK2_JOB, process)
        wait("flink2 START + RUNNING", has(FLINK2_JOB, run, "START", running=1), process)
        process.send("cancel")
        wait("flink2 ABORT", has(FLINK2_JOB, run, "ABORT"), process)
        process.finish()
        assert "CANCELLED" in process.stdout_lines()
        scenario.seconds["flink2_cancel"] = time.monotonic() - t0

        # Flink 1.x, bounded source, attached execution: START, RUNNING, COMPLETE.
        t0 = time.monotonic()
        process, _ = job1("flink1_complete", "bounded")
        run = new_run("flink1_complete", FLINK1_JOB, process)
        wait("flink1 COMPLETE", has(FLINK1_JOB, run, "START", "COMPLETE"), process)
        process.finish()
        assert "FINISHED" in process.stdout_lines()
        scenario.seconds["flink1_complete"] = time.monotonic() - t0

        # Flink 1.x, unbounded, cancelled through the REST API (as from the web UI): the client sees the
        # job fail, the 1.x listener sends FAIL.
        t0 = time.monotonic()
        process, port = job1("flink1_cancel", "unbounded")
        run = new_run("flink1_cancel", FLINK1_JOB, process)
        wait("flink1 START + RUNNING", has(FLINK1_JOB, run, "START", running=1), process)
        start = next(c for c in watcher.run_events(run, FLINK1_JOB) if c.type == "START")
        rest_cancel(port, start.event["run"]["facets"]["flink_job"]["jobId"])
        wait("flink1 FAIL", has(FLINK1_JOB, run, "FAIL"), process)
        process.finish()
        assert any(line.startswith("FAILED") for line in process.stdout_lines())
        scenario.seconds["flink1_cancel"] = time.monotonic() - t0

        # Flink 1.x, unbounded, the whole process (client, JobManager, TaskManager, listener) killed hard
        # after its heartbeats: no terminal event is ever sent.
        t0 = time.monotonic()
        process, _ = job1("flink1_stuck", "unbounded")
        run = new_run("flink1_stuck", FLINK1_JOB, process)
        wait("flink1 START + 3 RUNNING", has(FLINK1_JOB, run, "START", running=3), process)
        process.kill()
        scenario.seconds["flink1_stuck"] = time.monotonic() - t0
        # Whatever was still in flight lands now; nothing else can come (the JVM is gone).
        watcher.drain(5)
        assert types(watcher.run_events(run, FLINK1_JOB))[-1] == "RUNNING"
        scenario.events = list(watcher.seen)
    finally:
        for process in started:
            process.kill()
        watcher.close()


def write_golden(directory: Path, scenario: Scenario) -> None:
    """The captured events per Flink version, one JSON per line, in (partition, offset) order, unchanged."""
    directory.mkdir(parents=True, exist_ok=True)
    for version, job in (("flink2", FLINK2_JOB), ("flink1", FLINK1_JOB)):
        write_events(directory / f"{version}.jsonl", (c for c in scenario.events if c.job == job))


@pytest.fixture(scope="module")
def flink_lake(
    spark: SparkSession,
    base_settings: Settings,
    kafka_broker: LocalKafka,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scenario]:
    """Runs the five Flink jobs into a fresh topic, ingests and builds into a fresh catalog (once)."""
    work = tmp_path_factory.mktemp("flink")
    prefix = f"flink.{uuid.uuid4().hex[:8]}"
    bootstrap = kafka_broker.bootstrap_servers
    settings = lake_settings(spark, base_settings, work, bootstrap_servers=bootstrap, topic=f"{prefix}.runs")
    scenario = Scenario(
        settings, f"{prefix}.orders", f"{prefix}.supplier-stats-sql", f"{prefix}.supplier-stats"
    )
    create_topic(bootstrap, settings.kafka.topic, 3, kafka_broker.max_message_bytes)
    for name in (scenario.source_topic, scenario.flink2_sink, scenario.flink1_sink):
        create_topic(bootstrap, name, 1, kafka_broker.max_message_bytes)
    produce_orders(bootstrap, scenario.source_topic)

    api_key = new_key()
    intake = start_intake(
        bootstrap, settings.kafka.topic, work, api_key_hashes=json.dumps([hash_key(api_key)])
    )
    try:
        run_scenario(scenario, work, intake, api_key)
        with urllib.request.urlopen(f"{intake.url}/metrics", timeout=10) as answer:
            scenario.intake_metrics = answer.read().decode()
    finally:
        intake.stop()

    scenario.ingest_and_build(spark, SILENCE, LINEAGE_TABLES)
    golden = os.environ.get("FLINK_GOLDEN_DIR")
    if golden:
        write_golden(Path(golden), scenario)
    print(f"\nflink scenario seconds: { {k: round(v, 1) for k, v in scenario.seconds.items()} }")
    yield scenario


def runs_of(scenario: Scenario, job: tuple[str, str]) -> dict[str, dict[str, Any]]:
    return {
        step: scenario.run(step)
        for step in scenario.runs
        if (scenario.run(step)["job_namespace"], scenario.run(step)["job_name"]) == job
    }


def test_every_flink_event_lands_once_keyed_by_its_job(flink_lake: Scenario) -> None:
    raw = flink_lake.tables["raw"]
    assert flink_lake.rejected == 0
    assert flink_lake.rows_in == len(raw) == len(flink_lake.events) > 10
    assert {(r["job_namespace"], r["job_name"], r["kafka_key"]) for r in raw} == {
        (*FLINK2_JOB, "run:flink-jobs/supplier-stats-sql"),  # the Java Kafka transport's default key
        (*FLINK1_JOB, "run:flink1-lab/supplier-stats"),
    }
    assert {r["producer"] for r in raw} == {
        "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/flink"
    }


def test_flink2_events_over_http_land_as_the_kafka_transport_would_send_them(flink_lake: Scenario) -> None:
    run_id = flink_lake.runs["flink2_complete"]
    over_http = [c for c in flink_lake.events if "run" in c.event and c.run_id == run_id]
    assert {"START", "COMPLETE"} <= set(types(over_http))
    # Every event of that run went through the intake, none was refused or lost; keyed like the others.
    accepted = [
        line
        for line in flink_lake.intake_metrics.splitlines()
        if line.startswith("lineage_intake_events_total")
    ]
    assert accepted == [f'lineage_intake_events_total{{outcome="accepted"}} {float(len(over_http))}']
    assert {c.key for c in over_http} == {"run:flink-jobs/supplier-stats-sql"}
    landed = [r for r in flink_lake.tables["raw"] if r["run_id"] == run_id]
    assert len(landed) == len(over_http) and {r["kafka_key"] for r in landed} == {c.key for c in over_http}


def test_flink2_job_completes_once_and_aborts_when_cancelled(flink_lake: Scenario) -> None:
    job = next(j for j in flink_lake.tables["jobs"] if (j["job_namespace"], j["job_name"]) == FLINK2_JOB)
    assert (job["integration"], job["job_type"]) == ("FLINK", "JOB")
    # The bounded run says BATCH, the cancelled unbounded one STREAMING; the job keeps the latest.
    assert job["processing_type"] == "STREAMING"
    runs = runs_of(flink_lake, FLINK2_JOB)
    assert {step: (r["reported_state"], r["inferred_state"]) for step, r in runs.items()} == {
        "flink2_complete": ("COMPLETE", "COMPLETE"),
        "flink2_cancel": ("ABORT", "ABORT"),
    }
    for run in runs.values():
        assert run["run_id"][14] == "7"  # UUIDv7, derived from the Flink job id and its start time
        assert (run["processing_engine_name"], run["processing_engine_version"]) == ("flink", "2.0.2")
        assert run["openlineage_adapter_version"] == "1.53.0"
        assert run["started_at"] < run["ended_at"] and run["error_message"] is None
    summary = next(
        s for s in flink_lake.tables["job_summary"] if (s["job_namespace"], s["job_name"]) == FLINK2_JOB
    )
    assert (summary["run_count"], summary["completed_runs"], summary["aborted_runs"]) == (2, 1, 1)


def test_flink2_kafka_tables_merge_with_their_catalog_symlinks(flink_lake: Scenario) -> None:
    kafka = flink_lake.kafka_namespace()
    orders = flink_lake.dataset_id(kafka, flink_lake.source_topic)
    stats = flink_lake.dataset_id(kafka, flink_lake.flink2_sink)
    aliases = {
        (a["alias_namespace"], a["alias_name"]): (a["dataset_id"], a["alias_kind"])
        for a in flink_lake.tables["dataset_aliases"]
    }
    # The Flink SQL tables are symlinks (type TABLE) of the topics they read and write: one dataset each.
    assert aliases[(kafka, "default_catalog.default_database.orders")] == (orders, "symlink")
    assert aliases[(kafka, "default_catalog.default_database.supplier_stats")] == (stats, "symlink")
    # Datasets come on START only; both runs still read orders and write supplier-stats.
    io = {(r["run_id"], r["dataset_id"], r["direction"]) for r in flink_lake.tables["run_io"]}
    for step in ("flink2_complete", "flink2_cancel"):
        run = flink_lake.runs[step]
        assert {(d, direction) for r, d, direction in io if r == run} == {
            (orders, "input"),
            (stats, "output"),
        }
    schemas = {d["dataset_id"]: d["schema_fields"] for d in flink_lake.tables["datasets"]}
    assert [(f["name"], f["type"]) for f in schemas[orders]] == [
        ("order_id", "STRING"),
        ("item", "STRING"),
        ("price", "DOUBLE"),
        ("supplier", "STRING"),
        ("bid_time", "TIMESTAMP(3)"),
    ]
    assert [f["name"] for f in schemas[stats]] == [
        "window_start",
        "window_end",
        "supplier",
        "total_price",
        "order_count",
    ]


def test_flink1_runs_complete_fail_on_cancel_and_lost_when_killed(flink_lake: Scenario) -> None:
    job = next(j for j in flink_lake.tables["jobs"] if (j["job_namespace"], j["job_name"]) == FLINK1_JOB)
    assert (job["integration"], job["job_type"], job["processing_type"]) == ("FLINK", "JOB", "STREAMING")
    runs = runs_of(flink_lake, FLINK1_JOB)
    assert {step: (r["reported_state"], r["inferred_state"]) for step, r in runs.items()} == {
        "flink1_complete": ("COMPLETE", "COMPLETE"),
        "flink1_cancel": ("FAIL", "FAIL"),  # 1.x has no ABORT: a cancelled job fails in the client
        "flink1_stuck": ("RUNNING", "LOST"),
    }
    assert "JobCancellationException" in runs["flink1_cancel"]["error_stack_trace"]
    assert runs["flink1_cancel"]["error_language"] == "JAVA"
    stuck = runs["flink1_stuck"]
    assert stuck["ended_at"] is None and stuck["event_count"] >= 4  # START + at least 3 RUNNING
    # LOST from its deadline on (last event + threshold), which the build's reference time had passed.
    assert stuck["lost_after"] == stuck["last_event_at"] + timedelta(seconds=stuck["threshold_seconds"])
    # The heartbeat is ~1-2 s here, so the 900 s floor is the threshold.
    assert stuck["threshold_seconds"] == 900.0
    assert "median heartbeat" in stuck["liveness_reason"]
    for run in runs.values():
        assert (run["processing_engine_name"], run["processing_engine_version"]) == ("flink", "1.20.3")
    summary = next(
        s for s in flink_lake.tables["job_summary"] if (s["job_namespace"], s["job_name"]) == FLINK1_JOB
    )
    assert (summary["completed_runs"], summary["failed_runs"], summary["lost_runs"]) == (1, 1, 1)
    assert summary["last_run_state"] == "LOST"


def test_both_flink_versions_read_one_orders_dataset(flink_lake: Scenario) -> None:
    kafka = flink_lake.kafka_namespace()
    orders = flink_lake.dataset_id(kafka, flink_lake.source_topic)
    flink1_out = flink_lake.dataset_id(kafka, flink_lake.flink1_sink)
    flink2_out = flink_lake.dataset_id(kafka, flink_lake.flink2_sink)
    io = {(r["run_id"], r["dataset_id"], r["direction"]) for r in flink_lake.tables["run_io"]}
    for step in ("flink1_complete", "flink1_cancel", "flink1_stuck"):
        run = flink_lake.runs[step]
        assert {(d, direction) for r, d, direction in io if r == run} == {
            (orders, "input"),
            (flink1_out, "output"),
        }
    edges = {
        (e["source_dataset_id"], e["target_dataset_id"], e["job_namespace"], e["job_name"])
        for e in flink_lake.tables["dataset_edges"]
    }
    assert edges == {(orders, flink1_out, *FLINK1_JOB), (orders, flink2_out, *FLINK2_JOB)}
    # A DataStream job names topics only: no symlink, no schema for a SimpleStringSchema sink.
    flink1_dataset = next(d for d in flink_lake.tables["datasets"] if d["dataset_id"] == flink1_out)
    assert flink1_dataset["alias_count"] == 1
    assert not flink1_dataset["schema_fields"] and flink1_dataset["schema_hash"] is None
