"""Send to Kafka: OpenLineage events through openlineage-python's KafkaTransport, raw bytes directly."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from openlineage.client import OpenLineageClient
from openlineage.client.client import Event

from lineage.settings import RECORD_HEADROOM_BYTES

log = logging.getLogger(__name__)


def producer_config(
    bootstrap_servers: str, max_message_bytes: int, security: Mapping[str, str] | None = None
) -> dict[str, str]:
    """librdkafka settings shared by every producer of ours: size limit raised, every message acknowledged,
    and the security properties of ``kafka.security`` (:meth:`KafkaSecuritySettings.librdkafka`).

    ``max_message_bytes`` is the largest event; the request may be larger by the key and the record's
    framing, the headroom our topics and the local broker allow too (:data:`RECORD_HEADROOM_BYTES`), so an
    event exactly at the limit is sent (the intake's ``test_body_at_the_limit_is_accepted``)."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "message.max.bytes": str(max_message_bytes + RECORD_HEADROOM_BYTES),
        "acks": "all",
        "enable.idempotence": "true",
        "compression.type": "zstd",
        **(security or {}),
    }


def kafka_client(
    bootstrap_servers: str, topic: str, max_message_bytes: int, security: Mapping[str, str] | None = None
) -> OpenLineageClient:
    """An OpenLineage client whose transport is Kafka (``flush`` off: call ``flush(client)`` at the end)."""
    return OpenLineageClient(
        config={
            "transport": {
                "type": "kafka",
                "topic": topic,
                "config": producer_config(bootstrap_servers, max_message_bytes, security),
                "flush": False,
            }
        }
    )


def publish_events(client: OpenLineageClient, events: Iterable[Event]) -> int:
    """Emit every event, wait until Kafka acknowledged all of them; returns how many were sent."""
    count = 0
    for event in events:
        client.emit(event)
        count += 1
    if not client.transport.wait_for_completion(timeout=60):  # type: ignore[attr-defined]
        raise RuntimeError("Kafka did not acknowledge every OpenLineage event within 60 s")
    return count


def publish_raw(
    bootstrap_servers: str,
    topic: str,
    messages: Sequence[tuple[bytes | None, bytes | None]],
    max_message_bytes: int,
    security: Mapping[str, str] | None = None,
) -> int:
    """Send (key, value) byte pairs as they are: for malformed input and load generation."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(producer_config(bootstrap_servers, max_message_bytes, security))
    for key, value in messages:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.5)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or errors:
        raise RuntimeError(f"{remaining} messages unsent, delivery errors: {errors[:3]}")
    return len(messages)


def topic_message_count(bootstrap_servers: str, topic: str, security: Mapping[str, str] | None = None) -> int:
    """Messages currently in ``topic`` (sum over partitions of high - low watermark); 0 if it is missing."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "lineage-watermarks",
            "enable.auto.commit": "false",
            **(security or {}),
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = metadata.topics.get(topic)
        if partitions is None or partitions.error is not None:
            return 0
        total = 0
        for partition in partitions.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()
