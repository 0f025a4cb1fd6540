"""The intake half of the service: OpenLineage events over HTTP into the Kafka topic the ingestion reads.

``POST /api/v1/lineage`` takes one event, ``POST /api/v1/lineage/batch`` a JSON array of events. Every
event the intake can delimit (the body of the first, each element of the second) goes to the topic as it
arrived (after decompression), keyed as OpenLineage's own Kafka transport keys it, valid or not: an invalid
one is answered 400 with its validation reason, and the lake keeps it in ``raw.rejected`` as evidence.
The answer is sent only after Kafka acknowledged the message (``acks=all``, idempotent producer); no
acknowledgement within ``serve.produce_timeout_seconds`` is a 503 with ``Retry-After``, never a 2xx.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from lineage.events.keys import kafka_key
from lineage.events.redact import redact_many
from lineage.events.validate import BatchError, TimeLimit, Verdict, split_batch, time_limit, validate
from lineage.io.kafka_async import AsyncProducer, Delivered, DeliveryFailed
from lineage.io.publish import producer_config
from lineage.serve.auth import WRITE, ApiKeys
from lineage.serve.body import check_content_type, read_body
from lineage.serve.errors import (
    BATCH_HAS_INVALID_EVENTS,
    BATCH_INCOMPLETE,
    BATCH_TOO_LARGE,
    FORBIDDEN,
    INVALID_BATCH,
    KAFKA_UNAVAILABLE,
    PAYLOAD_TOO_LARGE,
    UNAUTHORIZED,
    ApiError,
    error_payload,
    json_response,
)
from lineage.serve.metrics import Metrics
from lineage.serve.scope import out_of_scope
from lineage.settings import Settings

log = logging.getLogger(__name__)

LINEAGE_PATH = "/api/v1/lineage"
BATCH_PATH = "/api/v1/lineage/batch"
# Bodies above this are validated in a worker thread, so one large batch does not stall the event loop.
INLINE_VALIDATION_BYTES = 256 * 1024
# librdkafka fails a message after message.timeout.ms; this is only a safety net on top of it.
DELIVERY_GRACE_S = 5.0
MAYBE_WRITTEN = (
    "it may have been written all the same: sending it again is safe, the build keeps one copy of "
    "identical events"
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one event: 200 accepted, 400 invalid (stored as evidence), 413/503 not acknowledged
    (``unconfirmed``: Kafka may have written it all the same, the acknowledgement did not come back)."""

    status: int
    code: str | None = None
    message: str | None = None
    delivered: Delivered | None = None
    unconfirmed: bool = False

    @property
    def stored(self) -> bool:
        return self.delivered is not None

    @property
    def stored_answer(self) -> bool | None:
        """The answer's ``stored``: true, false, or null when nobody can tell."""
        return None if self.unconfirmed and not self.stored else self.stored

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status}
        if self.code is not None:
            out["code"] = self.code
            out["message"] = self.message
            out["stored"] = self.stored_answer
        if self.delivered is not None:
            out["partition"] = self.delivered.partition
            out["offset"] = self.delivered.offset
        return out


class Intake:
    """Validation, keys and the Kafka producer; the handlers only read bodies and shape answers."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        serve = settings.serve
        self.settings = settings
        self.metrics = metrics
        self.limit = settings.kafka.max_message_bytes
        self.retry_after = {"Retry-After": str(serve.retry_after_seconds)}
        config = {
            **producer_config(
                settings.kafka.bootstrap_servers, self.limit, settings.kafka.security.librdkafka()
            ),
            # Java clients' partitioner (murmur2), so a key lands where Spark's and Flink's Kafka transports
            # put it; librdkafka's own default hashes keys differently.
            "partitioner": "murmur2_random",
            "linger.ms": "2",
            "message.timeout.ms": str(int(serve.produce_timeout_seconds * 1000)),
            **serve.producer,
        }
        self.redactor = settings.redact.redactor() if settings.redact.intake else None
        self.producer = AsyncProducer(
            config, settings.kafka.topic, on_error=lambda name: metrics.kafka_errors.labels(name).inc()
        )

    def time_limit(self) -> TimeLimit | None:
        """The latest eventTime accepted in a request arriving now (``ingest.max_future_seconds``): the
        ingestion measures from the Kafka timestamp, which is this moment, give or take the produce."""
        return time_limit(datetime.now(UTC), self.settings.ingest.max_future_seconds)

    async def submit(self, messages: Sequence[tuple[bytes, Verdict]]) -> list[Outcome]:
        """Produce every message, wait for Kafka's answers (bounded), and say what became of each."""
        if not messages:
            return []
        values = [value for value, _ in messages]
        if self.redactor is not None:
            # Secrets never reach the topic (serve.redact / redact.intake); off-loop for large bodies.
            if sum(len(v) for v in values) > INLINE_VALIDATION_BYTES:
                values = await asyncio.to_thread(self._redact, values)
            else:
                values = self._redact(values)
        pairs = [
            (value, kafka_key(v.document, v.kind) if v.valid and v.document else None)
            for value, (_, v) in zip(values, messages, strict=True)
        ]
        deliveries = self.producer.produce(pairs)
        wait_s = self.settings.serve.produce_timeout_seconds + DELIVERY_GRACE_S
        done, _ = await asyncio.wait([deliveries.done], timeout=wait_s)
        if not done:
            log.error("no delivery report from librdkafka within %.0f s", wait_s)
        outcomes = [
            self._outcome(verdict, result, wait_s)
            for (_, verdict), result in zip(messages, deliveries.results, strict=True)
        ]
        self.metrics.event_bytes.inc(sum(len(value) for value, _ in messages))
        self.metrics.count_events(
            ("accepted" if o.status == 200 else "rejected" if o.stored else "failed" for o in outcomes),
            (o.code for o in outcomes if o.stored and o.code is not None),
        )
        return outcomes

    def _redact(self, values: list[bytes]) -> list[bytes]:
        assert self.redactor is not None
        redacted = redact_many(values, self.redactor)
        count = sum(n for _, n in redacted)
        if count:
            log.info("redacted %d secret(s) in %d event(s) before producing", count, len(values))
        return [value for value, _ in redacted]

    def _outcome(self, verdict: Verdict, result: Delivered | DeliveryFailed | None, wait_s: float) -> Outcome:
        if result is None:
            # Still in librdkafka's hands: it may yet be delivered.
            return Outcome(
                503,
                KAFKA_UNAVAILABLE,
                f"Kafka did not acknowledge the event within {wait_s:g} s; {MAYBE_WRITTEN}",
                unconfirmed=True,
            )
        if isinstance(result, DeliveryFailed):
            self.metrics.kafka_errors.labels(result.code).inc()
            if result.code == "MSG_SIZE_TOO_LARGE":
                return Outcome(413, PAYLOAD_TOO_LARGE, "the event is larger than the Kafka topic accepts")
            if result.possibly_persisted:
                return Outcome(
                    503,
                    KAFKA_UNAVAILABLE,
                    f"Kafka did not acknowledge the event ({result.code}); {MAYBE_WRITTEN}",
                    unconfirmed=True,
                )
            return Outcome(503, KAFKA_UNAVAILABLE, f"Kafka did not store the event ({result.code})")
        if verdict.valid:
            return Outcome(200, delivered=result)
        return Outcome(400, verdict.reason, verdict.detail, result)

    async def read(self, request: web.Request) -> bytes:
        """Check the key and the content type, then read the body (:func:`read_body`)."""
        principal = request.app[KEYS].authenticate(request.headers.get("Authorization"))
        if principal is None:
            raise ApiError(
                401,
                UNAUTHORIZED,
                "a valid API key is required",
                headers={"WWW-Authenticate": "Bearer"},
                close=True,
            )
        if not principal.may(WRITE):
            raise ApiError(403, FORBIDDEN, "this API key may not write (serve.api_keys access)", close=True)
        request[PRINCIPAL] = principal
        check_content_type(request)
        body, received = await read_body(
            request, limit=self.limit, timeout_s=self.settings.serve.body_timeout_seconds
        )
        self.metrics.received_bytes.inc(received)
        return body


INTAKE = web.AppKey("intake", Intake)
KEYS = web.AppKey("api_keys", ApiKeys)
PRINCIPAL = "lineage_principal"  # the request's key (lineage.serve.auth.Principal), once checked


def check_scope(request: web.Request, verdicts: Sequence[Verdict]) -> None:
    """403 before anything is produced when the key is limited to namespaces and an event names one out of
    its scope (lineage.serve.scope.out_of_scope): the request is refused whole."""
    scope = request[PRINCIPAL].scope
    if scope.unlimited:
        return
    refused = [(i, why) for i, v in enumerate(verdicts) if (why := out_of_scope(v.document, scope))]
    if refused:
        if len(verdicts) == 1 and request.path == LINEAGE_PATH:
            message = f"nothing was stored: {refused[0][1]}"
        else:
            shown = "; ".join(f"element {i}: {why}" for i, why in refused[:10])
            more = f"; and {len(refused) - 10} more" if len(refused) > 10 else ""
            message = f"nothing was stored, {len(refused)} of {len(verdicts)} events refused: {shown}{more}"
        raise ApiError(403, FORBIDDEN, message)


async def post_event(request: web.Request) -> web.Response:
    intake = request.app[INTAKE]
    body = await intake.read(request)
    limit = intake.time_limit()
    verdict = (
        await asyncio.to_thread(validate, body, limit)
        if len(body) > INLINE_VALIDATION_BYTES
        else validate(body, limit)
    )
    check_scope(request, [verdict])
    [outcome] = await intake.submit([(body, verdict)])
    if outcome.status == 200:
        assert outcome.delivered is not None
        return json_response(
            200,
            {
                "status": "accepted",
                "partition": outcome.delivered.partition,
                "offset": outcome.delivered.offset,
            },
        )
    extra = {
        "stored": outcome.stored_answer,
        **({"partition": d.partition, "offset": d.offset} if (d := outcome.delivered) else {}),
    }
    headers = intake.retry_after if outcome.status == 503 else None
    return json_response(
        outcome.status, error_payload(outcome.code or "", outcome.message or "", **extra), headers
    )


async def post_batch(request: web.Request) -> web.Response:
    intake = request.app[INTAKE]
    body = await intake.read(request)
    time_limit = intake.time_limit()
    try:
        if len(body) > INLINE_VALIDATION_BYTES:
            elements = await asyncio.to_thread(split_batch, body, time_limit)
        else:
            elements = split_batch(body, time_limit)
    except BatchError as exc:
        raise ApiError(
            400, INVALID_BATCH, f"the batch body must be one JSON array of events: {exc}"
        ) from None
    limit = intake.settings.serve.max_batch_events
    if len(elements) > limit:
        raise ApiError(413, BATCH_TOO_LARGE, f"a batch holds at most {limit} events, got {len(elements)}")
    check_scope(request, [verdict for _, verdict in elements])
    outcomes = await intake.submit(elements)
    return batch_response(outcomes, intake.retry_after)


def batch_response(outcomes: list[Outcome], retry_after: dict[str, str]) -> web.Response:
    """200 all accepted; 207 all stored, some invalid; 400 all invalid; 503 (413) some not stored."""
    accepted = sum(o.status == 200 for o in outcomes)
    stored = sum(o.stored for o in outcomes)
    payload: dict[str, Any] = {
        "accepted": accepted,
        "rejected": stored - accepted,
        "failed": len(outcomes) - stored,
        "results": [o.result() for o in outcomes],
    }
    headers = None
    if stored < len(outcomes):
        retryable = any(o.status == 503 for o in outcomes)
        status = 503 if retryable else 413
        headers = retry_after if retryable else None
        payload.update(
            error_payload(
                BATCH_INCOMPLETE,
                f"{len(outcomes) - stored} of {len(outcomes)} were not acknowledged; results say which",
            )
        )
    elif accepted == len(outcomes):
        status = 200
    elif accepted == 0:
        status = 400
        payload.update(
            error_payload(BATCH_HAS_INVALID_EVENTS, "no event of the batch is valid; results say why")
        )
    else:
        status = 207
    return json_response(status, payload, headers)


async def _producer_lifespan(app: web.Application) -> AsyncIterator[None]:
    intake = app[INTAKE]
    await intake.producer.start()
    yield
    left = await intake.producer.close(timeout_s=intake.settings.serve.produce_timeout_seconds)
    if left:
        log.warning("%d messages were still undelivered at shutdown", left)


def setup(app: web.Application, settings: Settings, metrics: Metrics, keys: ApiKeys) -> Intake:
    """Add the intake's routes and its producer (owned by the app's lifespan) to ``app``."""
    intake = Intake(settings, metrics)
    app[INTAKE] = intake
    app[KEYS] = keys
    app.cleanup_ctx.append(_producer_lifespan)
    app.router.add_post(LINEAGE_PATH, post_event, name="lineage")
    app.router.add_post(BATCH_PATH, post_batch, name="batch")
    return intake
