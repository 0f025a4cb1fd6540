"""The intake keys a message as openlineage-python's Kafka transport keys the same event."""

from __future__ import annotations

import json
import uuid

import pytest
from openlineage.client.event_v2 import (
    Dataset,
    DatasetEvent,
    Job,
    JobEvent,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import parent_run
from openlineage.client.serde import Serde
from openlineage.client.transport.kafka import KafkaConfig, KafkaTransport

from lineage.events.keys import kafka_key
from lineage.events.validate import validate

NOW = "2026-11-20T08:00:00.000Z"
PRODUCER = "urn:lineage-tests"


def _parent(root: bool) -> parent_run.ParentRunFacet:
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=str(uuid.uuid4())),
        job=parent_run.Job(namespace="airflow", name="dag.task"),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=str(uuid.uuid4())),
            job=parent_run.RootJob(namespace="af", name="dag"),
        )
        if root
        else None,
    )


EVENTS = {
    "run": RunEvent(eventType=RunState.START, eventTime=NOW, run=Run(runId=str(uuid.uuid4())),
                    job=Job(namespace="ns", name="job"), producer=PRODUCER),
    "run with parent": RunEvent(eventType=RunState.RUNNING, eventTime=NOW,
                                run=Run(runId=str(uuid.uuid4()), facets={"parent": _parent(root=False)}),
                                job=Job(namespace="ns", name="child"), producer=PRODUCER),
    "run with root": RunEvent(eventType=RunState.COMPLETE, eventTime=NOW,
                              run=Run(runId=str(uuid.uuid4()), facets={"parent": _parent(root=True)}),
                              job=Job(namespace="ns", name="grandchild"), producer=PRODUCER),
    "dataset": DatasetEvent(eventTime=NOW, producer=PRODUCER,
                            dataset=StaticDataset(namespace="kafka://b:9092", name="orders")),
    "job": JobEvent(eventTime=NOW, producer=PRODUCER, job=Job(namespace="ns", name="j"),
                    inputs=[Dataset(namespace="s3://b", name="in")]),
}  # fmt: skip


@pytest.fixture(scope="module")
def transport() -> KafkaTransport:
    # The producer is never used: only the key rule is (no broker at this address).
    return KafkaTransport(
        KafkaConfig(config={"bootstrap.servers": "127.0.0.1:1", "log_level": "0"}, topic="t", flush=False)
    )


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_key_matches_the_kafka_transport(transport: KafkaTransport, name: str) -> None:
    event = EVENTS[name]
    verdict = validate(Serde.to_json(event).encode())
    assert verdict.valid, verdict.detail
    expected = transport._get_message_key(event)
    assert expected is not None
    assert kafka_key(verdict.document or {}, verdict.kind) == expected.encode()


def test_empty_parent_job_falls_back_to_the_event_job() -> None:
    document = json.loads(Serde.to_json(EVENTS["run"]))
    document["run"]["facets"] = {
        "parent": {"run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "", "name": "x"}}
    }
    verdict = validate(json.dumps(document).encode())
    assert kafka_key(verdict.document or {}, verdict.kind) == b"run:ns/job"


def test_invalid_events_get_no_key() -> None:
    verdict = validate(b'{"eventTime": "x"}')
    assert kafka_key(verdict.document or {}, verdict.kind) is None
