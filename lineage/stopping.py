"""Clean stops of the batch jobs: SIGTERM or SIGINT end a build or a maintenance at a step boundary.

Each step of the build and of the maintenance is one atomic Iceberg commit per table, and a re-run of an
unfinished build or maintenance finishes it (:mod:`lineage.batch.build`). So a stop needs no rollback: the
signal handler records the request and cancels the session's Spark jobs (again every half second while the
job winds down, so that an action started after the signal does not run either); the step being computed
is abandoned before its commit, a commit already under way finishes, and the next step boundary raises
:class:`JobStopped`. The ``with`` blocks above it release the writer lease; the job prints one line and
exits with status 0.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)
CANCEL_EVERY_SECONDS = 0.5


class JobStopped(RuntimeError):
    """A requested stop ended the job between two commits: the lake is consistent, the lease released."""


class StopRequest:
    """Whether a stop was asked for, and by which signal."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def request(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def check(self, where: str) -> None:
        """Raise :class:`JobStopped` when a stop was requested (``where``: the step boundary it names)."""
        if self._event.is_set():
            raise JobStopped(f"stopped by {self.reason} {where}")

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as a stop is requested."""
        return self._event.wait(seconds)


@contextlib.contextmanager
def stop_on_signals(spark: Any | None = None) -> Iterator[StopRequest]:
    """SIGTERM and SIGINT request a stop for the ``with`` block (the previous handlers come back after it).

    Args:
        spark: the job's SparkSession, whose running jobs a stop cancels (None: nothing to cancel).

    Outside the main thread no handler can be installed: the request then only ever comes from the caller.
    """
    stop = StopRequest()
    ended = threading.Event()

    def _cancel(session: Any) -> None:
        # From a thread of its own: the handler runs on the main thread, whose Py4J connection may be
        # waiting for the very job being cancelled.
        while not ended.is_set():
            try:
                session.sparkContext.cancelAllJobs()
            except Exception as exc:  # the JVM may be going away with the signal too
                log.debug("cancelling Spark jobs after a stop request failed: %s", exc)
                return
            ended.wait(CANCEL_EVERY_SECONDS)

    def _handler(signum: int, _frame: object) -> None:
        if stop.requested:
            return
        stop.request(signal.Signals(signum).name)
        log.warning(
            "%s: stopping at the next step boundary (the step being computed is abandoned before its "
            "commit; a re-run finishes the work)",
            stop.reason,
        )
        if spark is not None:
            threading.Thread(target=_cancel, args=(spark,), name="cancel-spark-jobs", daemon=True).start()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, _handler) for sig in SIGNALS}
    try:
        yield stop
    finally:
        ended.set()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def stopped_during(stop: StopRequest | None, what: str) -> Iterator[None]:
    """An error raised in the block after a stop was requested is the stop itself (a cancelled Spark job,
    a JVM that went away with the signal): :class:`JobStopped`, with that error as its cause."""
    try:
        yield
    except Exception as exc:
        if stop is None or not stop.requested or isinstance(exc, JobStopped):
            raise
        raise JobStopped(f"stopped by {stop.reason} during {what}") from exc
