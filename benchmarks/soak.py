"""Soak: the lake under continuous ingestion for a long time, with and without maintenance.

``python -m benchmarks.soak --minutes 15 --rate 10 --build-every 100 --maintain-every 200 --label maintained``
(``--no-maintain`` for the run without maintenance; ``make bench-soak`` runs both and writes the report).

One broker and one lake of their own under ``var/bench/soak/<label>/``. The ingestion
(``benchmarks.stage stream``) runs all along with a ``1 second`` trigger; a producer thread sends tier S's
workload (:mod:`benchmarks.workload`, its noise included) at ``--rate`` messages a second. A job thread
runs a build (``benchmarks.stage build``) each time the ingestion has committed ``--build-every`` more
micro-batches, then times the CLI (``lineage runs``), and, with maintenance on, maintenance
(``benchmarks.stage maintain``) every ``--maintain-every`` micro-batches. Jobs never overlap each other
(the build and the maintenance are scheduled apart, as docs/operations.md says to); both overlap the
ingestion, as in production. Every ``--sample-s`` seconds the main thread records the micro-batches
committed, raw.events' data files (Iceberg's count and the files in its data folder), its snapshots and
the size of its metadata folder, the data files of the lineage tables, and the rows landed.

Results: ``var/bench/soak/results/<label>.json``; :func:`report` turns them into BENCHMARKS.md's soak
section and the soak panels of BENCHMARKS.png.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from benchmarks import measure
from benchmarks import stage as stage_process
from benchmarks.tier import Lake
from benchmarks.workload import TIERS, Workload
from lineage.io.local_kafka import LocalKafka, create_topic, free_port
from lineage.io.publish import producer_config
from lineage.settings import Settings, load_settings

log = logging.getLogger("benchmarks.soak")

MIB = 1024 * 1024
MAX_MESSAGE_BYTES = 32 * MIB
PARTITIONS = 4
TOPIC = "soak.events"
SOAK_ROOT = Path("var/bench/soak")
CLI_RUNS = 3
JOB_TIMEOUT_S = 1800.0


def committed_batches(checkpoint: Path) -> int:
    """Micro-batches the streaming query has committed: one more than the newest id in its commit log
    (Spark deletes old commit files, so the count of files is not the count of batches)."""
    ids = [int(p.name) for p in (checkpoint / "commits").glob("*") if p.name.isdigit()]
    return max(ids) + 1 if ids else 0


def next_job(batches: int, due: dict[str, int | None], last: str | None) -> str | None:
    """Which job to run now: one whose batch is reached (``due``: job -> batch, None = never); when both
    are, the one that did not run last, so that a build slower than its interval cannot starve
    maintenance. Each job's next batch counts from when it ended."""
    ready = [job for job, at in due.items() if at is not None and batches >= at]
    if not ready:
        return None
    others = [job for job in ready if job != last]
    return (others or ready)[0]


def folder_stats(path: Path) -> tuple[int, int]:
    """(files, bytes) under ``path``, recursively, less Hadoop's ``.crc`` checksum files; (0, 0) when it
    does not exist."""
    files = size = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            if name.endswith(".crc"):
                continue
            try:
                size += (Path(root) / name).stat().st_size
            except FileNotFoundError:  # an old metadata file an Iceberg commit deleted meanwhile
                continue
            files += 1
    return files, size


def _local_path(uri: str) -> Path:
    return Path(urlparse(uri).path) if "://" in uri or uri.startswith("file:") else Path(uri)


def table_sample(table: Any) -> dict[str, int]:
    """One pyiceberg table's file counts, snapshots and metadata size."""
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    metadata_files, metadata_bytes = folder_stats(_local_path(table.metadata_location).parent)
    data_files_on_disk, data_bytes = folder_stats(_local_path(table.location()) / "data")

    def total(key: str) -> int:
        value = summary.additional_properties.get(key) if summary is not None else None
        return int(value) if value is not None else 0

    return {
        "data_files": total("total-data-files"),
        "rows": total("total-records"),
        "snapshots": len(table.snapshots()),
        "metadata_files": metadata_files,
        "metadata_bytes": metadata_bytes,
        "data_files_on_disk": data_files_on_disk,
        "data_bytes_on_disk": data_bytes,
    }


@dataclass
class Soak:
    """One soak run: its lake, its broker's address, what it measured."""

    label: str
    work: Path
    overrides: dict[str, Any]
    python: list[str]
    maintain: bool
    build_every: int
    maintain_every: int
    samples: list[dict[str, Any]] = field(default_factory=list)
    builds: list[dict[str, Any]] = field(default_factory=list)
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    cli: list[dict[str, Any]] = field(default_factory=list)
    sent: int = 0
    started: float = field(default_factory=time.time)

    @property
    def checkpoint(self) -> Path:
        return Path(self.overrides["ingest"]["checkpoint"])

    @property
    def settings_file(self) -> Path:
        return self.work / "settings.json"

    def env(self) -> dict[str, str]:
        catalog = self.overrides["catalog"]
        return {
            **stage_process.environment(),
            "LINEAGE__CATALOG__SQLITE_PATH": catalog["sqlite_path"],
            "LINEAGE__CATALOG__WAREHOUSE": catalog["warehouse"],
            "LINEAGE__KAFKA__BOOTSTRAP_SERVERS": self.overrides["kafka"]["bootstrap_servers"],
            "LINEAGE__KAFKA__TOPIC": TOPIC,
            "LINEAGE__OPENLINEAGE__ENABLED": "false",
        }

    def run_job(self, name: str, *args: str) -> dict[str, Any]:
        """One stage process to its end: wall time, the stage's own timings, peak memory."""
        index = len(self.builds) + len(self.maintenance)
        out = self.work / "jobs" / f"{index:04d}-{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        at_batch = committed_batches(self.checkpoint)
        job_log = self.work / "logs" / f"{index:04d}-{name}.log"
        result = measure.run_measured(
            stage_process.command(
                self.python, name, "--settings", str(self.settings_file), "--out", str(out), *args
            ),
            log=job_log,
            env=self.env(),
            timeout_s=JOB_TIMEOUT_S,
        )
        if result.returncode != 0:
            raise RuntimeError(f"soak {name} failed ({result.returncode}):\n{measure.tail(job_log)}")
        timings = json.loads(out.read_text())
        return {
            "at_s": round(time.time() - self.started, 1),
            "at_batch": at_batch,
            "wall_s": round(result.wall_s, 2),
            "work_s": round(timings["work_end"] - timings["work_start"], 2),
            "peak_mib": round(result.peak_rss_mib, 1),
            **{k: timings[k] for k in ("mode", "new_events", "tables") if k in timings},
        }

    def time_cli(self) -> dict[str, Any]:
        """``lineage runs --limit 20 --json`` (a new process each time), median of :data:`CLI_RUNS`."""
        lineage = str(Path(self.python[0]).parent / "lineage")
        times = []
        for _ in range(CLI_RUNS):
            started = time.monotonic()
            done = subprocess.run(
                [lineage, "runs", "--limit", "20", "--json"], env=self.env(), capture_output=True, check=False
            )
            times.append(time.monotonic() - started)
            if done.returncode != 0:
                raise RuntimeError(f"lineage runs failed: {done.stderr.decode(errors='replace')[-2000:]}")
        return {
            "at_s": round(time.time() - self.started, 1),
            "at_batch": committed_batches(self.checkpoint),
            "median_s": round(statistics.median(times), 3),
        }

    def jobs(self, stop: threading.Event, errors: list[BaseException]) -> None:
        """The job thread: builds (then the CLI) and maintenance on their batch schedules, never together."""
        due = {"build": self.build_every, "maintain": self.maintain_every if self.maintain else None}
        last: str | None = None
        try:
            while not stop.is_set():
                job = next_job(committed_batches(self.checkpoint), due, last)
                if job is None:
                    stop.wait(2)
                    continue
                done = self.run_job(job)
                if job == "build":
                    self.builds.append(done)
                    self.cli.append(self.time_cli())
                    due["build"] = committed_batches(self.checkpoint) + self.build_every
                else:
                    self.maintenance.append(done)
                    due["maintain"] = committed_batches(self.checkpoint) + self.maintain_every
                last = job
        except BaseException as exc:  # reported by the main thread, which stops the run
            errors.append(exc)
            stop.set()

    def sample(self, catalog: Any, settings: Settings, previous: dict[str, Any] | None) -> dict[str, Any]:
        raw = table_sample(catalog.load_table(f"{settings.catalog.raw_namespace}.events"))
        lineage_files = 0
        namespace = settings.catalog.lineage_namespace
        if (namespace,) in catalog.list_namespaces():
            for ident in catalog.list_tables(namespace):
                snapshot = catalog.load_table(ident).current_snapshot()
                if snapshot is not None:
                    lineage_files += int(snapshot.summary.additional_properties.get("total-data-files", 0))
        now = time.time()
        point = {
            "at_s": round(now - self.started, 1),
            "batches": committed_batches(self.checkpoint),
            "sent": self.sent,
            "raw": raw,
            "lineage_data_files": lineage_files,
        }
        if previous is not None and point["at_s"] > previous["at_s"]:
            gap = point["at_s"] - previous["at_s"]
            point["landed_per_s"] = round((raw["rows"] - previous["raw"]["rows"]) / gap, 2)
        return point


def _messages(seed: int) -> Iterator[tuple[bytes | None, bytes | None]]:
    while True:  # tier S's window, again from the start if a long soak uses it up
        for message, _part in Workload(TIERS["S"], seed=seed).stream():
            yield message.key, message.value


def _produce(soak: Soak, bootstrap: str, rate: float, seed: int, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, MAX_MESSAGE_BYTES))
    started = time.monotonic()
    for key, value in _messages(seed):
        if stop.is_set():
            break
        due = started + soak.sent / rate
        if due > time.monotonic():
            stop.wait(due - time.monotonic())
        producer.produce(TOPIC, key=key, value=value)
        producer.poll(0)
        soak.sent += 1
    producer.flush(30)


def run_soak(args: argparse.Namespace) -> Path:
    from lineage.io.catalog import open_catalog

    work = SOAK_ROOT / args.label
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    broker = LocalKafka(
        data_dir=(work / "kafka").resolve(),
        jars_dir=Path(".jars/kafka").resolve(),
        port=free_port(),
        controller_port=free_port(),
        max_message_bytes=MAX_MESSAGE_BYTES,
        partitions=PARTITIONS,
    )
    lake = Lake((work / "lake").resolve())
    overrides = lake.overrides(broker.bootstrap_servers, TOPIC)
    overrides["ingest"]["trigger"] = args.trigger
    overrides["maintain"] = {
        "snapshot_max_age_hours": args.snapshot_max_age_hours,
        "retain_last_snapshots": args.retain_last_snapshots,
    }
    soak = Soak(
        label=args.label,
        work=work,
        overrides=overrides,
        python=[sys.executable],
        maintain=not args.no_maintain,
        build_every=args.build_every,
        maintain_every=args.maintain_every,
    )
    soak.settings_file.write_text(json.dumps(overrides, indent=2))
    stop = threading.Event()
    errors: list[BaseException] = []
    stream = None
    stream_log = None
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS, MAX_MESSAGE_BYTES)
        (work / "logs").mkdir(exist_ok=True)
        out = work / "stream.json"
        stream_log = (work / "logs" / "stream.log").open("wb")
        stream = subprocess.Popen(
            stage_process.command(
                soak.python, "stream", "--settings", str(soak.settings_file), "--out", str(out)
            ),
            env=soak.env(),
            stdout=stream_log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        producer = threading.Thread(
            target=_produce, args=(soak, broker.bootstrap_servers, args.rate, args.seed, stop), daemon=True
        )
        producer.start()
        while committed_batches(soak.checkpoint) == 0:  # the first batch also creates the raw tables
            if stream.poll() is not None:
                raise RuntimeError(f"the ingestion exited:\n{measure.tail(work / 'logs' / 'stream.log')}")
            time.sleep(1)
        soak.started = time.time()
        jobs = threading.Thread(target=soak.jobs, args=(stop, errors), daemon=True)
        jobs.start()
        settings = load_settings(**overrides)
        catalog = open_catalog(settings.catalog)
        previous = None
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline and not stop.is_set():
            if stream.poll() is not None:
                raise RuntimeError(f"the ingestion exited:\n{measure.tail(work / 'logs' / 'stream.log')}")
            try:
                point = soak.sample(catalog, settings, previous)
            except FileNotFoundError as exc:  # a metadata file replaced between listing and reading
                log.warning("sample skipped: %s", exc)
                stop.wait(1)
                continue
            soak.samples.append(point)
            previous = point
            log.info(
                "%5.0f s  batch %5d  raw data files %5d  snapshots %5d  metadata %6.1f MiB  rows %d",
                previous["at_s"],
                previous["batches"],
                previous["raw"]["data_files"],
                previous["raw"]["snapshots"],
                previous["raw"]["metadata_bytes"] / MIB,
                previous["raw"]["rows"],
            )
            stop.wait(args.sample_s)
        stop.set()
        jobs.join(timeout=JOB_TIMEOUT_S)
        producer.join(timeout=60)
        if errors:
            raise RuntimeError(f"a soak job failed: {errors[0]}") from errors[0]
        # After the last job: what it left behind.
        soak.samples.append(soak.sample(catalog, settings, previous))
    finally:
        stop.set()
        if stream is not None:
            measure.stop_tree(stream, timeout_s=60)
        if stream_log is not None:
            stream_log.close()
        broker.stop()
    results = {
        "label": args.label,
        "command": " ".join(["python", "-m", "benchmarks.soak", *sys.argv[1:]]),
        "machine": measure.machine(),
        "settings": {k: v for k, v in vars(args).items() if k != "func"},
        "maintenance_on": soak.maintain,
        "sent": soak.sent,
        "samples": soak.samples,
        "builds": soak.builds,
        "maintenance": soak.maintenance,
        "cli": soak.cli,
    }
    out = SOAK_ROOT / "results" / f"{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    return out


# -- the report -------------------------------------------------------------------------------------------
SECTION = Path("docs/benchmark-soak.md")
CHART = Path("BENCHMARKS-soak.png")


def load(results_dir: Path) -> list[dict[str, Any]]:
    """Every soak result in ``results_dir``, :func:`load_sorted`."""
    return load_sorted([json.loads(p.read_text()) for p in sorted(results_dir.glob("*.json"))])


def load_sorted(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs with maintenance first, then by label."""
    return sorted(results, key=lambda r: (not r["maintenance_on"], r["label"]))


def slope_per_1000(points: list[tuple[float, float]]) -> float | None:
    """Least-squares growth of y per 1,000 micro-batches (None with fewer than two distinct x)."""
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    num = sum((x - mean_x) * (y - mean_y) for x, y in points)
    den = sum((x - mean_x) ** 2 for x, _ in points)
    return 1000 * num / den


def _third(values: list[float], which: int) -> float | None:
    """Median of the first (0) or last (2) third of ``values``."""
    if not values:
        return None
    n = max(1, len(values) // 3)
    part = values[:n] if which == 0 else values[-n:]
    return statistics.median(part)


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def summary_rows(result: dict[str, Any]) -> dict[str, str]:
    """One run's cells: start -> end (or first third -> last third) of each series."""
    samples = result["samples"]
    first, last = samples[0], samples[-1]

    def trend(key: Any, digits: int = 0) -> str:
        a, b = key(first), key(last)
        return f"{_fmt(a, digits)} → {_fmt(b, digits)}"

    def growth(key: Any, digits: int = 1) -> str:
        return _fmt(slope_per_1000([(s["batches"], key(s)) for s in samples]), digits)

    rates = [s["landed_per_s"] for s in samples if s.get("landed_per_s") is not None]
    builds = [b["work_s"] for b in result["builds"]]
    cli = [c["median_s"] for c in result["cli"]]
    maintenance = [m["work_s"] for m in result["maintenance"]]
    return {
        "micro-batches committed": trend(lambda s: s["batches"]),
        "raw.events data files (current snapshot)": trend(lambda s: s["raw"]["data_files"]),
        "… growth per 1,000 batches": growth(lambda s: s["raw"]["data_files"], 0),
        "files in raw.events' data folder": trend(lambda s: s["raw"]["data_files_on_disk"]),
        "raw.events snapshots": trend(lambda s: s["raw"]["snapshots"]),
        "raw.events metadata folder (MiB)": trend(lambda s: s["raw"]["metadata_bytes"] / MIB, 1),
        "… growth per 1,000 batches (MiB)": growth(lambda s: s["raw"]["metadata_bytes"] / MIB),
        "lineage tables' data files": trend(lambda s: s["lineage_data_files"]),
        "rows landed / s (first → last third, median)": f"{_fmt(_third(rates, 0), 1)} → "
        f"{_fmt(_third(rates, 2), 1)}",
        "build seconds (first → last third, median)": f"{_fmt(_third(builds, 0), 1)} → "
        f"{_fmt(_third(builds, 2), 1)} ({len(builds)} builds)",
        "`lineage runs` seconds (first → last third, median)": f"{_fmt(_third(cli, 0), 2)} → "
        f"{_fmt(_third(cli, 2), 2)}",
        "maintenance runs, median seconds": f"{len(maintenance)}, {_fmt(_median(maintenance), 1)}",
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def render(results: list[dict[str, Any]], chart_name: str) -> str:
    if not results:
        return ""
    cells = [summary_rows(r) for r in results]
    head = "| measurement | " + " | ".join(
        f"{r['label']} ({'maintenance' if r['maintenance_on'] else 'no maintenance'})" for r in results
    )
    out = [
        "## Soak: continuous ingestion, with and without maintenance",
        "",
        "`make bench-soak` (`python -m benchmarks.soak`, then `python -m benchmarks.soak report`): the "
        "ingestion runs without a break at a 1 s trigger while tier S's workload arrives at a steady rate; "
        "a build runs every N micro-batches (then the CLI is timed), and maintenance every M in the run "
        "with maintenance. Jobs overlap the ingestion, never each other. One run each, on the same machine "
        f"one after the other: a trend over time, not a median of repeats. ![soak]({chart_name})",
        "",
        head + " |",
        "| --- |" + " --- |" * len(results),
    ]
    for row in cells[0]:
        out.append(f"| {row} | " + " | ".join(c[row] for c in cells) + " |")
    out += ["", "Commands:", ""]
    out += [f"- `{r['command']}` ({r['sent']:,} messages sent)" for r in results]
    m = results[0]["machine"]
    out += [
        "",
        f"Machine: {m.get('cpu_model') or '?'}, {m.get('usable_cpus', '?')} usable cores, "
        f"{m.get('memory_gib', '?')} GiB, {m.get('os', '?')}.",
        "",
    ]
    return "\n".join(out)


def render_chart(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    panels = [
        (axes[0][0], "raw.events data files",
         lambda r: [(s["batches"], s["raw"]["data_files"]) for s in r["samples"]]),
        (axes[0][1], "raw.events metadata (MiB)",
         lambda r: [(s["batches"], s["raw"]["metadata_bytes"] / MIB) for s in r["samples"]]),
        (axes[1][0], "build seconds", lambda r: [(b["at_batch"], b["work_s"]) for b in r["builds"]]),
        (axes[1][1], "`lineage runs` seconds", lambda r: [(c["at_batch"], c["median_s"]) for c in r["cli"]]),
    ]  # fmt: skip
    for axis, title, points in panels:
        for r in results:
            xy = points(r)
            if xy:
                label = f"{r['label']} ({'maintenance' if r['maintenance_on'] else 'none'})"
                axis.plot([x for x, _ in xy], [y for _, y in xy], "o-" if len(xy) < 40 else "-", label=label)
        axis.set_title(title)
        axis.set_xlabel("micro-batches committed")
        axis.legend(fontsize=8)
        axis.set_ylim(bottom=0)
    fig.suptitle("Soak: 1 s trigger, builds every N batches, maintenance every M")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def report(results_dir: Path = SOAK_ROOT / "results") -> tuple[Path, Path]:
    """Write :data:`SECTION` (read into BENCHMARKS.md by ``benchmarks report``) and :data:`CHART`."""
    results = load(results_dir)
    render_chart(results, CHART)
    SECTION.write_text(render(results, f"../{CHART}"))
    return SECTION, CHART


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["report"]:
        for path in report():
            print(path)
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--label", required=True, help="names the lake folder and the results file")
    parser.add_argument("--minutes", type=float, default=15.0, help="minutes after the first batch")
    parser.add_argument("--rate", type=float, default=10.0, help="messages per second sent")
    parser.add_argument("--trigger", default="1 second", help="the ingestion's processing-time trigger")
    parser.add_argument("--build-every", type=int, default=100, help="micro-batches between builds")
    parser.add_argument("--maintain-every", type=int, default=200, help="micro-batches between maintenance")
    parser.add_argument("--no-maintain", action="store_true", help="never run maintenance")
    parser.add_argument("--snapshot-max-age-hours", type=float, default=0.05, help="[maintain] expiry age")
    parser.add_argument("--retain-last-snapshots", type=int, default=10, help="[maintain] snapshots kept")
    parser.add_argument("--sample-s", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    print(run_soak(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
