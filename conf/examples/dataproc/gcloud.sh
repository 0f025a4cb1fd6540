#!/usr/bin/env bash
# Both jobs on Google Cloud Dataproc. The ingestion is a job on a long-lived Dataproc cluster, which
# restarts its driver when it fails (--max-failures-per-hour); the build is a Dataproc Serverless batch,
# started on a schedule (Cloud Scheduler, Workflows or Cloud Composer) one at a time. Python 3.11 and our
# dependencies: a custom container image for Serverless (pip install of the wheel), and the same packages
# on the cluster's nodes (image or initialization action). The runtime / image must bring Spark 4.1.
#   ./gcloud.sh ingest | build
set -euo pipefail

REGION=${REGION:-europe-west1}
ARTIFACTS=${ARTIFACTS:-gs://analytics-artifacts/lineage}
JARS="${ARTIFACTS}/jars/iceberg-spark-runtime-4.1_2.13-1.11.0.jar,${ARTIFACTS}/jars/iceberg-gcp-bundle-1.11.0.jar"
KAFKA_JARS="${ARTIFACTS}/jars/spark-sql-kafka-0-10_2.13-4.1.3.jar,${ARTIFACTS}/jars/kafka-clients-3.9.1.jar,${ARTIFACTS}/jars/commons-pool2-2.12.1.jar,${ARTIFACTS}/jars/spark-token-provider-kafka-0-10_2.13-4.0.0.jar"

case "${1:-}" in
  ingest)
    exec gcloud dataproc jobs submit pyspark "${ARTIFACTS}/jobs/ingest_events.py" \
      --cluster=lineage \
      --region="${REGION}" \
      --py-files="${ARTIFACTS}/lineage_lakehouse-0.1.0-py3-none-any.zip" \
      --jars="${JARS},${KAFKA_JARS}" \
      --files="${ARTIFACTS}/lineage.toml" \
      --properties="spark.submit.deployMode=cluster,spark.yarn.appMasterEnv.LINEAGE_CONFIG=lineage.toml" \
      --max-failures-per-hour=5 \
      -- --trigger "10 seconds"
    ;;
  build)
    exec gcloud dataproc batches submit pyspark "${ARTIFACTS}/jobs/build_lineage.py" \
      --region="${REGION}" \
      --container-image="europe-west1-docker.pkg.dev/analytics-project/lineage/lineage-lakehouse:0.1.0" \
      --jars="${JARS}" \
      --files="${ARTIFACTS}/lineage.toml" \
      --properties="spark.dataproc.driverEnv.LINEAGE_CONFIG=lineage.toml" \
      --service-account="lineage-spark@analytics-project.iam.gserviceaccount.com"
    ;;
  *) echo "usage: $0 ingest|build" >&2; exit 2 ;;
esac
