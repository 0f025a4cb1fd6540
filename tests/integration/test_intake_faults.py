"""The intake while its broker goes away mid-load and comes back (a broker of this module's own).

Under a steady stream of single events and small batches, the broker is stopped, left down for a while,
then started again on the same data and port. What must hold: every event answered 2xx is in the topic
exactly once; an event answered 503 with ``stored: false`` is not in the topic, one with ``stored: null``
(the acknowledgement was lost, librdkafka cannot tell) is there at most once; no request waits longer than
the bounded produce timeout; the service recovers by itself.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lineage.io.local_kafka import LocalKafka, create_topic, free_port
from lineage.settings import MIB
from tests.fixtures.intake import Intake, read_topic, start_intake

pytestmark = pytest.mark.integration

PRODUCE_TIMEOUT_S = 2
CONCURRENCY = 8
BATCH_EVERY = 5  # every 5th request is a batch of BATCH_SIZE events
BATCH_SIZE = 4


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    broker = LocalKafka(
        data_dir=tmp_path_factory.mktemp("kafka-faults"),
        jars_dir=Path(".jars/kafka").resolve(),
        port=free_port(),
        controller_port=free_port(),
        max_message_bytes=32 * MIB,
        partitions=3,
    )
    broker.start()
    yield broker
    broker.stop()


@dataclass
class Load:
    answers: dict[str, int] = field(default_factory=dict)  # run id -> HTTP status of its event
    stored: dict[str, bool | None] = field(default_factory=dict)  # run id -> the answer's "stored"
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # transport errors (connection refused ...)


def _event(run_id: str) -> dict[str, object]:
    return {
        "eventType": "RUNNING",
        "eventTime": "2026-11-20T08:00:00Z",
        "producer": "urn:lineage-tests:faults",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id},
        "job": {"namespace": "faults", "name": f"job-{run_id[:2]}"},
    }


async def _drive(service: Intake, stop: asyncio.Event, load: Load) -> None:
    import aiohttp

    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:

        async def worker(number: int) -> None:
            sent = 0
            while not stop.is_set():
                sent += 1
                batch = sent % BATCH_EVERY == 0
                run_ids = [str(uuid.uuid4()) for _ in range(BATCH_SIZE if batch else 1)]
                events = [_event(r) for r in run_ids]
                path = "/api/v1/lineage/batch" if batch else "/api/v1/lineage"
                body = json.dumps(events if batch else events[0]).encode()
                started = time.monotonic()
                try:
                    async with session.post(f"{service.url}{path}", data=body, headers=headers) as answer:
                        payload = await answer.json()
                        status = answer.status
                except aiohttp.ClientError as exc:
                    load.errors.append(f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(0.1)
                    continue
                load.latencies.append(time.monotonic() - started)
                if batch:
                    for run_id, result in zip(run_ids, payload["results"], strict=True):
                        load.answers[run_id] = result["status"]
                        load.stored[run_id] = result.get("stored", result["status"] == 200)
                else:
                    load.answers[run_ids[0]] = status
                    load.stored[run_ids[0]] = status == 200 or payload["error"]["stored"]
                if status != 200:
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(worker(n) for n in range(CONCURRENCY)))


def test_broker_stopped_mid_load_and_restarted(own_broker: LocalKafka, tmp_path: Path) -> None:
    topic = f"faults.{uuid.uuid4().hex[:8]}"
    create_topic(own_broker.bootstrap_servers, topic, 3, own_broker.max_message_bytes)
    service = start_intake(
        own_broker.bootstrap_servers,
        topic,
        tmp_path,
        produce_timeout_seconds=str(PRODUCE_TIMEOUT_S),
        retry_after_seconds="1",
        access_log="false",
    )
    load = Load()
    phases: dict[str, int] = {}

    async def scenario() -> None:
        stop = asyncio.Event()
        driver = asyncio.create_task(_drive(service, stop, load))
        await asyncio.sleep(3)
        phases["before stop"] = len(load.answers)
        await asyncio.to_thread(own_broker.stop)
        await asyncio.sleep(PRODUCE_TIMEOUT_S * 2.5)
        phases["while down"] = len(load.answers)
        await asyncio.to_thread(own_broker.start)
        phases["restarted"] = len(load.answers)
        await asyncio.sleep(5)
        stop.set()
        await driver

    try:
        asyncio.run(scenario())
    finally:
        log = service.log()
        service.stop()

    statuses = Counter(load.answers.values())
    in_topic = Counter(
        json.loads(r.value or b"")["run"]["runId"] for r in read_topic(own_broker.bootstrap_servers, topic)
    )
    accepted = {r for r, s in load.answers.items() if s == 200}
    refused = {r for r, s in load.answers.items() if s != 200}
    not_stored = {r for r in refused if load.stored[r] is False}
    unconfirmed = refused - not_stored
    written_anyway = sorted(r for r in unconfirmed if in_topic[r])
    summary = (
        f"statuses {dict(statuses)}, phases {phases}, unconfirmed {len(unconfirmed)} of which in the topic "
        f"{len(written_anyway)}, errors {load.errors[:3]}, log {log[-2000:]}"
    )

    assert statuses[200] > 0 and statuses[503] > 0, summary
    assert set(statuses) <= {200, 503}, summary
    assert all(in_topic[r] == 1 for r in accepted), "an acknowledged event is missing or duplicated"
    assert all(load.stored[r] in (False, None) for r in refused), summary
    assert not [r for r in not_stored if in_topic[r]], "an event answered 503 stored=false is in the topic"
    assert all(in_topic[r] <= 1 for r in unconfirmed), "librdkafka duplicated an unconfirmed event"
    assert set(in_topic) <= set(load.answers), "the topic holds events nobody was told about"
    assert max(load.latencies) < PRODUCE_TIMEOUT_S + 3, summary  # bounded: never a hang
    # The service came back by itself: events sent after the restart were accepted again.
    late = list(load.answers.items())[phases["restarted"] :]
    assert any(status == 200 for _, status in late), summary
