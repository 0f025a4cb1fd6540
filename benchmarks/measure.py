"""Measuring helpers: run a process while sampling its memory, summarise repeated runs, describe the machine.

Peak memory is the peak of the **sum** of the proportional set sizes (PSS) of a process and all its
descendants, sampled every 100 ms with psutil (a PySpark job is a Python driver plus the JVM it starts;
Data.Rentgen's consumer is a supervisor plus its worker processes). PSS rather than RSS: the JVM forks
short-lived helpers (Hadoop's local file system runs ``chmod``), which share the JVM's pages until they exec;
summing their RSS would count the JVM twice, PSS splits shared pages between the processes that map them.
A spike shorter than the sampling interval can be missed, so the numbers are a lower bound of the true
peak.

PSS is dear: the kernel walks the page tables of the whole mapping for it (about 30 ms of CPU for a JVM of
4 GiB here), so reading it every 100 ms took a quarter of a core from the job being measured on this 2-core
machine. RSS is cheap (``statm``, microseconds) and never below PSS, so the sampler reads RSS every 100 ms
and PSS only when the tree's RSS reaches a new high (where a new peak can be) or a second after its last
PSS reading (what a child's exit unshares without any RSS growth).
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

SAMPLE_INTERVAL_S = 0.1
PSS_INTERVAL_S = 1.0  # the longest gap between two PSS readings
# A rise of the tree's RSS that calls for a PSS reading before the interval is up: this share of the
# highest RSS read so far, at least PSS_RISE_FLOOR (a tree that grows a page at a time would otherwise
# be read on every tick while it grows).
PSS_RISE = 0.05
PSS_RISE_FLOOR = 16 * 1024 * 1024
MIB = 1024 * 1024


def summarize(values: Iterable[float]) -> dict[str, float | int]:
    """Median, min, max and count of repeated measurements (empty dict when there are none)."""
    data = sorted(float(v) for v in values)
    if not data:
        return {}
    return {"median": statistics.median(data), "min": data[0], "max": data[-1], "n": len(data)}


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and its living descendants (raises psutil.Error when the process is gone)."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _pss(proc: psutil.Process) -> int:
    """Proportional set size (RSS where the kernel does not report PSS)."""
    full = proc.memory_full_info()
    return int(getattr(full, "pss", full.rss))


class TreeSampler:
    """Samples the summed PSS of process trees in a background thread; ``peak`` in bytes.

    Every ``interval_s`` the tree's RSS (cheap); its PSS when that RSS is more than ``PSS_RISE`` (at
    least ``PSS_RISE_FLOOR``) above the highest RSS a PSS reading saw, or ``pss_interval_s`` after the
    last PSS reading (``pss_readings`` counts them). A high that rises less and lasts is read within
    ``pss_interval_s``."""

    def __init__(
        self,
        pids: Iterable[int] = (),
        interval_s: float = SAMPLE_INTERVAL_S,
        pss_interval_s: float = PSS_INTERVAL_S,
    ) -> None:
        self._roots = list(pids)
        self._interval = interval_s
        self._pss_interval = pss_interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.peak = 0
        self.peak_by_name: dict[str, int] = {}
        self.samples = 0
        self.pss_readings = 0
        self._rss_high = 0
        self._last_pss = -math.inf

    def add(self, pid: int) -> None:
        with self._lock:
            self._roots.append(pid)

    def _tree(self) -> list[psutil.Process]:
        with self._lock:
            roots = list(self._roots)
        seen: set[int] = set()
        procs = []
        for pid in roots:
            try:
                tree = process_tree(pid)
            except psutil.Error:
                continue
            for proc in tree:
                if proc.pid not in seen:
                    seen.add(proc.pid)
                    procs.append(proc)
        return procs

    def pss_due(self, rss: int, now: float) -> bool:
        """Whether a tick that saw ``rss`` at ``now`` reads PSS (and counts it as read)."""
        rise = max(PSS_RISE_FLOOR, self._rss_high * PSS_RISE)
        if rss <= self._rss_high + rise and now - self._last_pss < self._pss_interval:
            return False
        self._rss_high = max(self._rss_high, rss)
        self._last_pss = now
        self.pss_readings += 1
        return True

    def sample(self) -> int:
        """One tick; returns the tree's PSS when it was read, else its RSS."""
        procs = self._tree()
        rss = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                rss += proc.memory_info().rss
        self.samples += 1
        if not self.pss_due(rss, time.monotonic()):
            return rss
        total = 0
        by_name: dict[str, int] = {}
        for proc in procs:
            try:
                pss = _pss(proc)
                name = proc.name()
            except psutil.Error:
                continue
            total += pss
            by_name[name] = by_name.get(name, 0) + pss
        if total > self.peak:
            self.peak = total
        for name, pss in by_name.items():
            if pss > self.peak_by_name.get(name, 0):
                self.peak_by_name[name] = pss
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def __enter__(self) -> TreeSampler:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


@dataclass
class ProcessResult:
    """A measured child process: exit code, wall time, peak RSS of its tree, where its output went."""

    returncode: int
    wall_s: float
    peak_rss_bytes: int
    peak_by_name: dict[str, int] = field(default_factory=dict)
    log: Path | None = None

    @property
    def peak_rss_mib(self) -> float:
        return self.peak_rss_bytes / MIB


def stop_tree(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """Stop a process started with ``start_new_session`` and everything it started.

    SIGTERM goes to the leader first, so that it can shut down its children in order (the streaming
    ingestion stops its query, a supervisor its workers); after ``timeout_s`` the whole process group gets
    SIGTERM, then SIGKILL.
    """
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout_s)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _group_alive(process.pid):
            time.sleep(0.2)
        if not _group_alive(process.pid):
            break
    if process.poll() is None:
        process.wait(timeout=10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_measured(
    command: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 3600.0,
) -> ProcessResult:
    """Run ``command`` to completion in its own process group, output to ``log``, sampling memory.

    On timeout the whole group is killed and the result has return code -9.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(
            list(command),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            with TreeSampler([process.pid]) as sampler:
                try:
                    returncode = process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)
                    returncode = -9
        finally:
            stop_tree(process, timeout_s=5)
    return ProcessResult(returncode, time.monotonic() - started, sampler.peak, sampler.peak_by_name, log)


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file (for error messages)."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except FileNotFoundError:
        return ""


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    os_name = platform.platform()
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    disk = psutil.disk_usage(".")
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model,
        "logical_cpus": psutil.cpu_count(logical=True),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "os": os_name,
        "kernel": platform.release(),
        "disk_free_gib": round(disk.free / 1024**3, 1),
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def command_version(command: Sequence[str]) -> str:
    """First line of a tool's version output ('' when it is missing)."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else ""
