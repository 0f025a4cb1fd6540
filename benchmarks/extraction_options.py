"""Where to parse each event once: the options measured side by side on one lake (docs/architecture.md).

``python -m benchmarks.extraction_options --settings overrides.json [--out result.json]``

On the ``raw.events`` of a lake (e.g. one kept by ``python -m benchmarks run --keep``), one warm
SparkSession times, each into Spark's ``noop`` sink unless said:

- ``read``: reading ``event_json`` alone (the floor of anything that looks at every event);
- ``envelope``: parsing the JSON into a VARIANT and reading the dozen envelope paths (what the ingestion
  pays today, per event);
- ``extract``: the whole extraction (:func:`lineage.transforms.extract.extract_events` with every mention
  exploded): what parsing once costs, wherever it runs (the ingestion or the first build that sees it);
- ``write_facts``: the extraction written as the two typed tables the build keeps (``event_facts`` and
  ``dataset_mentions``, zstd Parquet), and their size;
- ``read_facts``: reading those typed tables back (what a full refresh starts from);
- ``write_variant``: the other option, an Iceberg v3 table holding each event as a ``variant`` column beside
  its JSON, and its size; ``extract_from_variant``: the extraction from the stored variant (no JSON parse,
  every path still read from the variant per build);
- ``pyiceberg``: whether pyiceberg reads the typed tables and the variant table (a reader we promise).

Each timing is the median of ``--repeat`` runs. Scratch tables go to the namespace ``bench_options`` and are
dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lineage.settings import Settings, load_settings

_NAMESPACE = "bench_options"


def _timed(repeat: int, action: Callable[[], object]) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        runs.append(time.perf_counter() - started)
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs)}


def measure(settings: Settings, repeat: int) -> dict[str, Any]:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from lineage.io.catalog import open_catalog
    from lineage.spark import build_session
    from lineage.transforms import model
    from lineage.transforms.extract import event_facts, extract_events
    from lineage.transforms.model_common import get

    spark = build_session(settings, "bench-extraction-options")
    catalog = settings.catalog
    scratch = f"{catalog.name}.{_NAMESPACE}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {scratch}")
    raw = spark.table(catalog.events_table)
    result: dict[str, Any] = {"events": raw.count(), "repeat": repeat}

    def noop(frame: DataFrame) -> None:
        frame.write.format("noop").mode("overwrite").save()

    def size(table: str) -> int:
        row = spark.sql(f"SELECT coalesce(sum(file_size_in_bytes), 0) FROM {table}.files").first()
        return int(row[0]) if row else 0

    envelope_paths = [
        "$.eventType",
        "$.eventTime",
        "$.run.runId",
        "$.job.namespace",
        "$.job.name",
        "$.dataset.namespace",
        "$.dataset.name",
        "$.producer",
        "$.schemaURL",
        "$.run.facets.parent.run.runId",
        "$.run.facets.parent.job.namespace",
        "$.run.facets.parent.job.name",
    ]
    v = F.col("_v")
    envelope = raw.select(F.try_parse_json("event_json").alias("_v")).select(
        *[get(v, p).alias(f"p{i}") for i, p in enumerate(envelope_paths)]
    )
    extracted = extract_events(raw)
    result["read"] = _timed(repeat, lambda: noop(raw.select("event_json")))
    result["envelope"] = _timed(repeat, lambda: noop(envelope))
    result["extract"] = _timed(
        repeat, lambda: noop(extracted.select("event_hash", F.explode("mentions").alias("m")))
    )

    facts_table, mentions_table = f"{scratch}.event_facts", f"{scratch}.dataset_mentions"

    def write_facts() -> None:
        once = extract_events(raw).persist()
        event_facts(once).writeTo(facts_table).tableProperty(
            "write.parquet.compression-codec", "zstd"
        ).createOrReplace()
        model.dataset_mentions(once).writeTo(mentions_table).tableProperty(
            "write.parquet.compression-codec", "zstd"
        ).createOrReplace()
        once.unpersist()

    result["write_facts"] = _timed(repeat, write_facts)

    def read_facts() -> None:
        noop(spark.table(facts_table))
        noop(spark.table(mentions_table))

    result["read_facts"] = _timed(repeat, read_facts)
    variant_table = f"{scratch}.events_variant"
    variant_error = None
    try:
        result["write_variant"] = _timed(
            repeat,
            lambda: (
                raw.withColumn("event", F.parse_json("event_json"))
                .writeTo(variant_table)
                .tableProperty("format-version", "3")
                .tableProperty("write.parquet.compression-codec", "zstd")
                .createOrReplace()
            ),
        )
        stored = spark.table(variant_table)
        result["extract_from_variant"] = _timed(
            repeat,
            lambda: noop(
                extract_events(stored, variant=F.col("event")).select(
                    "event_hash", F.explode("mentions").alias("m")
                )
            ),
        )
        result["variant_bytes"] = size(variant_table)
    except Exception as exc:  # the option may not run at all on this stack: that is a result too
        variant_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    result["variant_error"] = variant_error
    result["raw_bytes"] = size(catalog.events_table)
    result["facts_bytes"] = size(facts_table) + size(mentions_table)

    readers = {}
    pyiceberg = open_catalog(catalog)
    for table in ("event_facts", "dataset_mentions", "events_variant"):
        try:
            rows = pyiceberg.load_table((_NAMESPACE, table)).scan(limit=1000).to_arrow().num_rows
            readers[table] = f"ok ({rows} rows read)"
        except Exception as exc:
            readers[table] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    result["pyiceberg"] = readers
    for table in (facts_table, mentions_table, variant_table):
        spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    spark.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.extraction_options",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--settings", type=Path, help="JSON overrides for load_settings (a kept lake)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the result here as JSON too")
    args = parser.parse_args(argv)
    overrides = json.loads(args.settings.read_text()) if args.settings else {}
    result = measure(load_settings(**overrides), args.repeat)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
