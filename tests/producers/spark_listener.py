"""The SparkSession of the PySpark producer jobs in this folder: local, with an Iceberg Hadoop catalog for
the job's own tables and the OpenLineage Spark listener (``io.openlineage:openlineage-spark_2.13``, from
``make jars``) sending the job's events.

The jobs run as scripts (``python tests/producers/<job>.py``), so they import this module by its bare name
from their own folder (the first entry of ``sys.path``), not as ``tests.producers.spark_listener``.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import SparkSession

from lineage.spark import extra_jars

REPO = Path(__file__).resolve().parents[2]
SERIALIZER = "org.apache.kafka.common.serialization.StringSerializer"


def kafka_transport(bootstrap: str, topic: str) -> dict[str, str]:
    """The listener's Kafka transport: to ``topic`` on ``bootstrap``, every event acknowledged."""
    return {
        "spark.openlineage.transport.type": "kafka",
        "spark.openlineage.transport.topicName": topic,
        "spark.openlineage.transport.properties.bootstrap.servers": bootstrap,
        "spark.openlineage.transport.properties.key.serializer": SERIALIZER,
        "spark.openlineage.transport.properties.value.serializer": SERIALIZER,
        "spark.openlineage.transport.properties.acks": "all",
    }


def listener_session(
    app_name: str, catalog: str, warehouse: str, namespace: str, openlineage: dict[str, str]
) -> SparkSession:
    """A local[2] session named ``app_name`` with the Iceberg Hadoop catalog ``catalog`` in the folder
    ``warehouse`` and the OpenLineage listener reporting in ``namespace``; ``openlineage``: the listener's
    transport and any other ``spark.openlineage.*`` setting."""
    jars = extra_jars(str(REPO / ".jars/spark")) + [
        str(p) for p in (REPO / ".jars/openlineage").glob("*.jar")
    ]
    conf = {
        "spark.master": "local[2]",
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.jars": ",".join(jars),
        "spark.driver.extraClassPath": ":".join(jars),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        f"spark.sql.catalog.{catalog}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{catalog}.type": "hadoop",
        f"spark.sql.catalog.{catalog}.warehouse": Path(warehouse).resolve().as_uri(),
        "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
        "spark.openlineage.namespace": namespace,
        **openlineage,
    }
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def stop_after_last_events(spark: SparkSession) -> None:
    """Stop the session once the listener's last events had time to leave (it emits asynchronously)."""
    time.sleep(3)
    spark.stop()
