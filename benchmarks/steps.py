"""Per-step seconds and scans of build logs: ``python -m benchmarks steps LOG [LOG ...]``.

A build logs ``build step <table> committed`` after each commit, with ``(scans: ...)`` when
``LINEAGE_ICEBERG_SCAN_REPORTS`` is set (:func:`lineage.io.scans.describe`). A step's seconds are the gap
since the previous step's line (the first step's since the log's first timestamped line: the process's
start, so it holds the session's start, the lease and the metadata reads). Several logs of the same build
(``--repeat``) give a median per step; the scans are each log's own, shown for the first log that has them.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_STEP = re.compile(r" build step (\S+) committed(?: \(scans: (.*)\))?\s*$")
# One table of a scans list: "lake.lineage.runs 28/28 files 1,234 rows 3.2 MiB" (rows and MiB since
# 2026-12; older logs end after "files").
_SCAN = re.compile(r"^(\S+) (\d+)/(\d+) files(?: ([\d,]+) rows ([\d.]+) MiB)?$")


@dataclass(frozen=True)
class Scan:
    table: str
    read: int
    total: int
    rows: int | None
    mib: float | None


@dataclass
class Step:
    name: str
    seconds: float
    scans: list[Scan] = field(default_factory=list)


def parse_scans(text: str) -> list[Scan]:
    """The tables of a ``(scans: ...)`` list; ``no Iceberg scan`` is none. Raises ValueError on a part it
    cannot read (a format this parser does not know is not silently dropped)."""
    if text.strip() in ("", "no Iceberg scan"):
        return []
    found = []
    for part in text.split("; "):
        match = _SCAN.match(part.strip())
        if match is None:
            raise ValueError(f"not a scan entry: {part!r}")
        table, read, total, rows, mib = match.groups()
        found.append(
            Scan(
                table,
                int(read),
                int(total),
                None if rows is None else int(rows.replace(",", "")),
                None if mib is None else float(mib),
            )
        )
    return found


def parse_log(lines: list[str]) -> list[Step]:
    """The steps of one build log, in commit order."""
    steps: list[Step] = []
    last: datetime | None = None
    for line in lines:
        stamp = _STAMP.match(line)
        if stamp is None:
            continue
        at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if last is None:
            last = at
        step = _STEP.search(line)
        if step is None:
            continue
        steps.append(Step(step.group(1), (at - last).total_seconds(), parse_scans(step.group(2) or "")))
        last = at
    return steps


def _short(table: str) -> str:
    return table.rsplit(".", 1)[-1]


def render(logs: dict[str, list[Step]]) -> str:
    """One line per step: the median of its seconds over the logs, each log's seconds, and the tables its
    scans read (files read of those they could have read, rows, MiB) from the first log with scans."""
    order: list[str] = []
    seconds: dict[str, list[float]] = {}
    scans: dict[str, list[Scan]] = {}
    for steps in logs.values():
        for step in steps:
            if step.name not in seconds:
                order.append(step.name)
                seconds[step.name] = []
            seconds[step.name].append(step.seconds)
            if step.scans and step.name not in scans:
                scans[step.name] = step.scans
    lines = [f"# {len(logs)} build log(s): {', '.join(logs)}"]
    total = 0.0
    for name in order:
        median = statistics.median(seconds[name])
        total += median
        runs = ", ".join(f"{s:.1f}" for s in seconds[name])
        read = "; ".join(
            f"{_short(s.table)} {s.read}/{s.total}"
            + ("" if s.rows is None else f" {s.rows:,} rows {s.mib:.1f} MiB")
            for s in scans.get(name, [])
        )
        lines.append(f"{name:<28} median {median:6.1f} s  [{runs}]" + (f"  reads: {read}" if read else ""))
    lines.append(f"sum of medians: {total:.1f} s")
    return "\n".join(lines) + "\n"


def main(paths: list[Path]) -> str:
    logs = {str(path): parse_log(path.read_text(errors="replace").splitlines()) for path in paths}
    empty = [name for name, steps in logs.items() if not steps]
    if empty:
        raise SystemExit(f"no 'build step ... committed' line in {', '.join(empty)}")
    return render(logs)
