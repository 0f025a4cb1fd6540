"""``lineage serve``: one aiohttp application, built by :func:`create_app`, run by :func:`serve`.

The app is made of switchable halves: the intake (``serve.intake``, issue 15) and the read API
(``serve.read``, issue 20, lineage.serve.read), each adding its routes and what it owns to the app;
``/healthz`` and ``/metrics`` are always there. What a half owns (the intake's Kafka producer, the read
API's index and its refresh task) is created and closed by the app's lifespan (``cleanup_ctx``), never at
import: there is no global state besides what the app holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import resource
import socket
import ssl
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from lineage.serve import errors, intake, read
from lineage.serve.auth import ApiKeys, read_hash_file
from lineage.serve.metrics import Metrics, middleware
from lineage.settings import Settings

log = logging.getLogger(__name__)

METRICS = web.AppKey("metrics", Metrics)
SETTINGS = web.AppKey("settings", Settings)
ACCESS_LOGGER = "lineage.serve.access"
LINGER_S = 2.0


class AccessLog(AbstractAccessLogger):
    """One line per request: client, method, path (no query string), status, body size, seconds.

    Never headers (so never keys) nor bodies, nor the query string.
    """

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        self.logger.info(
            '%s "%s %s" %d %d %.4f',
            request.remote,
            request.method,
            request.rel_url.path,
            response.status,
            response.body_length,
            time,
        )


class ConfigurationError(Exception):
    """The service refuses to start with these settings."""


def api_keys(settings: Settings) -> ApiKeys:
    digests = list(settings.serve.api_key_hashes)
    if settings.serve.api_keys_file is not None:
        digests += read_hash_file(settings.serve.api_keys_file)
    return ApiKeys(digests)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def healthz(request: web.Request) -> web.Response:
    """200 when every half is ready: for the intake, Kafka answered a metadata request for the topic."""
    app = request.app
    body: dict[str, Any] = {"status": "ok"}
    if intake.INTAKE in app:
        producer = app[intake.INTAKE].producer
        timeout_s = app[SETTINGS].serve.health_timeout_seconds
        try:
            partitions = await asyncio.to_thread(producer.metadata, timeout_s)
        except Exception as exc:
            body = {
                "status": "unavailable",
                "kafka": {"topic": producer.topic, "reachable": False, "error": str(exc)[:200]},
            }
            return errors.json_response(
                503, body, {"Retry-After": str(app[SETTINGS].serve.retry_after_seconds)}
            )
        body["kafka"] = {"topic": producer.topic, "reachable": True, "partitions": partitions}
    if read.READ in app:
        # Reported, not a reason for 503: a lake with no build yet is a state the service starts in, and
        # the read endpoints say so themselves (503 LINEAGE_NOT_BUILT).
        body["read"] = app[read.READ].health()
    return errors.json_response(200, body)


async def metrics(request: web.Request) -> web.Response:
    return request.app[METRICS].exposition()


def create_app(settings: Settings) -> web.Application:
    """The service's application: the intake (``serve.intake``) and the read API (``serve.read``) when on,
    health and metrics always."""
    collected = Metrics()
    app = web.Application(
        middlewares=[middleware(collected), errors.error_middleware],
        # Bodies are read as streams with their own limit (lineage.serve.body); this only bounds read().
        client_max_size=settings.kafka.max_message_bytes,
    )
    app[SETTINGS] = settings
    app[METRICS] = collected
    app.router.add_get("/healthz", healthz, name="healthz")
    app.router.add_get("/metrics", metrics, name="metrics")
    keys = api_keys(settings)
    if settings.serve.intake:
        intake.setup(app, settings, collected, keys)
    if settings.serve.read:
        read.setup(app, settings, keys)
    return app


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    serve = settings.serve
    if serve.tls_cert_file is None or serve.tls_key_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(serve.tls_cert_file, serve.tls_key_file)
    return context


def check_exposure(settings: Settings, host: str) -> str:
    """Refuse to listen beyond loopback without API keys; returns what to say about authentication."""
    keys = api_keys(settings)
    if keys.enabled:
        return "API keys required (Authorization: Bearer ...)"
    if not settings.serve.intake and not settings.serve.read:
        return "no authentication (health and metrics only)"
    if not is_loopback(host):
        raise ConfigurationError(
            f"refusing to listen on {host} without an API key: configure serve.api_key_hashes or "
            "serve.api_keys_file (lineage serve hash-key makes one), or listen on 127.0.0.1"
        )
    return "no API key configured: serving loopback only, WITHOUT authentication"


def _raise_open_files_limit() -> None:
    """Thousands of concurrent connections need as many descriptors: take the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(settings: Settings, host: str, port: int) -> None:
    """Run the service until SIGINT/SIGTERM (blocking)."""
    auth = check_exposure(settings, host)
    context = ssl_context(settings)
    _raise_open_files_limit()
    app = create_app(settings)
    sock = socket.create_server(
        (host, port),
        family=socket.AF_INET6 if ":" in host else socket.AF_INET,
        backlog=settings.serve.backlog,
        reuse_port=False,
    )
    scheme = "https" if context else "http"
    halves = ["intake" if settings.serve.intake else None, "read API" if settings.serve.read else None]
    log.info(
        "lineage serve on %s://%s:%s (%s); %s; topic %s on %s, body limit %d bytes",
        scheme,
        host,
        sock.getsockname()[1],
        ", ".join(h for h in halves if h) or "health and metrics only",
        auth,
        settings.kafka.topic,
        settings.kafka.bootstrap_servers,
        settings.kafka.max_message_bytes,
    )
    # Each event's parse leaves short-lived dicts that reference counting frees at once; the cyclic
    # collector's default gen-0 threshold (700) would still scan after every few requests. Objects alive
    # at start (modules, the app) are frozen out of every scan.
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    loop = _new_loop()
    # The Python logging HOWTO's "Optimization": what our log lines do not show is not collected
    # (the caller's frame is a stack walk per record).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    access_logger = logging.getLogger(ACCESS_LOGGER) if settings.serve.access_log else None
    _run(app, sock, context, settings, loop, access_logger)


def _run(
    app: web.Application,
    sock: socket.socket,
    context: ssl.SSLContext | None,
    settings: Settings,
    loop: asyncio.AbstractEventLoop,
    access_logger: logging.Logger | None,
) -> None:
    web.run_app(
        app,
        sock=sock,
        ssl_context=context,
        access_log=access_logger,
        access_log_class=AccessLog,
        keepalive_timeout=settings.serve.idle_timeout_seconds,
        shutdown_timeout=settings.serve.produce_timeout_seconds,
        print=None,
        loop=loop,
        # Our own decompression (lineage.serve.body): gzip only, bounded, truncation detected.
        auto_decompress=False,
        # After an early answer (413, 408) the rest of the body is read and dropped for this long, so the
        # client reads the answer rather than a connection reset; then the connection is closed.
        lingering_time=LINGER_S,
    )


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; asyncio's loop works too
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
