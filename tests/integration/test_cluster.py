"""The same jobs on a real Spark standalone cluster, Iceberg's REST catalog server and an S3-API object store.

One pass through the pipeline (module fixture ``on_cluster``), checked from several sides:

1. the ingestion is spark-submitted (availableNow, 120 offsets per batch); mid-stream worker 1 and its
   executor are SIGKILLed and the worker restarted: the application carries on; then, with new messages in
   the topic, another submitted ingestion loses its driver mid-stream (spark-submit and the Python driver
   SIGKILLed together) and the next ingestion resumes from the checkpoint in the bucket;
2. a second ingestion (processing-time trigger) and the first build run side by side on one core each; new
   events are published once the build has committed its first step, so the ingestion commits to the
   shared REST catalog while the build runs;
3. the ingestion is stopped with SIGTERM (as a scheduler stops it); an incremental build follows on the
   whole cluster;
4. the same topic is ingested and built with the embedded default in the test session's Spark.

Every Kafka offset lands once; the cluster's lineage tables after its full and incremental builds equal the
embedded ones; executors on both workers ran tasks; the CLI answers from the REST catalog.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo
from pyspark.sql import SparkSession

from lineage.batch.build import BUILD_TABLES, RANGE, build_lineage
from lineage.cli.main import CLUSTER_ENV
from lineage.ingest.stream import run_ingest
from lineage.io.catalog import open_catalog
from lineage.io.local_kafka import LocalKafka, create_topic
from lineage.io.preflight import ConfigError, check_settings
from lineage.io.publish import publish_raw
from lineage.settings import Settings
from tests.fixtures.cluster import (
    REPO,
    Cluster,
    Submitted,
    executors_per_worker,
    finished,
    listening_addresses,
    wait_for,
)
from tests.fixtures.lake import LAB_ALIAS_RULES, lake_settings
from tests.fixtures.pipeline import stuck_run_events
from tests.integration.test_ingest import _mixed_messages, coordinates, expected_coordinates, publish_lab

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
NOW_ARG = "2026-11-22T12:00:00Z"
FIRST_MIXED = 600
SECOND_MIXED = 100
DRIVER_LOSS_MIXED = 1200  # ten batches of 120 offsets: the driver is killed after the first has landed


@dataclass
class ClusterRun:
    settings: Settings
    topic: str
    logs: Path
    submitted: dict[str, Submitted] = field(default_factory=dict)
    killed_at: int = 0
    driver_killed: tuple[int, int] = (0, 0)  # rows landed before that ingestion started, and at its kill
    build_window_ms: tuple[int, int] = (0, 0)
    tables: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    lineage_events: list[dict[str, Any]] = field(default_factory=list)


def _landed_count(settings: Settings, topic: str) -> int:
    try:
        catalog = open_catalog(settings.catalog)
        ns = settings.catalog.raw_namespace
        return sum(
            catalog.load_table((ns, t)).scan(row_filter=EqualTo("kafka_topic", topic)).count()
            for t in ("events", "rejected")
        )
    except Exception:  # tables not created yet
        return 0


def _landed(settings: Settings, topic: str) -> list[tuple[int, int]]:
    catalog = open_catalog(settings.catalog)
    ns = settings.catalog.raw_namespace
    tables = [
        catalog.load_table((ns, t)).scan(row_filter=EqualTo("kafka_topic", topic)).to_arrow()
        for t in ("events", "rejected")
    ]
    return sorted(coordinates(*tables))


def _rows(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """Every lineage table's rows (pyiceberg), normalised for comparison across catalogs."""
    catalog = open_catalog(settings.catalog)
    out = {}
    for name in BUILD_TABLES:
        arrow = catalog.load_table((settings.catalog.lineage_namespace, name)).scan().to_arrow()
        if RANGE in arrow.column_names:  # which build range extracted a row is bookkeeping
            arrow = arrow.drop_columns([RANGE])
        rows = [_normal(row) for row in arrow.to_pylist()]
        out[name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return out


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _start_logged(cluster: Cluster, log: Path, job: str, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    """spark-submit with its output to ``log`` (a long run would fill a pipe nobody reads)."""
    conf = kwargs.pop("conf", None)
    with log.open("w") as out:
        return subprocess.Popen(
            cluster.command(job, *args, conf=conf, **kwargs),
            cwd=REPO,
            env=cluster.env(**kwargs),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def _ingesting_until(
    cluster: Cluster, log: Path, env: dict[str, str], settings: Settings, rows: int
) -> subprocess.Popen[str]:
    """A submitted ingestion (availableNow, 120 offsets per batch), still running once ``rows`` rows of
    its topic have landed."""
    process = _start_logged(
        cluster,
        log,
        "ingest",
        "--trigger",
        "availableNow",
        LINEAGE__INGEST__MAX_OFFSETS_PER_TRIGGER="120",
        **env,
    )
    topic = env["LINEAGE__KAFKA__TOPIC"]
    landed_or_ended = lambda: _landed_count(settings, topic) >= rows or process.poll() is not None  # noqa: E731
    wait_for(landed_or_ended, 600, f"{rows} rows landed")
    assert process.poll() is None, log.read_text()[-3000:]
    return process


def _wait_done(process: subprocess.Popen[str], log: Path, timeout: float = 900) -> Submitted:
    process.wait(timeout=timeout)
    return finished(process, log.read_text())


def _python_driver(process: subprocess.Popen[str]) -> psutil.Process:
    """The Python driver spark-submit's JVM started for a job (the process a scheduler signals)."""
    for child in psutil.Process(process.pid).children(recursive=True):
        try:
            if "python" in child.name() and any(part.endswith(".py") for part in child.cmdline()):
                return child
        except psutil.Error:  # exited meanwhile, or a zombie
            continue
    raise AssertionError("no Python driver under spark-submit")


@pytest.fixture(scope="module")
def on_cluster(
    cluster: Cluster,
    kafka_broker: LocalKafka,
    spark: SparkSession,
    base_settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch_module: pytest.MonkeyPatch,
) -> ClusterRun:
    started = time.monotonic()
    logs = tmp_path_factory.mktemp("cluster_logs")
    for key, value in cluster.stack.credentials().env().items():
        monkeypatch_module.setenv(key, value)  # pyiceberg in this process reads the store like the CLI
    topic = f"cluster.{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap_servers, topic, 3, kafka_broker.max_message_bytes)
    publish_lab(kafka_broker, topic)
    publish_raw(
        kafka_broker.bootstrap_servers, topic, _mixed_messages(FIRST_MIXED), kafka_broker.max_message_bytes
    )
    env = {
        "LINEAGE__KAFKA__TOPIC": topic,
        "LINEAGE__INGEST__CHECKPOINT": f"s3a://{cluster.stack.settings.bucket}/checkpoints/{topic}",
    }
    settings = cluster.settings(**env)
    run = ClusterRun(settings, topic, logs)

    # 1. Ingestion in batches of 150 offsets; worker 1 and its executor lost mid-stream, then back.
    log = logs / "ingest-1.log"
    first = _ingesting_until(cluster, log, env, settings, 240)
    run.killed_at = _landed_count(settings, topic)
    worker = cluster.stack.worker(0)
    worker.kill()
    time.sleep(3)
    worker.start()
    run.submitted["ingest-1"] = _wait_done(first, log)

    # 1b. The driver lost mid-stream: the whole spark-submit session SIGKILLed (the JVM and the Python
    # driver in client mode), as a node failure or an OOM killer would. Step 2's ingestion resumes from the
    # checkpoint.
    before = _landed_count(settings, topic)
    publish_raw(
        kafka_broker.bootstrap_servers,
        topic,
        _mixed_messages(DRIVER_LOSS_MIXED),
        kafka_broker.max_message_bytes,
    )
    doomed = _ingesting_until(cluster, logs / "ingest-driver-killed.log", env, settings, before + 1)
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=60)
    run.driver_killed = (before, _landed_count(settings, topic))

    # 2. A streaming ingestion and the first build side by side (one core each) on the same catalog.
    log_ingest, log_build = logs / "ingest-2.log", logs / "build-1.log"
    one_core = {"spark.cores.max": "1"}
    second = _start_logged(cluster, log_ingest, "ingest", "--trigger", "2 seconds", conf=one_core, **env)
    wait_for(lambda: "ingesting " in log_ingest.read_text() or second.poll() is not None, 300, "query start")
    build_started = int(time.time() * 1000)
    build = _start_logged(cluster, log_build, "build", "--now", NOW_ARG, conf=one_core, **env)
    wait_for(lambda: "build step" in log_build.read_text() or build.poll() is not None, 600, "a build step")
    batch = [(b"lab", e) for e in stuck_run_events(str(uuid.uuid4()))]
    batch += _mixed_messages(SECOND_MIXED)
    publish_lab(kafka_broker, topic)  # the lab's events once more: duplicates of landed events
    publish_raw(kafka_broker.bootstrap_servers, topic, batch, kafka_broker.max_message_bytes)
    run.submitted["build-1"] = _wait_done(build, log_build)
    run.build_window_ms = (build_started, int(time.time() * 1000))
    total = len(expected_coordinates(kafka_broker, topic))
    wait_for(lambda: _landed_count(settings, topic) >= total, 300, f"all {total} messages landed")
    _python_driver(second).send_signal(signal.SIGTERM)
    run.submitted["ingest-2"] = _wait_done(second, log_ingest, timeout=180)

    # 3. The incremental build on the whole cluster, reporting itself (file transport).
    events_file = logs / "openlineage.jsonl"
    yml = logs / "openlineage.yml"
    yml.write_text(f"transport:\n  type: file\n  log_file_path: {events_file}\n  append: true\n")
    reporting = {"LINEAGE__OPENLINEAGE__ENABLED": "true", "OPENLINEAGE_CONFIG": str(yml)}
    run.submitted["build-2"] = cluster.run("build", "--now", NOW_ARG, **env, **reporting)
    run.tables["incremental"] = _rows(settings)
    if events_file.is_file():
        run.lineage_events = [json.loads(line) for line in events_file.read_text().splitlines() if line]

    # 4. The embedded default on the same topic, in this session's Spark.
    embedded = lake_settings(
        spark,
        base_settings,
        tmp_path_factory.mktemp("cluster_embedded"),
        bootstrap_servers=kafka_broker.bootstrap_servers,
        topic=topic,
        build=base_settings.build.model_copy(update={"alias_rules": LAB_ALIAS_RULES}),
    )
    run_ingest(spark, embedded, trigger="availableNow")
    build_lineage(spark, embedded, now=NOW)
    run.tables["embedded"] = _rows(embedded)
    print(f"\ncluster pipeline: {time.monotonic() - started:.0f} s")
    return run


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_every_submitted_job_succeeded(on_cluster: ClusterRun) -> None:
    for name, submitted in on_cluster.submitted.items():
        assert submitted.returncode == 0, f"{name}:\n{submitted.output[-4000:]}"
        assert submitted.app_id, f"{name}: no application id in its output"


def test_worker_loss_mid_stream_lands_every_offset_exactly_once(
    on_cluster: ClusterRun, kafka_broker: LocalKafka
) -> None:
    expected = expected_coordinates(kafka_broker, on_cluster.topic)
    assert 0 < on_cluster.killed_at < FIRST_MIXED
    landed = _landed(on_cluster.settings, on_cluster.topic)
    assert len(landed) == len(set(landed)), "duplicates"
    assert landed == expected
    assert "ExecutorLostFailure" in on_cluster.submitted["ingest-1"].output or "lost" in (
        on_cluster.submitted["ingest-1"].output.lower()
    )


def test_driver_loss_mid_stream_lands_every_offset_exactly_once(
    on_cluster: ClusterRun, kafka_broker: LocalKafka
) -> None:
    before, at_kill = on_cluster.driver_killed
    assert before < at_kill < before + DRIVER_LOSS_MIXED, f"not killed mid-stream: {on_cluster.driver_killed}"
    landed = _landed(on_cluster.settings, on_cluster.topic)
    assert len(landed) == len(set(landed)), "duplicates"
    assert landed == expected_coordinates(kafka_broker, on_cluster.topic)


def test_executors_on_both_workers_ran_tasks(on_cluster: ClusterRun, cluster: Cluster) -> None:
    workers = {cluster.stack.worker_ui(i) for i in range(cluster.stack.settings.workers)}
    for name in ("ingest-1", "build-2"):
        app_id = on_cluster.submitted[name].app_id
        assert app_id
        tasks = executors_per_worker(cluster, app_id)
        assert set(tasks) == workers and all(n > 0 for n in tasks.values()), f"{name} {app_id}: {tasks}"


def test_ingestion_committed_while_the_build_ran(on_cluster: ClusterRun) -> None:
    table = open_catalog(on_cluster.settings.catalog).load_table(("raw", "events"))
    start, end = on_cluster.build_window_ms
    during = [s for s in table.metadata.snapshots if start <= s.timestamp_ms <= end]
    assert during, "no raw.events commit while the first build ran"
    assert on_cluster.submitted["build-1"].returncode == 0


def test_full_then_incremental_build_equal_the_embedded_build(on_cluster: ClusterRun) -> None:
    # build-1 was the full build (beside the ingestion), build-2 the incremental one over what landed after.
    assert "full build" in on_cluster.submitted["build-1"].output
    assert "incremental build" in on_cluster.submitted["build-2"].output
    embedded = on_cluster.tables["embedded"]
    for name in BUILD_TABLES:
        assert on_cluster.tables["incremental"][name] == embedded[name], f"lineage.{name} differs"


def test_tables_and_checkpoint_are_in_the_bucket(on_cluster: ClusterRun, cluster: Cluster) -> None:
    bucket = cluster.stack.bucket_folder
    table = open_catalog(on_cluster.settings.catalog).load_table(("raw", "events"))
    assert table.location().startswith(f"s3://{cluster.stack.settings.bucket}/warehouse/")
    data = bucket / table.location().split("/", 3)[3] / "data"  # s3://<bucket>/<key>
    assert any(data.rglob("*.parquet"))
    checkpoint = bucket / "checkpoints" / on_cluster.topic
    assert (checkpoint / "offsets").is_dir() and (checkpoint / "commits").is_dir()


def test_the_build_reports_itself_with_object_store_names(on_cluster: ClusterRun, cluster: Cluster) -> None:
    complete = [e for e in on_cluster.lineage_events if e["eventType"] == "COMPLETE"]
    assert complete, "no COMPLETE event from the build"
    outputs = complete[-1]["outputs"]
    assert outputs
    bucket = f"s3://{cluster.stack.settings.bucket}"
    assert {o["namespace"] for o in outputs} == {bucket}
    symlinks = outputs[0]["facets"]["symlinks"]["identifiers"]
    assert symlinks[0]["namespace"] == cluster.stack.catalog_uri


def test_cli_answers_from_the_rest_catalog(on_cluster: ClusterRun, cluster: Cluster) -> None:
    env = cluster.env(LINEAGE__OPENLINEAGE__ENABLED="false")
    result = subprocess.run(
        [
            str(Path(cluster.env()["PYSPARK_PYTHON"]).parent / "lineage"),
            "runs",
            "--state",
            "lost",
            "--limit",
            "5000",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "fh-local/supplier-stats" in result.stdout
    assert "stuck-for-close-run" in result.stdout


def test_the_rest_catalog_listens_on_loopback_only(cluster: Cluster) -> None:
    """It authenticates nobody: by default only this machine reaches it (Iceberg's server alone listens on
    every interface)."""
    port = cluster.stack.settings.catalog_port
    assert listening_addresses(port) == {"127.0.0.1"}  # IPv4 loopback (or its IPv6-mapped form) only
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/config", timeout=10) as response:
        assert response.status == 200


def test_the_cli_without_the_object_stores_keys_says_how_to_get_them(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The REST catalog answers without keys, the object store does not: one line naming the remedy."""
    for key, value in cluster.stack.credentials().env().items():
        monkeypatch.setenv(key, value)
    namespace = f"nokeys_{uuid.uuid4().hex[:8]}"  # a table of its own: the lineage tables stay untouched
    catalog = open_catalog(cluster.settings().catalog)
    catalog.create_namespace(namespace)
    table = catalog.create_table((namespace, "runs"), pa.schema([pa.field("run_id", pa.string())]))
    table.append(pa.table({"run_id": ["r"]}))
    env = {**os.environ, **cluster.env(LINEAGE__CATALOG__LINEAGE_NAMESPACE=namespace)}
    result = subprocess.run(
        [str(Path(env["PYSPARK_PYTHON"]).parent / "lineage"), "runs"],
        cwd=REPO,
        env={k: v for k, v in env.items() if not k.startswith("AWS_")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "ACCESS_DENIED" in lines[0], result.stderr
    assert "AWS_ACCESS_KEY_ID is not set" in lines[0] and lines[0].endswith(CLUSTER_ENV)


# -- misconfiguration: one line, before any JVM ----------------------------------------------------------
def test_unreachable_catalog_is_one_line(cluster: Cluster) -> None:
    settings = cluster.settings()
    props = {**settings.catalog.properties, "uri": "http://127.0.0.1:1/iceberg"}
    broken = settings.model_copy(
        update={"catalog": settings.catalog.model_copy(update={"properties": props})}
    )
    with pytest.raises(
        ConfigError, match=r"catalog 'lake' at http://127.0.0.1:1/iceberg .*connection refused"
    ):
        check_settings(broken, checkpoint=False)


def test_wrong_credentials_are_one_line(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in cluster.stack.credentials().env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(ConfigError, match=r"warehouse s3://.* refused: .*wrong credentials"):
        check_settings(cluster.settings(AWS_SECRET_ACCESS_KEY="not-the-secret"), checkpoint=False)


def test_missing_bucket_is_one_line(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in cluster.stack.credentials().env().items():
        monkeypatch.setenv(key, value)
    settings = cluster.settings(LINEAGE__INGEST__CHECKPOINT="s3a://no-such-bucket/checkpoints/x")
    with pytest.raises(ConfigError, match="bucket 'no-such-bucket' does not exist"):
        check_settings(settings, checkpoint=True)


def test_unreachable_master_fails_the_submitted_job_with_one_line(cluster: Cluster) -> None:
    env = {"LINEAGE__SPARK__MASTER": "spark://127.0.0.1:1"}
    submitted = cluster.run("build", timeout=300, **env)
    assert submitted.returncode == 2, submitted.output[-2000:]
    assert "Traceback" not in submitted.output
    message = (
        "build_lineage: Spark master spark://127.0.0.1:1 is unreachable (127.0.0.1:1: Connection refused); "
        "check spark.master"
    )
    assert [line for line in submitted.output.splitlines() if "build_lineage:" in line] == [message]


def test_spark_rpc_is_authenticated_and_a_wrong_secret_is_one_line(cluster: Cluster) -> None:
    secret = cluster.stack.spark_secret()
    for service in [cluster.stack.master(), *cluster.stack.workers()]:
        log = service.log_file.read_text()
        assert "SecurityManager: authentication enabled" in log, service.name
        assert secret not in log, service.name  # executors get it from the worker's environment
    wrong = "not-the-masters-secret"
    submitted = cluster.run("build", timeout=300, LINEAGE__SPARK__AUTH_SECRET=wrong)
    assert submitted.returncode == 2, submitted.output[-2000:]
    assert "Traceback" not in submitted.output
    lines = [line for line in submitted.output.splitlines() if line.startswith("build_lineage:")]
    assert len(lines) == 1, submitted.output[-3000:]
    assert lines[0].startswith(f"build_lineage: Spark master {cluster.stack.master_url} did not accept")
    assert "its secret is not the one of spark.auth_secret" in lines[0]
    assert wrong not in submitted.output and secret not in submitted.output
