"""A real PySpark job with the OpenLineage Spark listener that consumes a Debezium change topic: the
downstream reader of the Kafka Connect producer test (tests/integration/test_connect_producer.py).

It reads the topic in one batch (Kafka source, earliest to latest), keeps each change's ``after`` row and
writes the latest state per order into an Iceberg table of a Hadoop catalog (openlineage-spark names such
tables; see tests/producers/spark_orders_report.py). The listener sends through its Kafka transport.

    python tests/producers/spark_read_changes.py --bootstrap 127.0.0.1:9092 --topic input.runs \\
        --changes shop.public.orders --warehouse /tmp/cdc
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pyspark.sql import SparkSession

from lineage.spark import extra_jars

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True, help="the broker of the change topic and of the events")
    parser.add_argument("--topic", required=True, help="Kafka transport: the OpenLineage topic")
    parser.add_argument("--changes", required=True, help="the Debezium change topic to read")
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--namespace", default="spark-cdc")
    args = parser.parse_args()
    jars = extra_jars(str(REPO / ".jars/spark")) + [
        str(p) for p in (REPO / ".jars/openlineage").glob("*.jar")
    ]
    serializer = "org.apache.kafka.common.serialization.StringSerializer"
    conf = {
        "spark.master": "local[2]",
        "spark.app.name": "orders_from_cdc",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.jars": ",".join(jars),
        "spark.driver.extraClassPath": ":".join(jars),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.cdc": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.cdc.type": "hadoop",
        "spark.sql.catalog.cdc.warehouse": Path(args.warehouse).resolve().as_uri(),
        "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
        "spark.openlineage.namespace": args.namespace,
        "spark.openlineage.transport.type": "kafka",
        "spark.openlineage.transport.topicName": args.topic,
        "spark.openlineage.transport.properties.bootstrap.servers": args.bootstrap,
        "spark.openlineage.transport.properties.key.serializer": serializer,
        "spark.openlineage.transport.properties.value.serializer": serializer,
        "spark.openlineage.transport.properties.acks": "all",
    }
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    changes = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.changes)
        .option("startingOffsets", "earliest")
        .load()
    )
    changes.createOrReplaceTempView("changes")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS cdc.db")
    # The worker's JSON converter writes the envelope without its schema: {"before": ..., "after": ...}.
    spark.sql(
        "CREATE TABLE cdc.db.orders_latest USING iceberg AS "
        "SELECT after.id AS order_id, max_by(after.status, offset) AS status FROM ("
        "  SELECT offset, from_json(CAST(value AS STRING), 'after STRUCT<id: INT, status: STRING>').after"
        "  AS after FROM changes"
        ") WHERE after IS NOT NULL GROUP BY after.id"
    )
    time.sleep(3)
    spark.stop()


if __name__ == "__main__":
    main()
