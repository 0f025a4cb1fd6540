"""The pipeline against a broker with SASL_SSL (SCRAM-SHA-512, TLS certificate made at set-up) and no
automatic topic creation: topic creation, publishing, the ingestion, the build and our own events all
authenticate with the one ``kafka.security`` block, its password from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openlineage.client.serde import Serde
from pyspark.sql import SparkSession

from lineage.batch.build import build_lineage
from lineage.demo.events import lab_events
from lineage.ingest.stream import run_ingest
from lineage.instrument import observed_ingest
from lineage.io.local_kafka import LocalKafka, create_topic, free_port
from lineage.io.publish import publish_raw
from lineage.settings import MIB, Settings, load_settings
from tests.fixtures.lake import lake_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
USER = "lineage"
PASSWORD = f"pw-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    broker = LocalKafka(
        data_dir=tmp_path_factory.mktemp("kafka-sasl"),
        jars_dir=(REPO / ".jars/kafka").resolve(),
        port=free_port(),
        controller_port=free_port(),
        max_message_bytes=32 * MIB,
        partitions=2,
        sasl_ssl=True,
        users={USER: PASSWORD},
    )
    broker.start()
    yield broker
    broker.stop()


def security_env(broker: LocalKafka, password: str) -> dict[str, str]:
    """kafka.security as an operator sets it: all from the environment, nothing in conf/."""
    return {
        "LINEAGE__KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "LINEAGE__KAFKA__SECURITY__PROTOCOL": "SASL_SSL",
        "LINEAGE__KAFKA__SECURITY__USERNAME": USER,
        "LINEAGE__KAFKA__SECURITY__PASSWORD": password,
        "LINEAGE__KAFKA__SECURITY__CA_FILE": str(broker.ca_file),
        "LINEAGE__KAFKA__SECURITY__TRUSTSTORE_FILE": str(broker.truststore_file),
        "LINEAGE__KAFKA__SECURITY__TRUSTSTORE_PASSWORD": broker.truststore_password,
    }


def test_pipeline_over_sasl_ssl_including_our_own_events(
    spark: SparkSession,
    base_settings: Settings,
    sasl_broker: LocalKafka,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in security_env(sasl_broker, PASSWORD).items():
        monkeypatch.setenv(name, value)
    security = load_settings().kafka.security
    assert security.password is not None and PASSWORD not in repr(security)
    topic = f"sasl.{uuid.uuid4().hex[:8]}"
    settings = lake_settings(
        spark, base_settings, tmp_path, bootstrap_servers=sasl_broker.bootstrap_servers, topic=topic
    )
    # Our own events through the default conf/openlineage.yml, which names 127.0.0.1:9092 and no
    # credentials: they must follow [kafka] and kafka.security to this broker and topic.
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    settings = settings.model_copy(
        update={
            "kafka": settings.kafka.model_copy(update={"security": security}),
            "openlineage": settings.openlineage.model_copy(
                update={"enabled": True, "config": REPO / "conf/openlineage.yml", "emit_timeout_seconds": 30}
            ),
        }
    )
    client = security.librdkafka()
    create_topic(sasl_broker.bootstrap_servers, topic, 2, sasl_broker.max_message_bytes, client)
    lab = [Serde.to_json(e.event).encode() for e in lab_events()]
    publish_raw(sasl_broker.bootstrap_servers, topic, [(b"lab", m) for m in lab], 1 << 24, client)

    observed_ingest(spark, settings, trigger="availableNow")
    run_ingest(spark, settings, trigger="availableNow")  # lands what the first one said about itself
    events = spark.table(settings.catalog.events_table)
    assert events.where("job_namespace != 'lineage-lakehouse'").count() == len(lab)
    own = {r["event_type"] for r in events.where("job_namespace = 'lineage-lakehouse'").collect()}
    assert own == {"START", "COMPLETE"}, own
    build_lineage(spark, settings, now=datetime.now(UTC))
    runs = spark.table(settings.catalog.table("lineage", "runs")).count()
    assert runs >= 9


def test_a_wrong_password_is_one_clear_line(sasl_broker: LocalKafka, tmp_path: Path) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    env = {
        **os.environ,
        **security_env(sasl_broker, wrong),
        "LINEAGE__KAFKA__TOPIC": "sasl.never",
        "LINEAGE__CATALOG__SQLITE_PATH": str(tmp_path / "catalog.db"),
        "LINEAGE__CATALOG__WAREHOUSE": str(tmp_path / "warehouse"),
        "LINEAGE__INGEST__CHECKPOINT": str(tmp_path / "ckpt"),
    }
    done = subprocess.run(
        [sys.executable, "jobs/ingest_events.py", "--trigger", "availableNow"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ingest_events: Kafka at ")
    assert "refused our credentials as 'lineage'" in lines[0]
    assert wrong not in done.stderr + done.stdout
