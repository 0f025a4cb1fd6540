#!/usr/bin/env bash
# Both jobs on YARN in cluster deploy mode: the driver runs in the application master's container on some
# node, so it needs our Python dependencies there. They travel as a packed virtualenv (Spark's documented
# way for Python packages on YARN), with the settings file beside it:
#   python3.11 -m venv lineage-venv && lineage-venv/bin/pip install venv-pack lineage_lakehouse-0.1.0-py3-none-any.whl
#   lineage-venv/bin/venv-pack -p lineage-venv -o lineage-venv.tar.gz
#   ./spark-submit.sh ingest | build
set -euo pipefail

VENV_ARCHIVE=${VENV_ARCHIVE:-hdfs:///apps/lineage/lineage-venv.tar.gz}
SETTINGS=${SETTINGS:-hdfs:///apps/lineage/lineage.toml}
JARS=${JARS:-hdfs:///apps/lineage/jars/iceberg-spark-runtime-4.1_2.13-1.11.0.jar,hdfs:///apps/lineage/jars/spark-sql-kafka-0-10_2.13-4.1.3.jar,hdfs:///apps/lineage/jars/kafka-clients-3.9.1.jar,hdfs:///apps/lineage/jars/commons-pool2-2.12.1.jar,hdfs:///apps/lineage/jars/spark-token-provider-kafka-0-10_2.13-4.0.0.jar,hdfs:///apps/lineage/jars/iceberg-aws-bundle-1.11.0.jar}

case "${1:-}" in
  ingest) job=jobs/ingest_events.py; args=(--trigger "10 seconds"); queue=streaming ;;
  build) job=jobs/build_lineage.py; args=(); queue=batch ;;
  *) echo "usage: $0 ingest|build" >&2; exit 2 ;;
esac

exec spark-submit \
  --master yarn \
  --deploy-mode cluster \
  --queue "${queue}" \
  --name "lineage-${1}" \
  --archives "${VENV_ARCHIVE}#environment" \
  --files "${SETTINGS}" \
  --jars "${JARS}" \
  --conf spark.yarn.appMasterEnv.PYSPARK_PYTHON=./environment/bin/python \
  --conf spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python \
  --conf spark.yarn.appMasterEnv.LINEAGE_CONFIG=lineage.toml \
  --conf spark.yarn.maxAppAttempts=4 \
  --conf spark.yarn.am.attemptFailuresValidityInterval=1h \
  --driver-memory 2g \
  --executor-memory 4g \
  --executor-cores 2 \
  --num-executors 4 \
  "${job}" "${args[@]}"
