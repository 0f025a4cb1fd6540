#!/usr/bin/env bash
# Both jobs with plain spark-submit on Kubernetes (cluster deploy mode: the driver runs in a pod of the
# image built from ./Dockerfile). Good for a first run or an external scheduler (Airflow's
# SparkSubmitOperator); for supervision and schedules use the Spark operator files beside this one.
#   ./spark-submit.sh ingest   # long-running: restart it when it stops (the operator does that for you)
#   ./spark-submit.sh build    # scheduled: one run, e.g. every 15 minutes, never two at a time
set -euo pipefail

K8S_API=${K8S_API:-https://kubernetes.example.com:6443}
IMAGE=${IMAGE:-registry.example.com/lineage-lakehouse:0.1.0}
NAMESPACE=${NAMESPACE:-lineage}
HERE=$(cd "$(dirname "$0")" && pwd)

case "${1:-}" in
  ingest) job=ingest_events.py; args=(--trigger "10 seconds"); executors=2 ;;
  build) job=build_lineage.py; args=(); executors=4 ;;
  *) echo "usage: $0 ingest|build" >&2; exit 2 ;;
esac

exec spark-submit \
  --master "k8s://${K8S_API}" \
  --deploy-mode cluster \
  --name "lineage-${1}" \
  --conf spark.kubernetes.namespace="${NAMESPACE}" \
  --conf spark.kubernetes.container.image="${IMAGE}" \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=lineage-spark \
  --conf spark.kubernetes.authenticate.executor.serviceAccountName=lineage-spark \
  --conf spark.kubernetes.driver.podTemplateFile="${HERE}/driver-pod-template.yaml" \
  --conf spark.kubernetes.pyspark.pythonVersion=3 \
  --conf spark.executor.instances="${executors}" \
  --conf spark.executor.cores=2 \
  --conf spark.executor.memory=4g \
  --conf spark.driver.memory=2g \
  "local:///opt/lineage/jobs/${job}" "${args[@]}"
