"""Prometheus metrics of the service, in a registry of the app's own (no process-global state).

With several worker processes (``serve.workers``) each worker writes its samples to files in one
directory (prometheus_client's multiprocess mode) and ``/metrics``, whichever worker answers it, adds
up every worker's: counters and histograms of the whole service.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Iterable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client import values as prometheus_values
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from lineage.serve.errors import REFUSAL_CODE, Handler

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def write_to_shared_files() -> None:
    """Make this worker process's metrics write to ``PROMETHEUS_MULTIPROC_DIR`` (set by the parent before
    it started the workers); call it in the worker before :class:`Metrics` is made."""
    prometheus_values.ValueClass = prometheus_values.MultiProcessValue()


class Metrics:
    def __init__(self, shared_dir: str | None = None) -> None:
        """``shared_dir``: the directory every worker writes to (:func:`write_to_shared_files`), read by
        :meth:`exposition`; None for one process."""
        disable_created_metrics()  # no *_created series: one sample per counter
        self.shared_dir = shared_dir
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "lineage_intake_requests",
            "HTTP requests answered, by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "lineage_intake_request_duration_seconds",
            "Time from the request's headers to the last byte of the answer",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.events = Counter(
            "lineage_intake_events",
            "Events by outcome: accepted (valid, in Kafka), rejected (invalid, in Kafka as evidence), "
            "failed (not acknowledged by Kafka)",
            ["outcome"],
            registry=r,
        )
        self.rejections = Counter(
            "lineage_intake_rejected_events", "Invalid events by validation reason", ["reason"], registry=r
        )
        self.refusals = Counter(
            "lineage_intake_refused_requests",
            "Requests refused before any event was read, by code",
            ["code"],
            registry=r,
        )
        self.received_bytes = Counter(
            "lineage_intake_received_bytes",
            "Request body bytes as received (compressed when gzip)",
            registry=r,
        )
        self.event_bytes = Counter(
            "lineage_intake_event_bytes",
            "Bytes of the events handed to Kafka (after decompression)",
            registry=r,
        )
        self.kafka_errors = Counter(
            "lineage_intake_kafka_errors",
            "Kafka errors: failed deliveries and producer errors, by name",
            ["error"],
            registry=r,
        )

    def count_events(self, outcomes: Iterable[str], reasons: Iterable[str]) -> None:
        for outcome, n in Tally(outcomes).items():
            self.events.labels(outcome).inc(n)
        for reason, n in Tally(reasons).items():
            self.rejections.labels(reason).inc(n)

    def answered(self) -> int:
        """Requests this process answered (its own counts, even with shared files)."""
        return int(
            sum(s.value for m in self.requests.collect() for s in m.samples if s.name.endswith("_total"))
        )

    def exposition(self) -> web.Response:
        registry = self.registry
        if self.shared_dir is not None:
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=self.shared_dir)
        response = web.Response(body=generate_latest(registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response


def endpoint_of(request: web.Request) -> str:
    route = request.match_info.route
    name = route.name if route is not None else None
    return name or "other"


def middleware(metrics: Metrics) -> web.middleware:  # type: ignore[valid-type]
    @web.middleware
    async def measure(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            code = response.get(REFUSAL_CODE)
            if code is not None:
                metrics.refusals.labels(code).inc()
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            endpoint = endpoint_of(request)
            metrics.requests.labels(endpoint, str(status)).inc()
            metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    return measure
