"""The benchmarks (issue 6): ``python -m benchmarks run|report|workload|trino-tier``.

  run       measure tiers (``--tier S --tier M``), each stage repeated ``--repeat`` times, results JSON to
            var/bench/results/<tier>.json
  report    BENCHMARKS.md and BENCHMARKS.png from the latest results of every tier
  workload  print the shape of a tier's synthetic workload (no Kafka)
  trino-tier  Trino beside ``lineage sql`` on a kept tier lake (issue 39): benchmarks/trino_tier.py
  steps     per-step seconds (and scans) of build logs: benchmarks/steps.py

``make bench-quick`` = ``run --tier S`` + ``report``; ``make bench`` = every tier + ``report``.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from benchmarks.runner import run_benchmarks
from benchmarks.tier import ALL_STAGES, BUILD_PARTS, BenchConfig
from benchmarks.workload import TIERS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="measure tiers and write var/bench/results/<tier>.json")
    run.add_argument("--tier", action="append", choices=sorted(TIERS), help="repeatable (default: S)")
    run.add_argument("--repeat", type=int, default=3, help="runs per measurement (at least 3 for the report)")
    run.add_argument("--seed", type=int, default=42)
    run.add_argument("--stages", default=",".join(ALL_STAGES), help=f"comma list of {', '.join(ALL_STAGES)}")
    run.add_argument(
        "--build-parts",
        default=",".join(BUILD_PARTS),
        help=f"build stage: which measurements follow the lake's first build ({', '.join(BUILD_PARTS)})",
    )
    run.add_argument("--freshness-probes", type=int, default=8)
    run.add_argument(
        "--lineage-probes", type=int, default=20, help="lineage-freshness: probe events (20 by default)"
    )
    run.add_argument("--query-runs", type=int, default=10, help="timed runs of every CLI query")
    run.add_argument(
        "--rentgen-tiers", default="S", help="tiers with the Data.Rentgen side by side (comma list)"
    )
    run.add_argument("--rentgen-workers", type=int, default=4)
    run.add_argument("--rentgen-python", type=Path, default=Path(".venv-rentgen/bin/python"))
    run.add_argument("--label", default="", help="a note printed with these results (e.g. a shared machine)")
    run.add_argument("--keep", action="store_true", help="keep the work folder (lakes, broker data)")
    run.add_argument(
        "--seed-lake",
        type=Path,
        help="start from a copy of this tier's lake kept from its work folder (var/bench/work/<tier>/"
        "lake after --keep): Iceberg metadata holds absolute paths, so the copy goes back to the same place",
    )
    run.add_argument(
        "--stack",
        choices=["local", "cluster"],
        default="local",
        help="local: the embedded default; cluster: ingest and build on a local Spark standalone cluster "
        "with an Iceberg REST catalog and S3Proxy (results under <results>/cluster/)",
    )
    run.add_argument("--workers", type=int, default=2, help="--stack cluster: Spark workers")
    run.add_argument("--worker-cores", type=int, default=1, help="--stack cluster: cores per worker")
    run.add_argument("--worker-memory", default="2g", help="--stack cluster: memory per worker")
    run.add_argument("--work", type=Path, default=Path("var/bench/work"))
    run.add_argument("--results", type=Path, default=Path("var/bench/results"))

    report = sub.add_parser("report", help="write BENCHMARKS.md and the chart from the results")
    report.add_argument("--results", type=Path, default=Path("var/bench/results"))
    report.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    report.add_argument("--chart", type=Path, default=Path("BENCHMARKS.png"))

    shape = sub.add_parser("workload", help="print the shape of a tier's workload")
    shape.add_argument("--tier", choices=sorted(TIERS), default="S")
    shape.add_argument("--seed", type=int, default=42)
    shape.add_argument("--part", default="base")

    trino = sub.add_parser(
        "trino-tier", help="Trino's answers and timings beside `lineage sql` on a kept tier lake (issue 39)"
    )
    trino.add_argument("--seed-lake", type=Path, required=True, help="a tier's lake (catalog.db, warehouse/)")
    trino.add_argument("--work", type=Path, default=Path("var/bench/work/trino"))
    trino.add_argument("--results", type=Path, default=Path("var/bench/results/trino.json"), help="a file")
    trino.add_argument("--query-runs", type=int, default=10, help="timed runs of every question per engine")
    trino.add_argument("--tier", choices=sorted(TIERS), default="M", help="the seed lake's tier (a label)")
    trino.add_argument("--label", default="", help="a note kept with the results")

    steps = sub.add_parser("steps", help="per-step seconds and scans of build logs (<work>/<tier>/logs)")
    steps.add_argument("logs", type=Path, nargs="+", help="build logs of the same build, e.g. --repeat runs")

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "run":
        stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
        unknown = set(stages) - set(ALL_STAGES)
        if unknown:
            parser.error(f"unknown stages: {', '.join(sorted(unknown))}")
        parts = tuple(p.strip() for p in args.build_parts.split(",") if p.strip())
        if set(parts) - set(BUILD_PARTS):
            parser.error(f"unknown build parts: {', '.join(sorted(set(parts) - set(BUILD_PARTS)))}")
        if "history-warm" in parts and "history" not in parts:
            parser.error("--build-parts history-warm builds the history delta: it needs history too")
        if args.repeat < 1:
            parser.error("--repeat must be at least 1")
        if args.stack == "cluster" and args.seed_lake is not None:
            parser.error("--seed-lake is for the local stack (a cluster lake lives in its stack)")
        if args.seed_lake is not None:
            if len(args.tier or ["S"]) != 1 or "ingest" in stages:
                parser.error("--seed-lake takes one --tier and --stages without ingest")
            if not (args.seed_lake / "catalog.db").is_file():
                parser.error(f"--seed-lake {args.seed_lake}: no catalog.db in it")
        config = BenchConfig(
            tiers=args.tier or ["S"],
            repeat=args.repeat,
            seed=args.seed,
            stages=stages,
            build_parts=parts,
            work_root=args.work,
            results_dir=args.results,
            freshness_probes=args.freshness_probes,
            lineage_probes=args.lineage_probes,
            query_runs=args.query_runs,
            rentgen_tiers=tuple(t.strip() for t in args.rentgen_tiers.split(",") if t.strip()),
            rentgen_workers=args.rentgen_workers,
            rentgen_python=args.rentgen_python,
            label=args.label,
            keep=args.keep,
            seed_lake=args.seed_lake.resolve() if args.seed_lake else None,
            stack=args.stack,
            workers=args.workers,
            worker_cores=args.worker_cores,
            worker_memory=args.worker_memory,
            command=shlex.join(["python", "-m", "benchmarks", *(argv if argv is not None else sys.argv[1:])]),
        )
        for path in run_benchmarks(config):
            print(f"results: {path}")
        return 0
    if args.command == "trino-tier":
        from benchmarks.trino_tier import run_trino_tier

        if not (args.seed_lake / "catalog.db").is_file():
            parser.error(f"--seed-lake {args.seed_lake}: no catalog.db in it")
        if args.query_runs < 1:
            parser.error("--query-runs must be at least 1")
        command = shlex.join(["python", "-m", "benchmarks", *(argv if argv is not None else sys.argv[1:])])
        done = run_trino_tier(
            args.seed_lake.resolve(),
            args.work.resolve(),
            args.results,
            args.query_runs,
            command,
            args.label,
            args.tier,
        )
        for entry in done.get("questions", []):
            trino_s, sql_s = entry.get("trino", {}), entry.get("lineage_sql", {})
            print(
                f"{entry['query']}: trino p50 {trino_s.get('p50_s')} s p95 {trino_s.get('p95_s')} s; "
                f"lineage sql p50 {sql_s.get('p50_s')} s p95 {sql_s.get('p95_s')} s; "
                f"answers equal: {entry.get('answers_equal')}"
            )
        print(f"results: {args.results}")
        return 0 if done.get("answers_equal") else 1
    if args.command == "steps":
        from benchmarks.steps import main as steps_main

        print(steps_main(args.logs), end="")
        return 0
    if args.command == "report":
        from benchmarks.report import write_report

        md, chart = write_report(args.results, args.out, args.chart)
        print(f"wrote {md} and {chart}")
        return 0
    from benchmarks.workload import main as workload_main

    return workload_main(["--tier", args.tier, "--seed", str(args.seed), "--part", args.part])


if __name__ == "__main__":
    sys.exit(main())
