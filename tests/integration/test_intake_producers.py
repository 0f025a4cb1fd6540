"""Real producers configured for HTTP, pointed at `lineage serve`.

- the OpenLineage Spark listener with ``spark.openlineage.transport.type=http`` (gzip, API key): the
  PySpark job of tests/producers/spark_orders_report.py, the one the Kafka-transport test runs;
- the seed lab's transport file shape, ``transport: {type: http, url: ...}`` in an openlineage.yml that
  openlineage-python finds through OPENLINEAGE_CONFIG, as a job of the lab would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from lineage.events.validate import validate
from lineage.io.local_kafka import LocalKafka
from lineage.serve.auth import hash_key, new_key
from tests.fixtures.intake import REPO, Intake, read_topic, start_intake

pytestmark = pytest.mark.integration

KEY = new_key()


@pytest.fixture(scope="module")
def service(kafka_broker: LocalKafka, intake_topic: str, intake_logs: Path) -> Iterator[Intake]:
    service = start_intake(
        kafka_broker.bootstrap_servers, intake_topic, intake_logs, api_key_hashes=json.dumps([hash_key(KEY)])
    )
    yield service
    service.stop()


def test_spark_listener_over_http(service: Intake, tmp_path: Path) -> None:
    producer = subprocess.run(
        [
            sys.executable,
            "tests/producers/spark_orders_report.py",
            "--http-url",
            service.url,
            f"--api-key={KEY}",
            "--warehouse",
            str(tmp_path / "shop"),
        ],
        cwd=REPO,
        capture_output=True,
        timeout=600,
    )
    assert producer.returncode == 0, producer.stderr[-3000:]

    records = [
        r for r in read_topic(service.bootstrap_servers, service.topic) if b"spark-shop" in (r.value or b"")
    ]
    verdicts = [validate(r.value) for r in records]
    assert len(records) > 10
    assert [v.reason for v in verdicts if not v.valid] == []
    jobs = {(v.document or {})["job"]["name"] for v in verdicts}
    assert "orders_report" in jobs and any(j.startswith("orders_report.") for j in jobs)
    # Every event of the application keyed by its root job, as the Kafka transport would key it.
    assert {r.key for r in records} == {b"run:spark-shop/orders_report"}
    metrics = requests.get(f"{service.url}/metrics", timeout=10).text
    assert 'lineage_intake_events_total{outcome="failed"}' not in metrics


def test_seed_lab_transport_file(service: Intake, tmp_path: Path) -> None:
    config = tmp_path / "openlineage.yml"
    config.write_text(
        f"transport:\n  type: http\n  url: {service.url}\n  auth:\n    type: api_key\n    apiKey: {KEY}\n"
    )
    run_id = str(uuid.uuid4())
    script = (
        "import sys\n"
        "from openlineage.client import OpenLineageClient\n"
        "from openlineage.client.event_v2 import Job, Run, RunEvent, RunState\n"
        "client = OpenLineageClient()\n"  # the configuration comes from OPENLINEAGE_CONFIG only
        "client.emit(RunEvent(eventType=RunState.COMPLETE, eventTime='2026-11-20T08:00:00Z',\n"
        "    run=Run(runId=sys.argv[1]), job=Job(namespace='seed-lab', name='supplier-stats'),\n"
        "    producer='urn:seed-lab'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    done = subprocess.run(
        [sys.executable, "-c", script, run_id],
        env={**env, "OPENLINEAGE_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    [record] = [
        r for r in read_topic(service.bootstrap_servers, service.topic) if run_id.encode() in (r.value or b"")
    ]
    assert record.key == b"run:seed-lab/supplier-stats"
    assert validate(record.value).valid
