"""A confluent-kafka producer for asyncio: each message's broker acknowledgement as an awaitable future.

librdkafka reports deliveries through callbacks served by ``poll()``. One thread of ours polls (blocking
in C, the GIL released) and hands every batch of reports to the event loop with one
``call_soon_threadsafe``, which resolves the futures; the loop never blocks on Kafka. Messages of one HTTP
request are handed to librdkafka with one ``produce_batch`` call.

A delivery fails for good after ``message.timeout.ms`` (librdkafka gives up retrying, in-flight requests
included), so awaiting a future is bounded by that setting. With ``enable.idempotence`` librdkafka's own
retries never duplicate a message. A fatal producer error (the idempotent state is lost) retires the
producer: its messages still get their reports, new ones go to a fresh producer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1


@dataclass(frozen=True, slots=True)
class Delivered:
    partition: int
    offset: int


# Delivery-report errors after which the message is certainly not in the topic: the broker refused it, or
# librdkafka never sent it. Any other failure reported for a message handed to librdkafka may come after
# the broker wrote it and the acknowledgement was lost (librdkafka's "possibly persisted": a timeout while
# the request was in flight, a connection dropped before the answer), and librdkafka does not tell which.
NOT_PERSISTED = frozenset(
    KafkaError(code).name()
    for code in (
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_MSG,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError._PURGE_QUEUE,
    )
)


class DeliveryFailed(Exception):
    """Kafka did not acknowledge a message; ``code`` is librdkafka's error name (e.g. ``_MSG_TIMED_OUT``).

    ``possibly_persisted``: the message may be in the topic all the same (see :data:`NOT_PERSISTED`).
    """

    def __init__(self, code: str, message: str, *, possibly_persisted: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.possibly_persisted = possibly_persisted


class Deliveries:
    """The reports for the messages of one :meth:`AsyncProducer.produce` call, in their order.

    ``results[i]`` is a :class:`Delivered`, a :class:`DeliveryFailed`, or None while message i has no
    report yet; ``done`` resolves once every message has one (one wake-up of the loop per call, not one
    per message).
    """

    __slots__ = ("_lock", "_remaining", "done", "results")

    def __init__(self, count: int, done: asyncio.Future[None]) -> None:
        self.results: list[Delivered | DeliveryFailed | None] = [None] * count
        self.done = done
        self._remaining = count
        self._lock = threading.Lock()

    def report(self, index: int, result: Delivered | DeliveryFailed) -> bool:
        """Record one report (any thread); True when it was the last one. A second report is ignored."""
        with self._lock:
            if self.results[index] is not None:
                return False
            self.results[index] = result
            self._remaining -= 1
            return self._remaining == 0


class AsyncProducer:
    """Produce to one topic from asyncio code; start with :meth:`start`, end with :meth:`close`."""

    def __init__(
        self,
        config: dict[str, str],
        topic: str,
        *,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._config = {**config, "error_cb": self._on_error}
        self._topic = topic
        self._on_error_hook = on_error
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Producer | None = None
        self._retired: list[Producer] = []
        self._lock = threading.Lock()  # guards _producer/_retired between the loop and the poll thread
        self._completed: list[Deliveries] = []  # filled in the poll thread, handed to the loop in bulk
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._fatal = False
        self.brokers_down = False  # librdkafka said all brokers are down, and nothing was delivered since

    @property
    def topic(self) -> str:
        return self._topic

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._producer = Producer(self._config)
        self._thread = threading.Thread(target=self._poll_forever, name="kafka-poll", daemon=True)
        self._thread.start()

    async def close(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for outstanding messages; returns how many were left undelivered."""
        left = await asyncio.to_thread(self._flush_all, timeout_s)
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
        return left

    def produce(self, messages: Sequence[tuple[bytes, bytes | None]]) -> Deliveries:
        """Hand (value, key) pairs to librdkafka in one ``produce_batch`` call; await ``.done`` for the
        reports (a message librdkafka refused to queue has its failure already)."""
        assert self._loop is not None, "start() first"
        deliveries = Deliveries(len(messages), self._loop.create_future())
        on_delivery = self._on_delivery
        batch: list[dict[str, Any]] = [
            {"value": value, "key": key, "callback": functools.partial(on_delivery, deliveries, index)}
            for index, (value, key) in enumerate(messages)
        ]
        last = not messages
        try:
            self._current().produce_batch(self._topic, batch)
        except (BufferError, KafkaException) as exc:
            failure = _failure(exc)
            last = any(deliveries.report(i, failure) for i in range(len(messages)))
        else:
            for index, message in enumerate(batch):
                error = message.get("_error")
                if error is not None:
                    last = deliveries.report(index, _failure(error)) or last
        if last:
            deliveries.done.set_result(None)
        return deliveries

    def metadata(self, timeout_s: float) -> int:
        """Partitions of the topic, from the brokers (blocking: call it in a thread). Raises when
        Kafka does not answer within ``timeout_s``."""
        topics = self._current().list_topics(self._topic, timeout=timeout_s).topics
        found = topics.get(self._topic)
        if found is None or found.error is not None:
            raise KafkaException(
                found.error if found is not None else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            )
        return len(found.partitions)

    # --- librdkafka side -------------------------------------------------------------------------------

    def _current(self) -> Producer:
        with self._lock:
            if self._fatal:
                # The idempotent producer's state is gone: start over, keep polling the old one.
                assert self._producer is not None
                self._retired.append(self._producer)
                self._producer = Producer(self._config)
                self._fatal = False
                log.warning("Kafka producer replaced after a fatal error")
            assert self._producer is not None
            return self._producer

    def _on_delivery(
        self, deliveries: Deliveries, index: int, error: KafkaError | None, message: Message
    ) -> None:
        # Runs in the poll thread, inside poll().
        if error is None:
            self.brokers_down = False
            result: Delivered | DeliveryFailed = Delivered(message.partition() or 0, message.offset() or 0)
        else:
            name = error.name()
            result = DeliveryFailed(name, error.str(), possibly_persisted=name not in NOT_PERSISTED)
        if deliveries.report(index, result):
            self._completed.append(deliveries)

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.brokers_down = True
        if error.fatal():
            log.error("fatal Kafka producer error: %s", error)
            with self._lock:
                self._fatal = True
        if self._on_error_hook is not None:
            self._on_error_hook(error.name())

    def _poll_forever(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                producer, retired = self._producer, list(self._retired)
            if producer is not None:
                producer.poll(POLL_INTERVAL_S)
            for old in retired:
                old.poll(0)
                if len(old) == 0:
                    with self._lock:
                        self._retired.remove(old)
            self._hand_over()

    def _hand_over(self) -> None:
        if not self._completed:
            return
        completed, self._completed = self._completed, []
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_resolve, completed)

    def _flush_all(self, timeout_s: float) -> int:
        with self._lock:
            producers = [p for p in (self._producer, *self._retired) if p is not None]
        left = sum(p.flush(timeout_s) for p in producers)
        self._hand_over()
        return left


def _resolve(completed: list[Deliveries]) -> None:
    for deliveries in completed:
        if not deliveries.done.done():
            deliveries.done.set_result(None)


def _failure(error: object) -> DeliveryFailed:
    """A DeliveryFailed from what produce/produce_batch raised or put in a message's ``_error``: the
    message was refused before it was queued, so it is certainly not in the topic."""
    if isinstance(error, BufferError):
        return DeliveryFailed("_QUEUE_FULL", str(error))
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return DeliveryFailed(error.name(), error.str())
    return DeliveryFailed("_PRODUCE_FAILED", str(error))
