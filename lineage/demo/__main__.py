"""The demo's steps that are not Spark jobs: ``publish`` the lab events, ``report`` what landed.

``python -m lineage.demo publish`` sends the lab events with openlineage-python's KafkaTransport and the
malformed messages as raw bytes, unless the topic already holds messages (so re-running the demo never
duplicates them). ``python -m lineage.demo report`` prints rows per table and rejected reasons, read
with pyiceberg; ``python -m lineage.demo lineage`` prints the lineage model's answers for the lab;
``self`` prints our own jobs as they reported themselves; ``run-event`` sends the demo run's own events.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter

from lineage.demo.events import MALFORMED, WAREHOUSE, lab_events
from lineage.io.catalog import open_catalog
from lineage.io.local_kafka import create_topic
from lineage.io.publish import kafka_client, publish_events, publish_raw, topic_message_count
from lineage.query.answers import problem_words
from lineage.query.health import health_of
from lineage.query.liveness import as_of
from lineage.query.nodes import display_name
from lineage.query.store import LineageStore
from lineage.query.tags import tags_of
from lineage.settings import Settings, load_settings


def publish(settings: Settings, force: bool = False) -> None:
    kafka = settings.kafka
    security = kafka.security.librdkafka()
    create_topic(
        kafka.bootstrap_servers,
        kafka.topic,
        settings.local_kafka.partitions,
        kafka.max_message_bytes,
        security,
    )
    already = topic_message_count(kafka.bootstrap_servers, kafka.topic, security)
    if already and not force:
        print(f"topic {kafka.topic} already holds {already} messages: not publishing the demo events again")
        return
    client = kafka_client(kafka.bootstrap_servers, kafka.topic, kafka.max_message_bytes, security)
    sent = publish_events(client, (e.event for e in lab_events()))
    bad = publish_raw(
        kafka.bootstrap_servers,
        kafka.topic,
        [(b"malformed", v) for v, _ in MALFORMED],
        kafka.max_message_bytes,
        security,
    )
    print(
        f"published {sent} OpenLineage events (openlineage-python KafkaTransport) and {bad} malformed "
        f"messages to {kafka.topic} on {kafka.bootstrap_servers}"
    )


def report(settings: Settings) -> None:
    catalog = open_catalog(settings.catalog)
    cat = settings.catalog
    events = (
        catalog.load_table((cat.raw_namespace, "events"))
        .scan(selected_fields=("event_kind", "event_type", "producer"))
        .to_arrow()
    )
    rejected = (
        catalog.load_table((cat.raw_namespace, "rejected"))
        .scan(selected_fields=("reason", "detail", "kafka_offset"))
        .to_arrow()
    )
    print(f"\n{cat.events_table}: {events.num_rows} rows")
    kinds = Counter(
        zip(events.column("event_kind").to_pylist(), events.column("event_type").to_pylist(), strict=True)
    )
    for (kind, etype), n in sorted(kinds.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        print(f"  {kind:<13} {etype or '-':<9} {n:>6}")
    print(f"{cat.rejected_table}: {rejected.num_rows} rows")
    reasons = Counter(rejected.column("reason").to_pylist())
    examples = dict(
        zip(rejected.column("reason").to_pylist(), rejected.column("detail").to_pylist(), strict=True)
    )
    for reason, n in sorted(reasons.items()):
        print(f"  {reason:<19} {n:>4}  e.g. {examples[reason]}")


def lineage_report(settings: Settings) -> None:
    """The lab's pain points, answered from lake.lineage.* (read with pyiceberg)."""
    catalog = open_catalog(settings.catalog)
    ns = settings.catalog.lineage_namespace

    def rows(table: str) -> list[dict]:
        return catalog.load_table((ns, table)).scan().to_arrow().to_pylist()

    # Our own jobs' runs are in the same table; `self` shows them.
    # As of now: a run whose deadline passed since the build is LOST (lineage.query.liveness).
    runs = [as_of(r) for r in rows("runs") if r["job_namespace"] != settings.openlineage.namespace]
    print(f"\n{settings.catalog.table(ns, 'runs')}: {len(runs)} runs of the lab (reported -> inferred state)")
    for run in sorted(runs, key=lambda r: (r["job_namespace"], r["job_name"], str(r["started_at"]))):
        flag = "  <- stuck: no terminal event" if run["inferred_state"] == "LOST" else ""
        print(f"  {run['job_name'][:66]:<66} {run['reported_state']:>8} -> {run['inferred_state']:<8}{flag}")
        if run["inferred_state"] == "LOST":
            print(f"    {run['liveness_reason']}")
    edges = rows("job_edges")
    ours = {e["dataset_id"] for e in edges if e["job_namespace"] == settings.openlineage.namespace}
    ours -= {e["dataset_id"] for e in edges if e["job_namespace"] != settings.openlineage.namespace}
    datasets = {d["dataset_id"]: d for d in rows("datasets") if d["dataset_id"] not in ours}
    aliases = [a for a in rows("dataset_aliases") if a["dataset_id"] in datasets]
    title = settings.catalog.table(ns, "datasets")
    print(f"\n{title}: {len(datasets)} datasets of the lab from {len(aliases)} names")
    merged: dict[str, list[str]] = {}
    for alias in aliases:
        if alias["alias_kind"] != "self":
            merged.setdefault(alias["dataset_id"], []).append(
                f"{alias['alias_namespace']}/{alias['alias_name']} ({alias['alias_kind']})"
            )
    for dataset_id, names in sorted(merged.items()):
        d = datasets[dataset_id]
        print(f"  {d['namespace']}/{d['name']}  <=  " + ", ".join(sorted(names)))
    print("\ndataset-level lineage (source -> target, through job):")
    lab_edges = [e for e in rows("dataset_edges") if e["job_namespace"] != settings.openlineage.namespace]
    for edge in sorted(lab_edges, key=lambda e: e["first_seen"]):
        source, target = datasets[edge["source_dataset_id"]], datasets[edge["target_dataset_id"]]
        print(
            f"  {source['namespace']}/{source['name']} -> {target['namespace']}/{target['name']}"
            f"  [{edge['job_name']}]"
        )


def health_report(settings: Settings) -> None:
    """What is wrong upstream of the Spark summary table, each cause with its path, and the hourly table
    that stopped being written (``lineage health``)."""
    store = LineageStore(settings)
    target = f"{WAREHOUSE}/default.db/supplier_stats"
    data = health_of(store, target)
    print(f"\nhealth along lineage (lineage health {target}):")
    print(f"  own state: {data['state']}; upstream: {data['upstream']}")
    for cause in data["causes"]:
        hops = f"{cause['hops']} hop{'s' * (cause['hops'] != 1)}"
        problems = "; ".join(problem_words(p) for p in cause["problems"])
        print(f"  {hops} up, {cause['kind']} {cause['label']}: {problems}")
    late = f"{WAREHOUSE}/default.db/fx_rates"
    own = health_of(store, late)
    print(f"lineage health {late}: {own['state']} ({'; '.join(problem_words(p) for p in own['problems'])})")


def tags_report(settings: Settings) -> None:
    """The column tags of the Spark summary table, with where each came from (``lineage tags``)."""
    target = f"{WAREHOUSE}/default.db/supplier_stats"
    data = tags_of(LineageStore(settings), target)
    print(f"\ncolumn tags along lineage (lineage tags {target}):")
    for tag in data["tags"]:
        origin = tag["origin"]
        via = " -> ".join(step["job"] for step in tag["path"])
        print(
            f"  {tag['field']}: {tag['tag']} from {origin['dataset']}.{origin['field']} "
            f"({tag['hops']} hops: {via})"
        )
    if not any(t["field"] == "total_price" for t in data["tags"]):
        print("  total_price: none (the price is confidential upstream; an AGGREGATION does not carry it)")


def column_report(settings: Settings) -> None:
    """End-to-end column lineage of the Spark summary table (lake.lineage.column_paths)."""
    catalog = open_catalog(settings.catalog)
    ns = settings.catalog.lineage_namespace
    datasets = {
        d["dataset_id"]: d for d in catalog.load_table((ns, "datasets")).scan().to_arrow().to_pylist()
    }
    paths = catalog.load_table((ns, "column_paths")).scan().to_arrow().to_pylist()
    print("\ncolumn lineage, end to end (target column <- source column, hops, jobs):")
    for path in sorted(paths, key=lambda p: (p["target_field"], -p["hops"])):
        target, source = datasets[path["target_dataset_id"]], datasets[path["source_dataset_id"]]
        if not target["name"].endswith("supplier_stats") or path["hops"] < 2:
            continue
        print(
            f"  {target['name']}.{path['target_field']} <- {source['namespace']}/{source['name']}."
            f"{path['source_field']}  ({path['hops']} hops{', all DIRECT' if path['all_direct'] else ''}: "
            f"{' -> '.join(path['jobs'])})"
        )


def self_report(settings: Settings) -> None:
    """Our own jobs, as the lineage model sees them after they reported themselves (lineage.observe)."""
    catalog = open_catalog(settings.catalog)
    ns = settings.catalog.lineage_namespace
    ours = settings.openlineage.namespace

    def rows(name: str) -> list[dict]:
        return catalog.load_table((ns, name)).scan().to_arrow().to_pylist()

    datasets = {d["dataset_id"]: display_name(d["namespace"], d["name"]) for d in rows("datasets")}
    runs = [as_of(r) for r in rows("runs") if r["job_namespace"] == ours]
    edges = [e for e in rows("job_edges") if e["job_namespace"] == ours]
    print(f"\nour own jobs in lake.lineage (namespace {ours}, reported through openlineage-python):")
    if not runs:
        print("  none yet: they appear after the next ingestion + build")
    for job in sorted({r["job_name"] for r in runs}):
        job_runs = [r for r in runs if r["job_name"] == job]
        states = Counter(r["inferred_state"] for r in job_runs)
        parents = {r["parent_job_name"] for r in job_runs if r["parent_job_name"]}
        summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        under = f" under {', '.join(sorted(parents))}" if parents else ""
        print(f"  {job}: {len(job_runs)} run{'s' * (len(job_runs) != 1)} ({summary}){under}")
        for direction in ("input", "output"):
            names = sorted(
                datasets[e["dataset_id"]]
                for e in edges
                if e["job_name"] == job and e["direction"] == direction and e["dataset_id"] in datasets
            )
            if names:
                shown = names if len(names) <= 3 else [*names[:2], f"... {len(names) - 2} more"]
                print(f"    {direction}s: {'; '.join(shown)}")


def demo_run(settings: Settings, state: str, run_ref: str) -> None:
    """START or COMPLETE of the demo's own orchestrating run (its id is passed to every step)."""
    from openlineage.client.event_v2 import RunState

    from lineage.observe import Emitter, RunRef, TrackedRun

    ref = RunRef.parse(run_ref)
    emitter = Emitter(settings.own_lineage(), str(ref))
    run = TrackedRun(emitter, ref.namespace, ref.name, "BATCH", "make demo", run_id=ref.run_id)
    run.emit(RunState(state))
    emitter.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lineage.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="send the lab events and the malformed messages")
    pub.add_argument("--force", action="store_true", help="publish even if the topic is not empty")
    sub.add_parser("report", help="print what landed in the raw tables")
    sub.add_parser("lineage", help="print the lab's runs, merged datasets and dataset lineage")
    sub.add_parser("self", help="print our own jobs as they appear in the lineage tables")
    run = sub.add_parser("run-event", help="emit START/COMPLETE of the demo's orchestrating run")
    run.add_argument("state", choices=["START", "COMPLETE", "FAIL"])
    run.add_argument("run_ref", help="<namespace>/<job name>/<run id>")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    settings = load_settings()
    if args.command == "publish":
        publish(settings, force=args.force)
    elif args.command == "report":
        report(settings)
    elif args.command == "self":
        self_report(settings)
    elif args.command == "run-event":
        demo_run(settings, args.state, args.run_ref)
    else:
        lineage_report(settings)
        column_report(settings)
        tags_report(settings)
        health_report(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
