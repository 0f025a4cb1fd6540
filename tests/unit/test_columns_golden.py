"""Column edges from events captured from a real openlineage-spark listener (tests/resources/golden)."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lineage.transforms import columns, model
from lineage.transforms.model_common import dataset_id
from tests.unit.model_events import events_df

CAPTURE = Path(__file__).resolve().parents[1] / "resources" / "golden" / "spark_listener.jsonl"
SHOP = "/tmp/shop-golden/db"


def edges_into_revenue(spark: SparkSession) -> dict[tuple[str, str, str | None], dict]:
    events = events_df(spark, [json.loads(line) for line in CAPTURE.read_text().splitlines()])
    mentions = model.dataset_mentions(events).localCheckpoint()
    aliases = model.dataset_aliases(mentions, max_iterations=3).localCheckpoint()
    edges = columns.column_edges(mentions, aliases)
    ids = {r["dataset_id"]: r["name"].rsplit("/", 1)[-1] for r in model.datasets(mentions, aliases).collect()}
    revenue = spark.range(1).select(dataset_id(F.lit("file"), F.lit(f"{SHOP}/revenue_by_country"))).first()[0]
    return {
        (ids[r["source_dataset_id"]], r["source_field"], r["target_field"]): r.asDict()
        for r in edges.where(edges.target_dataset_id == revenue).collect()
    }


def test_captured_spark_events_give_direct_and_dataset_level_edges(spark: SparkSession) -> None:
    edges = edges_into_revenue(spark)
    assert edges[("orders", "price", "revenue")]["subtypes"] == ["AGGREGATION"]
    assert edges[("orders", "order_id", "orders")]["masking"] is True  # count() hides the values
    assert edges[("customers", "country", "country")]["subtypes"] == ["IDENTITY"]
    dataset_scope = {(s, f): sorted(e["subtypes"]) for (s, f, t), e in edges.items() if t is None}
    assert dataset_scope == {
        ("orders", "customer_id"): ["FILTER", "JOIN"],
        ("customers", "customer_id"): ["FILTER", "JOIN"],
        ("customers", "country"): ["GROUP_BY"],
        ("orders", "status"): ["FILTER"],
    }
