"""Freshness: time from producing an event to seeing it in ``raw.events``, under the configured trigger.

The ingestion runs continuously (``benchmarks.stage stream``: ``run_ingest`` with the default trigger,
``10 seconds`` in conf/lineage.toml) on an empty topic. After a warm-up probe, each probe waits a random
part of one trigger interval (so the probes fall at random phases of the trigger), is produced (acks=all),
and is then looked for in every new snapshot of ``raw.events`` through pyiceberg. Its freshness is the
commit timestamp of the first snapshot that contains it (written by the committing JVM on this machine's
clock) minus the wall-clock time just before ``produce``. Polling (every 200 ms) only decides when we look;
the measurement itself comes from the snapshot timestamp.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from benchmarks import measure
from benchmarks import stage as stage_process
from benchmarks.tier import TierContext, ts
from benchmarks.workload import uuid7
from lineage.io.publish import producer_config
from lineage.settings import load_settings

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

POLL_S = 0.2
VISIBLE_TIMEOUT_S = 300.0
START_TIMEOUT_S = 600.0


def measure_freshness(
    *,
    run: TierContext,
    overrides: dict[str, Any],
    bootstrap: str,
    topic: str,
    probes: int,
    trigger: str,
    interval_s: float,
) -> dict[str, Any]:
    from confluent_kafka import Producer

    from lineage.io.catalog import open_catalog

    settings_file = run.work / "jobs" / "freshness.settings.json"
    settings_file.parent.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(json.dumps(overrides, indent=2))
    out = run.work / "jobs" / "freshness.json"
    log_file = run.logs / "freshness.log"
    settings = load_settings(**overrides)
    ident = f"{settings.catalog.raw_namespace}.events"
    rng = random.Random(f"freshness:{run.config.seed}")
    producer = Producer(producer_config(bootstrap, settings.kafka.max_message_bytes))
    samples: list[dict[str, Any]] = []
    with log_file.open("wb") as log_out:
        process = _start_stage(run, "stream", settings_file, out, log_out)
        sampler = measure.TreeSampler([process.pid])
        sampler.__enter__()
        try:
            catalog = _wait_started(process, log_file, settings.catalog, ident, open_catalog)
            seen: set[int] = set()

            def send_and_wait(warm_up: bool) -> dict[str, Any]:
                sample = send_probe(producer, topic, rng)
                committed, observed = _wait_visible(catalog, ident, sample["run_id"], seen, process)
                return {
                    **sample,
                    "warm_up": warm_up,
                    "committed": committed,
                    "observed_s": round(observed - sample["sent"], 3),
                    "freshness_s": round(committed - sample["sent"], 3),
                }

            send_and_wait(warm_up=True)
            for _ in range(probes):
                time.sleep(rng.uniform(0, interval_s) if interval_s else rng.uniform(0, 1))
                samples.append(send_and_wait(warm_up=False))
        finally:
            measure.stop_tree(process, timeout_s=60)
            sampler.__exit__()
    values = [s["freshness_s"] for s in samples]
    ordered = sorted(values)
    return {
        "trigger": trigger,
        "interval_s": interval_s,
        "probes": samples,
        "freshness_s": measure.summarize(values),
        "p95_s": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else None,
        "peak_mib": round(sampler.peak / measure.MIB, 1),
        "stream_exit_code": process.returncode,
    }


def _start_stage(
    run: TierContext, stage: str, settings_file: Any, out: Any, log_out: Any, *extra: str
) -> subprocess.Popen[bytes]:
    """A :mod:`benchmarks.stage` process in a session of its own (so it and its JVM stop together)."""
    return subprocess.Popen(
        stage_process.command(run.python, stage, "--settings", str(settings_file), "--out", str(out), *extra),
        env=stage_process.environment(),
        stdout=log_out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def send_probe(producer: Any, topic: str, rng: random.Random) -> dict[str, Any]:
    """Produce one probe event (acks=all, flushed): its run id, the wall-clock time just before it was
    produced and how long the acknowledgement took."""
    run_id, value = probe_event(datetime.now(UTC), rng)
    sent = time.time()
    producer.produce(topic, key=b"run:bench/freshness-probe", value=value)
    producer.flush(30)
    return {"run_id": run_id, "sent": sent, "ack_s": round(time.time() - sent, 4)}


def probe_event(at: datetime, rng: random.Random) -> tuple[str, bytes]:
    """A small valid RunEvent with a fresh run id (the freshness probe)."""
    run_id = uuid7(at, rng)
    event = {
        "eventType": "START",
        "eventTime": ts(at),
        "producer": "https://github.com/lineage-lakehouse/bench/freshness-probe",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id},
        "job": {"namespace": "bench", "name": "freshness-probe"},
    }
    return run_id, json.dumps(event).encode()


def _wait_started(
    process: subprocess.Popen[bytes], log_file: Any, catalog_settings: Any, ident: str, open_catalog: Any
) -> Catalog:
    """Wait until the streaming query runs (its start is logged) and the raw table exists."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the streaming ingestion exited with {process.returncode}:\n{measure.tail(log_file)}"
            )
        if "ingesting " in log_file.read_text(errors="replace"):
            catalog = open_catalog(catalog_settings)
            if catalog.table_exists(ident):
                return catalog
        time.sleep(1)
    raise TimeoutError(f"the streaming ingestion did not start within {START_TIMEOUT_S:.0f} s")


def _wait_visible(
    catalog: Catalog, ident: str, run_id: str, seen: set[int], process: subprocess.Popen[bytes]
) -> tuple[float, float]:
    """(commit time of the first snapshot holding ``run_id``, when we saw it)."""
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the streaming ingestion exited with {process.returncode}")
        table = catalog.load_table(ident)
        for snapshot in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
            if snapshot.snapshot_id in seen:
                continue
            seen.add(snapshot.snapshot_id)
            found = table.scan(
                snapshot_id=snapshot.snapshot_id,
                row_filter=f"run_id == '{run_id}'",
                selected_fields=("run_id",),
            ).to_arrow()
            if found.num_rows:
                return snapshot.timestamp_ms / 1000.0, time.time()
        time.sleep(POLL_S)
    raise TimeoutError(f"probe {run_id} not visible in {ident} within {VISIBLE_TIMEOUT_S:.0f} s")


# -- lineage freshness: produced -> lake.lineage.* with the ingestion and the continuous build running ------
LINEAGE_VISIBLE_TIMEOUT_S = 900.0
FIRST_BUILD_TIMEOUT_S = 7200.0
LINEAGE_POLL_S = 0.5


def measure_lineage_freshness(
    *,
    run: TierContext,
    overrides: dict[str, Any],
    bootstrap: str,
    topic: str,
    probes: int,
    mean_gap_s: float,
    every_s: float,
) -> dict[str, Any]:
    """The time from producing an event until the lineage tables show it, on a lake that is being ingested
    (``stream``, the configured trigger) and built continuously (``build-every``, a check every
    ``every_s``) at once, as a deployment runs them.

    A warm-up probe waits for the first build of the session (on an unbuilt lake that is a full build).
    Then ``probes`` probe events (a run of their own each) are produced at random moments, ``mean_gap_s``
    apart on average, without waiting for each other: the lake keeps being ingested and built while they
    travel. A probe is *visible* at the commit time of the first ``lineage.runs`` snapshot holding its run,
    and its build is *complete* at the first ``build_state`` row recorded after that (every lineage table
    of that build committed); both are measured from the wall-clock time just before ``produce``.
    """
    from confluent_kafka import Producer

    from lineage.io.catalog import open_catalog

    jobs_dir = run.work / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    settings_file = jobs_dir / "lineage-freshness.settings.json"
    settings_file.write_text(json.dumps(overrides, indent=2))
    settings = load_settings(**overrides)
    raw_ident = f"{settings.catalog.raw_namespace}.events"
    runs_ident = f"{settings.catalog.lineage_namespace}.runs"
    state_ident = f"{settings.catalog.lineage_namespace}.build_state"
    rng = random.Random(f"lineage-freshness:{run.config.seed}")
    producer = Producer(producer_config(bootstrap, settings.kafka.max_message_bytes))
    stream_log = run.logs / "lineage-freshness-stream.log"
    build_log = run.logs / "lineage-freshness-build.log"
    processes: list[subprocess.Popen[bytes]] = []
    samples: list[dict[str, Any]] = []
    with stream_log.open("wb") as stream_out, build_log.open("wb") as build_out:
        for stage, out, extra in (
            ("stream", stream_out, []),
            ("build-every", build_out, ["--every", str(every_s)]),
        ):
            result = jobs_dir / f"lineage-freshness-{stage}.json"
            processes.append(_start_stage(run, stage, settings_file, result, out, *extra))
        sampler = measure.TreeSampler([p.pid for p in processes])
        sampler.__enter__()
        try:
            catalog = _wait_started(processes[0], stream_log, settings.catalog, raw_ident, open_catalog)
            watch = _LineageWatch(catalog, runs_ident, state_ident, processes)

            warm = send_probe(producer, topic, rng)
            watch.wait([warm], FIRST_BUILD_TIMEOUT_S)
            pending: list[dict[str, Any]] = []
            for _ in range(probes):
                deadline = time.monotonic() + rng.uniform(0, 2 * mean_gap_s)
                while time.monotonic() < deadline:
                    watch.poll(pending)
                    time.sleep(min(LINEAGE_POLL_S, max(0.0, deadline - time.monotonic())))
                sample = send_probe(producer, topic, rng)
                pending.append(sample)
                samples.append(sample)
            watch.wait(pending, LINEAGE_VISIBLE_TIMEOUT_S)
            watch.complete(samples, LINEAGE_VISIBLE_TIMEOUT_S)
        finally:
            for process in processes:
                measure.stop_tree(process, timeout_s=120)
            sampler.__exit__()
    for sample in samples:
        sample["visible_s"] = round(sample["visible"] - sample["sent"], 3)
        sample["complete_s"] = round(sample["complete"] - sample["sent"], 3)
    complete_at = [s["complete"] for s in samples]
    visible = sorted(s["visible_s"] for s in samples)
    complete = sorted(s["complete_s"] for s in samples)
    builds = (
        json.loads((jobs_dir / "lineage-freshness-build-every.json").read_text())
        if (jobs_dir / "lineage-freshness-build-every.json").exists()
        else {}
    )
    return {
        "warm_builds": warm_builds(build_log),
        "every_s": every_s,
        "mean_gap_s": mean_gap_s,
        "trigger": settings.ingest.trigger,
        "probes": samples,
        "warm_up_visible_s": round(warm["visible"] - warm["sent"], 3),
        "visible_s": measure.summarize(visible),
        "visible_worst_s": visible[-1] if visible else None,
        "complete_s": measure.summarize(complete),
        "complete_worst_s": complete[-1] if complete else None,
        "builds_while_probing": sum(
            1 for t in watch.recorded() if samples and samples[0]["sent"] <= t <= max(complete_at)
        ),
        "continuous_build": builds,
        "peak_mib": round(sampler.peak / measure.MIB, 1),
        "exit_codes": [p.returncode for p in processes],
    }


class _LineageWatch:
    """Which probes ``lineage.runs`` holds, snapshot by snapshot (each new snapshot read once), and when the
    builds that committed them recorded their ``build_state`` row."""

    def __init__(
        self, catalog: Catalog, runs_ident: str, state_ident: str, processes: list[subprocess.Popen[bytes]]
    ) -> None:
        self.catalog = catalog
        self.runs_ident = runs_ident
        self.state_ident = state_ident
        self.processes = processes
        self.seen: set[int] = set()

    def _alive(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"a lineage-freshness process exited with {process.returncode}")

    def poll(self, pending: list[dict[str, Any]]) -> None:
        waiting = {p["run_id"]: p for p in pending if "visible" not in p}
        if not waiting or not self.catalog.table_exists(self.runs_ident):
            return
        table = self.catalog.load_table(self.runs_ident)
        for snapshot in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
            if snapshot.snapshot_id in self.seen:
                continue
            self.seen.add(snapshot.snapshot_id)
            listed = ", ".join(f"'{r}'" for r in waiting)
            found = table.scan(
                snapshot_id=snapshot.snapshot_id,
                row_filter=f"run_id IN ({listed})",
                selected_fields=("run_id",),
            ).to_arrow()
            for run_id in set(found.column("run_id").to_pylist()):
                if run_id in waiting and "visible" not in waiting[run_id]:
                    waiting[run_id]["visible"] = snapshot.timestamp_ms / 1000.0

    def wait(self, pending: list[dict[str, Any]], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while any("visible" not in p for p in pending):
            if time.monotonic() > deadline:
                raise TimeoutError(f"probes not visible in {self.runs_ident} within {timeout_s:.0f} s")
            self._alive()
            self.poll(pending)
            time.sleep(LINEAGE_POLL_S)

    def recorded(self) -> list[float]:
        """The times of every build recorded in ``build_state``."""
        rows = self.catalog.load_table(self.state_ident).scan(selected_fields=("mode", "built_at")).to_arrow()
        return sorted(
            (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
            for mode, t in zip(
                rows.column("mode").to_pylist(), rows.column("built_at").to_pylist(), strict=True
            )
            if mode in ("incremental", "full", "re-extract") and t is not None
        )

    def complete(self, samples: list[dict[str, Any]], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            recorded = self.recorded()
            for sample in samples:
                later = [t for t in recorded if t >= sample["visible"]]
                if later:
                    sample["complete"] = later[0]
            if all("complete" in s for s in samples):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no build_state row after the probes within {timeout_s:.0f} s")
            self._alive()
            time.sleep(LINEAGE_POLL_S)


def warm_builds(log_file: Any) -> dict[str, Any]:
    """The continuous build's own lines (``build N: <mode>, E new events, raw snapshot S, T s``): each build's
    seconds and events in one warm session, the first (cold) one apart."""
    import re

    pattern = re.compile(r"build (\d+): (\S+), (\d+) new events, raw snapshot \S+, ([\d.]+) s")
    builds = [
        {"build": int(m[1]), "mode": m[2], "events": int(m[3]), "seconds": float(m[4])}
        for m in pattern.finditer(log_file.read_text(errors="replace"))
    ]
    warm = [float(b["seconds"]) for b in builds[1:] if b["mode"] == "incremental"]
    return {
        "builds": builds,
        "first_s": builds[0]["seconds"] if builds else None,
        "warm_s": measure.summarize(warm),
    }
