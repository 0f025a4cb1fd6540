"""A real Flink 1.x DataStream job with OpenLineage's ``OpenLineageFlinkJobListener``: KafkaSource ``orders``
-> a Python map (order -> supplier, price, flag) -> KafkaSink ``supplier-stats``.

Runs in .venv-flink1 (apache-flink, conf/flink/requirements-flink1.txt) on a local cluster inside PyFlink's
gateway JVM; the jars of .jars/flink1/ (openlineage-flink, the Kafka connector and kafka-clients,
flink-avro) are in its lib/. The listener is built and registered on the StreamExecutionEnvironment through
py4j, as a Java job would do it in its main(). It reads OPENLINEAGE_CONFIG (openlineage.yml with the Kafka
transport):

    export OPENLINEAGE_CONFIG=/tmp/openlineage.yml
    .venv-flink1/bin/python -m tests.producers.flink.flink1_datastream_job \\
        --bootstrap 127.0.0.1:9092 --source-topic orders --sink-topic supplier-stats \\
        --namespace flink1-lab --job-name supplier-stats --rest-port 18082 --mode bounded < /dev/null

``--mode bounded`` reads the topic up to its end offsets and finishes; ``--mode unbounded`` runs until
cancelled (REST API) or killed. ``env.execute`` is attached: the listener's terminal event needs it.
The process then waits for stdin to close (tests.producers.flink.runtime).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.producers.flink.runtime import (
    REPO,
    flink_options,
    linger,
    say,
    temporary_lib_dir,
    use_flink_lib,
)


def to_stat(value: str) -> str:
    order = json.loads(value)
    return json.dumps(
        {"supplier": order["supplier"], "price": order["price"], "big_order": order["price"] >= 13}
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source-topic", required=True)
    parser.add_argument("--sink-topic", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job-name", required=True)
    parser.add_argument("--rest-port", type=int, required=True)
    parser.add_argument("--mode", choices=("bounded", "unbounded"), required=True)
    parser.add_argument("--tracking-interval", type=int, default=2)
    parser.add_argument("--conf", type=Path, default=REPO / "conf/flink/flink1-config.yaml")
    parser.add_argument("--jars", type=Path, default=REPO / ".jars/flink1")
    parser.add_argument("--lib-dir", type=Path, default=None)
    args = parser.parse_args()

    use_flink_lib(args.lib_dir or temporary_lib_dir("flink1-lib-"), args.jars)
    from pyflink.common import Configuration, Types, WatermarkStrategy
    from pyflink.common.serialization import SimpleStringSchema
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.kafka import (
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
    )
    from pyflink.java_gateway import get_gateway

    config = Configuration()
    options = flink_options(
        args.conf, rest_port=args.rest_port, tracking_interval_seconds=args.tracking_interval
    )
    for key, value in options.items():
        config.set_string(key, value)
    # Python UDF workers: this venv's interpreter, not whatever `python` is on the PATH.
    config.set_string("python.executable", sys.executable)
    config.set_string("python.client.executable", sys.executable)
    env = StreamExecutionEnvironment.get_execution_environment(config)

    # As a Java job registers it: builder().executionEnvironment(env).jobNamespace(..).jobName(..).build().
    # executionEnvironment() must come first: it swaps the environment's transformation list for one that
    # remembers its content when Flink clears it at submission.
    j_env = env._j_stream_execution_environment
    listener = (
        get_gateway()
        .jvm.io.openlineage.flink.OpenLineageFlinkJobListener.builder()
        .executionEnvironment(j_env)
        .jobNamespace(args.namespace)
        .jobName(args.job_name)
        .build()
    )
    j_env.registerJobListener(listener)

    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(args.bootstrap)
        .set_topics(args.source_topic)
        .set_group_id(args.job_name)
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(SimpleStringSchema())
    )
    if args.mode == "bounded":
        source = source.set_bounded(KafkaOffsetsInitializer.latest())
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(args.bootstrap)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(args.sink_topic)
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .build()
    )
    orders = env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "orders")
    orders.map(to_stat, output_type=Types.STRING()).name("to-stat").sink_to(sink).name("supplier-stats")

    say("SUBMITTING")
    try:
        env.execute(args.job_name)
    except Exception as error:  # a cancelled or failed job: the listener has sent FAIL by now
        say(f"FAILED {type(error).__name__}")
    else:
        say("FINISHED")
    linger()


if __name__ == "__main__":
    main()
