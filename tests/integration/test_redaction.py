"""Secrets planted in valid events (and a rejected message) go through the real ingestion and build, and
appear in no table, no CLI output and no graph page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lineage.batch.build import BUILD_TABLES, build_lineage
from lineage.events.redact import MARKER
from lineage.ingest.stream import run_ingest
from lineage.io.local_kafka import LocalKafka, create_topic
from lineage.io.publish import publish_raw
from lineage.settings import Settings
from tests.fixtures.intake import Intake, read_topic, start_intake

pytestmark = pytest.mark.integration

LINEAGE = str(Path(sys.executable).with_name("lineage"))
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"

# The six secrets of the issue, then more of our own. Each is a unique string, searched case-blind.
JDBC_PW = "Jdbc-Pw-1a"
JAAS_PW = "Jaas-Pw-2b"
BEARER = "Bearer-Tok-3c0123456789"
AWS_SECRET = "wJalrXUtnFEMI-K7MDENG-4d"
API_KEY = "Api-Key-5e"
NS_PW = "Ns-Pw-6f"
AWS_KEY_ID = "AKIAZZZZ7GHIJKLMNOPQ"
GIT_PW = "Git-Pw-8h"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC9i"
REJECTED_PW = "Rejected-Pw-10j"
SECRETS = [JDBC_PW, JAAS_PW, BEARER, AWS_SECRET, API_KEY, NS_PW, AWS_KEY_ID, GIT_PW, PEM_BODY, REJECTED_PW]

DB_NAMESPACE = f"postgres://dbuser:{NS_PW}@db.example.com:5432"
JOB = ("spark-secrets", "leaky_app.write_out")


def events(run_id: str) -> list[bytes]:
    base = {"producer": PRODUCER, "schemaURL": SCHEMA_URL}
    job = {
        "namespace": JOB[0],
        "name": JOB[1],
        "facets": {
            "documentation": {
                "_producer": PRODUCER,
                "_schemaURL": "x",
                "description": f"reads jdbc:postgresql://db.example.com/app?user=app&password={JDBC_PW}",
            },
            "sourceCodeLocation": {
                "_producer": PRODUCER,
                "_schemaURL": "x",
                "type": "git",
                "url": f"https://ci:{GIT_PW}@git.example.com/team/repo.git",
                "repoUrl": f"https://ci:{GIT_PW}@git.example.com/team/repo.git",
            },
        },
    }
    start = {
        **base,
        "eventType": "START",
        "eventTime": "2026-11-22T10:00:00Z",
        "run": {
            "runId": run_id,
            "facets": {
                "spark_properties": {
                    "_producer": PRODUCER,
                    "_schemaURL": "x",
                    "properties": {
                        "spark.master": "local[2]",
                        "spark.kafka.sasl.jaas.config": (
                            "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="alice" password="{JAAS_PW}";'
                        ),
                        "spark.hadoop.fs.s3a.secret.key": AWS_SECRET,
                        "spark.hadoop.fs.s3a.access.key": AWS_KEY_ID,
                        "spark.ssl.keyPem": (
                            f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----"
                        ),
                    },
                }
            },
        },
        "job": job,
        "inputs": [{"namespace": DB_NAMESPACE, "name": "public.orders"}],
        "outputs": [{"namespace": "s3://bucket", "name": f"out/data?api_key={API_KEY}"}],
    }
    fail = {
        **base,
        "eventType": "FAIL",
        "eventTime": "2026-11-22T10:05:00Z",
        "run": {
            "runId": run_id,
            "facets": {
                "errorMessage": {
                    "_producer": PRODUCER,
                    "_schemaURL": "x",
                    "message": f"HTTP 401 from the catalog, sent Authorization: Bearer {BEARER}",
                    "programmingLanguage": "JAVA",
                    "stackTrace": f"java.io.IOException: key {AWS_KEY_ID} refused\n\tat x.y(Z.java:1)",
                }
            },
        },
        "job": job,
        "inputs": [{"namespace": DB_NAMESPACE, "name": "public.orders"}],
        "outputs": [{"namespace": "s3://bucket", "name": f"out/data?api_key={API_KEY}"}],
    }
    return [json.dumps(start).encode(), json.dumps(fail).encode()]


def leaks(text: str) -> list[str]:
    low = text.lower()
    return [s for s in SECRETS if s.lower() in low]


def run_cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([LINEAGE, *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_planted_secrets_reach_no_table_cli_output_or_graph(
    spark: SparkSession, own_lake: Settings, tmp_path: Path
) -> None:
    run_id = str(uuid.uuid4())
    messages = [(b"k", e) for e in events(run_id)]
    messages.append((b"k", f'{{"broken json, password={REJECTED_PW}'.encode()))
    publish_raw(own_lake.kafka.bootstrap_servers, own_lake.kafka.topic, messages, 1 << 24)
    run_ingest(spark, own_lake, trigger="availableNow")
    build_lineage(spark, own_lake, now=NOW)

    catalog = own_lake.catalog
    raw = spark.table(catalog.events_table).collect()
    assert len(raw) == 2 and all(r["redactions"] >= 7 for r in raw), [r["redactions"] for r in raw]
    for row in raw:
        json.loads(row["event_json"])  # still valid JSON
    rejected = spark.table(catalog.rejected_table).collect()
    assert [r["reason"] for r in rejected] == ["NOT_JSON"] and rejected[0]["redactions"] == 1
    assert MARKER.encode() in bytes(rejected[0]["value"])

    found: dict[str, list[str]] = {}
    tables = [catalog.events_table, catalog.rejected_table] + [
        catalog.table(catalog.lineage_namespace, name) for name in BUILD_TABLES
    ]
    for name in tables:
        frame = spark.table(name)
        binary = [f.name for f in frame.schema.fields if f.dataType.simpleString() == "binary"]
        text = "\n".join(frame.drop(*binary).toJSON().collect())
        for column in binary:
            values = [bytes(r[0]).decode("utf-8", "replace") for r in frame.select(column).collect() if r[0]]
            text += "\n".join(values)
        if leaks(text):
            found[name] = leaks(text)
    assert not found, found

    # The datasets are still there, under their redacted names (the namespace lower-cased by the build).
    names = {
        f"{r['namespace']}/{r['name']}" for r in spark.table(catalog.table("lineage", "datasets")).collect()
    }
    assert f"postgres://dbuser:{MARKER.lower()}@db.example.com:5432/public.orders" in names, names
    output = next(n for n in names if n.startswith("s3://bucket/"))
    assert output == f"s3://bucket/out/data?api_key={MARKER}", names

    env = {
        **os.environ,
        "LINEAGE__CATALOG__NAME": catalog.name,
        "LINEAGE__CATALOG__SQLITE_PATH": str(catalog.sqlite_path),
        "LINEAGE__CATALOG__WAREHOUSE": str(catalog.warehouse),
        "LINEAGE__OPENLINEAGE__ENABLED": "false",
    }
    job = f"{JOB[0]}/{JOB[1]}"
    outputs = {
        "runs": run_cli(env, "runs", "--json"),
        "run": run_cli(env, "run", run_id),
        "run --json": run_cli(env, "run", run_id, "--json"),
        "upstream": run_cli(env, "upstream", output),
        "downstream": run_cli(env, "downstream", job, "--json"),
        "graph json": run_cli(env, "graph", job, "--format", "json"),
        "graph mermaid": run_cli(env, "graph", job, "--format", "mermaid"),
    }
    html = tmp_path / "graph.html"
    run_cli(env, "graph", job, "-o", str(html))
    outputs["graph html"] = html.read_text()
    assert "leaky_app.write_out" in outputs["graph html"] and MARKER in outputs["run --json"]
    assert not {k: leaks(v) for k, v in outputs.items() if leaks(v)}


def _post(url: str, path: str, body: bytes) -> int:
    request = urllib.request.Request(
        f"{url}{path}", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return int(answer.status)


def test_the_intake_redacts_before_producing(intake: Intake) -> None:
    start, fail = events(str(uuid.uuid4()))
    assert _post(intake.url, "/api/v1/lineage", start) == 200
    assert _post(intake.url, "/api/v1/lineage/batch", b"[" + fail + b"]") == 200
    values = [r.value.decode() for r in read_topic(intake.bootstrap_servers, intake.topic) if r.value]
    mine = [v for v in values if JOB[1] in v]
    assert len(mine) == 2
    assert not [leaks(v) for v in mine if leaks(v)]
    assert all(MARKER in v for v in mine) and all(json.loads(v)["job"]["name"] == JOB[1] for v in mine)
    assert JAAS_PW not in intake.log()


def test_the_intake_produces_unchanged_when_told_to(
    kafka_broker: LocalKafka, intake_logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"intake.plain.{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap_servers, topic, 1, kafka_broker.max_message_bytes)
    monkeypatch.setenv("LINEAGE__REDACT__INTAKE", "false")
    service = start_intake(kafka_broker.bootstrap_servers, topic, intake_logs)
    try:
        start, _ = events(str(uuid.uuid4()))
        assert _post(service.url, "/api/v1/lineage", start) == 200
        [record] = read_topic(kafka_broker.bootstrap_servers, topic)
        assert record.value == start  # byte for byte: the ingestion redacts it before it lands
    finally:
        service.stop()
