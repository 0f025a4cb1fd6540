"""Self-instrumentation without Spark: transports by configuration alone, failures never fatal."""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from pathlib import Path

import pytest
from openlineage.client.event_v2 import RunState
from openlineage.client.serde import Serde

from lineage.observe import (
    EmitError,
    RunRef,
    location_name,
    parent_from_env,
    send_now,
    tracked_run,
    use_default_config,
)
from lineage.query.errors import LookupError_
from lineage.query.nodes import display_name
from lineage.query.params import parse_time
from lineage.settings import OpenLineageSettings


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ol_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No OpenLineage configuration from the developer's environment leaks into these tests."""
    # (the client itself copies some variables into OPENLINEAGE__* ones: clear them all)
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def settings(**kwargs: object) -> OpenLineageSettings:
    return OpenLineageSettings(**{"config": None, "emit_timeout_seconds": 5, **kwargs})


def run_a_job(cfg: OpenLineageSettings, fail: bool = False) -> str:
    with tracked_run(cfg, "unit_job", processing_type="BATCH", engine=("spark", "4.1.3")) as run:
        run.emit(RunState.START)
        if fail:
            raise ValueError("boom")
        run.emit(RunState.COMPLETE)
        return run.run_id


def test_file_transport_by_configuration_alone(ol_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = ol_env / "events.jsonl"
    yml = ol_env / "ol.yml"
    yml.write_text(f"transport:\n  type: file\n  log_file_path: {out}\n  append: true\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(yml))
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", "airflow/dag.task/01930000-0000-7000-8000-000000000001")
    run_id = run_a_job(settings())
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert {e["run"]["runId"] for e in events} == {run_id}
    first = events[0]
    assert first["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    assert first["run"]["facets"]["processing_engine"]["name"] == "spark"
    parent = first["run"]["facets"]["parent"]
    assert (parent["job"]["namespace"], parent["job"]["name"]) == ("airflow", "dag.task")
    assert first["run"]["facets"]["parent"]["run"]["runId"] == "01930000-0000-7000-8000-000000000001"
    for event in events:  # the fields our ingestion requires
        assert event["eventTime"] and event["producer"] and event["schemaURL"]
        assert uuid.UUID(event["run"]["runId"]).version == 7
        assert event["job"] == {**event["job"], "namespace": "lineage-lakehouse", "name": "unit_job"}


def test_fail_event_carries_the_error(ol_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = ol_env / "events.jsonl"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(out))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    with pytest.raises(ValueError, match="boom"):
        run_a_job(settings(), fail=True)
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    error = events[1]["run"]["facets"]["errorMessage"]
    assert error["message"] == "ValueError: boom"
    assert "raise ValueError" in error["stackTrace"]


def test_console_transport(
    ol_env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "console")
    with caplog.at_level(logging.INFO):
        run_id = run_a_job(settings())
    assert sum(run_id in record.getMessage() for record in caplog.records) == 2


@pytest.mark.parametrize("kind", ["http", "kafka"])
def test_unreachable_transport_warns_once_and_the_job_goes_on(
    ol_env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    port = closed_port()
    yml = ol_env / "ol.yml"
    if kind == "http":
        yml.write_text(f"transport:\n  type: http\n  url: http://127.0.0.1:{port}\n  timeout: 1\n")
    else:
        yml.write_text(
            "transport:\n  type: kafka\n  topic: t\n  flush: true\n"
            f"  config:\n    bootstrap.servers: 127.0.0.1:{port}\n    message.timeout.ms: 60000\n"
        )
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(yml))
    with caplog.at_level(logging.WARNING, logger="lineage.observe"):
        run_id = run_a_job(settings(emit_timeout_seconds=2))
    assert run_id  # the job's own result came back
    warnings = [r for r in caplog.records if "could not be emitted" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "lineage-lakehouse/unit_job" in warnings[0].getMessage()


def test_send_now_raises_on_an_unreachable_transport(ol_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENLINEAGE_URL", f"http://127.0.0.1:{closed_port()}")
    with tracked_run(settings(), "x", processing_type="BATCH") as run:
        event = run.event(RunState.ABORT)
    with pytest.raises(EmitError):
        send_now(event, settings(emit_timeout_seconds=3))


def test_disabled_sends_nothing(ol_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = ol_env / "events.jsonl"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(out))
    run_a_job(settings(enabled=False))
    assert not out.exists()


def test_default_config_only_when_the_client_has_none(ol_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = ol_env / "conf.yml"
    ours.write_text("transport:\n  type: console\n")
    use_default_config(settings(config=ours))
    assert Path(os.environ["OPENLINEAGE_CONFIG"]) == ours

    monkeypatch.delenv("OPENLINEAGE_CONFIG")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "console")
    use_default_config(settings(config=ours))
    assert "OPENLINEAGE_CONFIG" not in os.environ


def test_run_ref_and_parent_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = RunRef.parse("http://jobmanager:8081/my/job/01930000-0000-7000-8000-000000000001")
    assert (ref.namespace, ref.name) == ("http://jobmanager:8081", "my/job")
    ref = RunRef.parse("airflow/dag.task/abc")
    assert (ref.namespace, ref.name, ref.run_id) == ("airflow", "dag.task", "abc")
    with pytest.raises(ValueError, match="expected <namespace>"):
        RunRef.parse("nothing")
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", "bad")
    monkeypatch.setenv("OPENLINEAGE_ROOT_PARENT_ID", "sched/root/r1")
    parent, root = parent_from_env()
    assert parent is None and root == RunRef("sched", "root", "r1")


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("file:/work/var/lake/warehouse/raw/events", ("file", "/work/var/lake/warehouse/raw/events")),
        ("file:///tmp/w/raw/events", ("file", "/tmp/w/raw/events")),
        ("s3://bucket/warehouse/raw/events", ("s3://bucket", "warehouse/raw/events")),
        ("hdfs://nn:8020/warehouse/raw", ("hdfs://nn:8020", "warehouse/raw")),
    ],
)
def test_location_names(location: str, expected: tuple[str, str]) -> None:
    assert location_name(location) == expected


def test_event_json_is_valid_openlineage(ol_env: Path) -> None:
    with tracked_run(settings(enabled=False), "x", processing_type="STREAMING") as run:
        event = json.loads(Serde.to_json(run.event(RunState.RUNNING)))
    assert event["producer"].startswith("urn:lineage-lakehouse:")
    assert event["job"]["facets"]["jobType"]["processingType"] == "STREAMING"


def test_cli_time_and_names() -> None:
    assert parse_time("2026-11-20").isoformat() == "2026-11-20T00:00:00+00:00"
    assert parse_time("2026-11-20T08:00:00Z").hour == 8
    assert parse_time("2h").tzinfo is not None
    with pytest.raises(LookupError_, match="bad time"):
        parse_time("noon")
    assert display_name("file", "/tmp/x") == "file:///tmp/x"
    assert display_name("hdfs://nn:8020", "/x") == "hdfs://nn:8020/x"
    assert display_name("kafka://b:9092", "orders") == "kafka://b:9092/orders"
