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
import os
import resource
import signal
import socket
import ssl
import tempfile
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from lineage.query.text import escape_unsafe
from lineage.serve import errors, intake, read
from lineage.serve.auth import ApiKeys, Principal, Scope, read_hash_file
from lineage.serve.metrics import Metrics, middleware, write_to_shared_files
from lineage.settings import Settings

log = logging.getLogger(__name__)

METRICS = web.AppKey("metrics", Metrics)
SETTINGS = web.AppKey("settings", Settings)
ACCESS_LOGGER = "lineage.serve.access"
LINGER_S = 2.0
PARENT_CHECK_S = 1.0  # how often a worker checks that its supervising process is still there


class AccessLog(AbstractAccessLogger):
    """One line per request: client, method, path (no query string), status, body size, seconds.

    Never headers (so never keys) nor bodies, nor the query string. The path is the client's, decoded: its
    control and bidi-formatting characters are written as escapes (``\\x0a``, ``\\x1b``, ``\\u202e``), so a
    ``%0a`` cannot end the line and forge another, nor an ESC reach the terminal that tails the log.
    """

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        self.logger.info(
            '%s "%s %s" %d %d %.4f',
            request.remote,
            escape_unsafe(request.method),
            escape_unsafe(request.rel_url.path),
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
    scoped = [
        (
            key.digest,
            Principal(
                key.name,
                Scope(None if key.namespaces is None else tuple(key.namespaces)),
                frozenset(key.access),
            ),
        )
        for key in settings.serve.api_keys
    ]
    try:
        return ApiKeys(digests, scoped)
    except ValueError as exc:
        raise ConfigurationError(f"serve.api_keys: {exc}") from None


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


def create_app(settings: Settings, shared_metrics_dir: str | None = None) -> web.Application:
    """The service's application: the intake (``serve.intake``) and the read API (``serve.read``) when on,
    health and metrics always. ``shared_metrics_dir``: where every worker's metrics go (several workers)."""
    collected = Metrics(shared_metrics_dir)
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
    """Run the service until SIGINT/SIGTERM (blocking): in this process, or in ``serve.workers`` worker
    processes sharing one listening socket, this one supervising them."""
    auth = check_exposure(settings, host)
    context = ssl_context(settings)
    _raise_open_files_limit()
    workers = settings.serve.workers
    sock = socket.create_server(
        (host, port),
        family=socket.AF_INET6 if ":" in host else socket.AF_INET,
        backlog=settings.serve.backlog,
        reuse_port=False,
    )
    scheme = "https" if context else "http"
    halves = ["intake" if settings.serve.intake else None, "read API" if settings.serve.read else None]
    log.info(
        "lineage serve on %s://%s:%s (%s%s); %s; topic %s on %s, body limit %d bytes",
        scheme,
        host,
        sock.getsockname()[1],
        ", ".join(h for h in halves if h) or "health and metrics only",
        f"; {workers} worker processes" if workers > 1 else "",
        auth,
        settings.kafka.topic,
        settings.kafka.bootstrap_servers,
        settings.kafka.max_message_bytes,
    )
    if workers == 1:
        _serve_here(settings, sock, context, shared_dir=None)
    else:
        _supervise(settings, sock, context, workers)


class WorkerFailed(Exception):
    """A worker process ended while the service was not stopping (the others were stopped)."""


def _supervise(settings: Settings, sock: socket.socket, context: ssl.SSLContext | None, workers: int) -> None:
    """Fork the workers, each accepting on the inherited socket, and wait for them.

    SIGINT/SIGTERM here is passed on to every worker as SIGTERM (each stops as one process would: the
    intake waits for Kafka's acknowledgements); a worker that ends on its own stops the others and the
    service (:class:`WorkerFailed`), for the service manager to restart it whole. Nothing here starts a
    thread before the fork: each worker makes its own event loop, producer and index.
    """
    with tempfile.TemporaryDirectory(prefix="lineage-serve-metrics-") as shared_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = shared_dir
        parent = os.getpid()
        children: dict[int, int] = {}
        for number in range(workers):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the worker (tested through the process)
                _worker(settings, sock, context, shared_dir, number, parent)
            children[pid] = number
        sock.close()  # only the workers accept
        stopping = False

        def stop(signum: int = signal.SIGTERM, _frame: Any = None) -> None:
            nonlocal stopping
            stopping = True
            for pid in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        failed: list[str] = []
        while children:
            pid, status = os.wait()
            if pid not in children:
                continue
            number = children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            if not stopping or code != 0:
                how = f"exit code {code}" if code >= 0 else f"signal {-code}"
                log.error(
                    "worker %d (pid %d) ended (%s)%s", number, pid, how, "" if stopping else "; stopping"
                )
                failed.append(f"worker {number}: {how}")
                if not stopping:
                    stop()
        if failed:
            raise WorkerFailed("; ".join(failed))


def _worker(  # pragma: no cover - runs in a forked worker process
    settings: Settings,
    sock: socket.socket,
    context: ssl.SSLContext | None,
    shared_dir: str,
    number: int,
    parent: int,
) -> None:
    """A worker's life: serve until SIGTERM (or its parent is gone), then leave the process."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        write_to_shared_files()
        log.info("worker %d (pid %d) accepting", number, os.getpid())
        answered = _serve_here(settings, sock, context, shared_dir=shared_dir, parent=parent)
        log.info("worker %d (pid %d) stopped after answering %d requests", number, os.getpid(), answered)
        code = 0
    except BaseException:
        log.exception("worker %d failed", number)
    finally:
        logging.shutdown()
        os._exit(code)


def _serve_here(
    settings: Settings,
    sock: socket.socket,
    context: ssl.SSLContext | None,
    shared_dir: str | None,
    parent: int | None = None,
) -> int:
    """Serve on ``sock`` in this process until a stop signal (or, for a worker, its parent's end);
    returns how many requests it answered."""
    app = create_app(settings, shared_dir)
    # Each event's parse leaves short-lived dicts that reference counting frees at once; the cyclic
    # collector's default gen-0 threshold (700) would still scan after every few requests. Objects alive
    # at start (modules, the app) are frozen out of every scan.
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    loop = _new_loop()
    if parent is not None:
        _stop_once_on_signals(loop, parent)
    # The Python logging HOWTO's "Optimization": what our log lines do not show is not collected
    # (the caller's frame is a stack walk per record).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    access_logger = logging.getLogger(ACCESS_LOGGER) if settings.serve.access_log else None
    _run(app, sock, context, settings, loop, access_logger, handle_signals=parent is None)
    return app[METRICS].answered()


def _stop_once_on_signals(loop: asyncio.AbstractEventLoop, parent: int) -> None:
    """A worker stops gracefully on its first SIGINT/SIGTERM (a terminal's Ctrl-C reaches it and its
    parent, which passes SIGTERM on: the second is ignored), or when its parent is gone."""
    stopping = False

    def stop() -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            raise web.GracefulExit()

    def watch_parent() -> None:
        if os.getppid() != parent:
            log.error("worker %d: the supervising process is gone; stopping", os.getpid())
            stop()
        loop.call_later(PARENT_CHECK_S, watch_parent)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    loop.call_later(PARENT_CHECK_S, watch_parent)


def _run(
    app: web.Application,
    sock: socket.socket,
    context: ssl.SSLContext | None,
    settings: Settings,
    loop: asyncio.AbstractEventLoop,
    access_logger: logging.Logger | None,
    handle_signals: bool = True,
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
        handle_signals=handle_signals,
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
