# Lineage lakehouse. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
JARS := .jars
POM := conf/maven/pom.xml
# One Maven at a time (setup runs the fetches in parallel with the pip installs; Maven 3.8's local
# repository is not safe for concurrent processes).
MVN_LOCKED := flock $(CURDIR)/.jars.lock mvn
MVN := $(MVN_LOCKED) -q -B -s conf/maven/settings.xml -f $(POM)
# Extra prerequisites of `make test`, set by the mk/*.mk parts: UNIT_TEST_PREREQS before the unit tests
# (graphviz), TEST_PREREQS (producer venvs, Flink, browser) installed while they run, and
# CLUSTER_TEST_PREREQS (the scale-out stack's jars) when the selection can hold the cluster tests.
UNIT_TEST_PREREQS :=
TEST_PREREQS :=

# Parts of the build owned by one feature each (Flink producers, benchmarks, browser tests).
-include $(sort $(wildcard mk/*.mk))

.PHONY: help setup jars kafka-start kafka-stop kafka-status publish-demo ingest ingest-once build build-continuous build-full build-reextract maintain report lineage-report demo test \
        test-unit lint clean distclean

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required (set PYTHON=...)")'
	@command -v java >/dev/null || { echo "Java 17 is required (java not found)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

$(JARS)/%/.fetched: $(POM) conf/maven/settings.xml
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the pinned jars (mvn not found)" >&2; exit 1; }
	rm -rf $(JARS)/$*
	$(MVN) -P$* dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JARS)/$*
	@touch $@

jars: $(JARS)/spark/.fetched $(JARS)/kafka/.fetched $(JARS)/openlineage/.fetched ## Fetch the pinned JVM jars from Maven Central

setup: $(VENV)/.installed jars ## Install everything: Python venv from pyproject.toml, jars via Maven
	@# Our package is installed editable, so pip compiled none of it: compile it here (only what changed),
	@# or every process (each CLI question, each Spark job) compiles it again where Python may not write
	@# bytecode as it imports (PYTHONDONTWRITEBYTECODE, set on this project's development machine). Importing
	@# the CLI and its query modules: 0.307 -> 0.258 s (medians of 12, 2026-11-28).
	@$(PY) -m compileall -q lineage jobs benchmarks >/dev/null

kafka-start: setup ## Start the local single-node Kafka broker (KRaft) on 127.0.0.1:9092
	$(PY) -m lineage.io.local_kafka start

kafka-stop: ## Stop the local Kafka broker
	@if [ -x $(PY) ]; then $(PY) -m lineage.io.local_kafka stop; fi

kafka-status: ## Is the local broker running?
	$(PY) -m lineage.io.local_kafka status

publish-demo: kafka-start ## Publish the demo's OpenLineage events (once) and malformed messages
	$(PY) -m lineage.demo publish

ingest: setup ## Run the ingestion continuously (processing-time trigger from conf/lineage.toml)
	$(PY) jobs/ingest_events.py

ingest-once: setup ## Land what is in the topic now, then stop (availableNow)
	$(PY) jobs/ingest_events.py --trigger availableNow

build: setup ## Build lake.lineage.* from the new raw events (incremental)
	$(PY) jobs/build_lineage.py

BUILD_EVERY ?= 60s
build-continuous: setup ## Build whenever new raw events landed, checking every BUILD_EVERY (60s); stop: Ctrl-C/SIGTERM
	$(PY) jobs/build_lineage.py --every $(BUILD_EVERY)

build-full: setup ## Recompute lake.lineage.* from the extracted form of all events (no JSON parsing)
	$(PY) jobs/build_lineage.py --full-refresh

build-reextract: setup ## Parse every raw event again into the extracted form, then recompute lake.lineage.*
	$(PY) jobs/build_lineage.py --re-extract

maintain: setup ## Retention, compaction, snapshot expiry and orphan removal of the lake's tables ([maintain])
	$(PY) jobs/maintain_lake.py

report: ## Print what landed in the raw tables
	$(PY) -m lineage.demo report

lineage-report: ## Print the lab's runs (stuck one LOST), merged datasets and dataset lineage
	$(PY) -m lineage.demo lineage

DEMO_GRAPH := var/demo/lineage.html

# One orchestrating run (lineage-lakehouse/demo) is the parent of every job run of the demo. The second
# ingest + build lands and models what our own jobs reported about themselves during the first.
demo: publish-demo ## The whole demo: Kafka, publish, ingest, build, report, our own lineage, graph page
	@set -e; \
	export OPENLINEAGE_PARENT_ID="lineage-lakehouse/demo/$$($(PY) -c 'import uuid; print(uuid.uuid4())')"; \
	$(PY) -m lineage.demo run-event START "$$OPENLINEAGE_PARENT_ID"; \
	$(PY) jobs/ingest_events.py --trigger availableNow; \
	$(PY) -m lineage.demo report; \
	$(PY) jobs/build_lineage.py; \
	$(PY) -m lineage.demo lineage; \
	$(PY) jobs/ingest_events.py --trigger availableNow; \
	$(PY) jobs/build_lineage.py; \
	$(PY) -m lineage.demo self; \
	$(VENV)/bin/lineage graph kafka://kafka-1:19092/orders --format html -o $(DEMO_GRAPH); \
	$(PY) -m lineage.demo run-event COMPLETE "$$OPENLINEAGE_PARENT_ID"; \
	echo "open $(CURDIR)/$(DEMO_GRAPH) in a browser (works offline)"

# make test leaves out the cluster module and the tests marked slow (about 20 minutes more on this machine,
# measured before the test session ran interpreted) until they fit the CI budget; make test-all runs all.
TEST_SELECTION ?= not cluster and not slow

test: ## Unit + integration tests with a real broker, Spark, Iceberg (not the cluster/slow ones: make test-all)
	@$(MAKE) --no-print-directory -j4 --output-sync=target setup $(UNIT_TEST_PREREQS)
	@# Two pytest processes, each with its own SparkSession: the unit tests do not inherit a driver that the
	@# integration tests filled (one JVM for both ran out of heap on CI). What only the integration tests
	@# need installs meanwhile (mostly downloads), its output shown once both are done.
	@mkdir -p var; log=var/test-prereqs.log; \
	$(MAKE) --no-print-directory -j4 --output-sync=target $(TEST_PREREQS) \
	  $(if $(findstring not cluster,$(TEST_SELECTION)),,$(CLUSTER_TEST_PREREQS)) >$$log 2>&1 & prereqs=$$!; \
	trap 'kill $$prereqs 2>/dev/null' INT TERM; \
	status=0; $(PY) -m pytest --durations=25 -m "$(TEST_SELECTION)" tests/unit || status=$$?; \
	wait $$prereqs; ready=$$?; cat $$log; \
	if [ $$ready -ne 0 ]; then echo "installing the integration tests' prerequisites failed ($$log)" >&2; exit $$ready; fi; \
	$(PY) -m pytest --durations=25 -m "$(TEST_SELECTION)" tests/integration || status=$$?; \
	exit $$status

test-all: ## Every test, the cluster module and the slow ones included
	@$(MAKE) --no-print-directory test TEST_SELECTION=""

test-unit: setup ## Only the fast unit tests
	$(PY) -m pytest -m "not integration"

lint: setup ## ruff (lint + format check) and mypy
	$(VENV)/bin/ruff check lineage jobs tests benchmarks
	$(VENV)/bin/ruff format --check lineage jobs tests benchmarks
	$(VENV)/bin/mypy

clean: kafka-stop ## Stop Kafka and delete the local data (broker log, catalog, warehouse, checkpoints)
	rm -rf var spark-warehouse metastore_db derby.log

distclean: clean ## clean, and also delete the venv and the jars
	rm -rf $(VENV) $(JARS)
