# Trino on the scale-out stack's lake (issue 39): a single-node server with the Iceberg connector on the
# stack's REST catalog and S3 store, from pinned Maven Central artifacts (conf/maven/pom.xml, profile trino:
# trino-server-core's tar.gz and trino-iceberg's zip, 540 MB downloaded, 447 MB kept once unpacked).
# lineage/cluster/trino.py, docs/deployment.md "Trino on the lake". It needs Java 24+ (TRINO_JAVA_HOME, or
# a JDK of /usr/lib/jvm such as the machine's Temurin 25).

TRINO_HOME := $(CLUSTER_JARS)/trino
TRINO_PORT ?= 8480
TRINO := LINEAGE_CONFIG=$(CLUSTER_CONFIG) $(PY) -m lineage.cluster.trino

# The cluster tests ask Trino the questions they ask Spark (tests/integration/test_trino.py).
CLUSTER_TEST_PREREQS += trino-setup

.PHONY: trino-setup trino-start trino-stop trino-status

$(TRINO_HOME)/.fetched: $(POM) conf/maven/settings.xml | $(VENV)/.installed
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the pinned jars (mvn not found)" >&2; exit 1; }
	rm -rf $(TRINO_HOME)
	$(MVN) -Ptrino dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(TRINO_HOME)/archives
	$(PY) -m lineage.cluster.trino install $(TRINO_HOME)/archives $(TRINO_HOME)
	@touch $@

trino-setup: $(TRINO_HOME)/.fetched ## Fetch Trino's server and Iceberg connector (pinned, Maven Central)

trino-start: cluster-start trino-setup ## Trino on the local stack's lake (catalog lake) on 127.0.0.1:8480 (TRINO_PORT=...)
	$(TRINO) start --port $(TRINO_PORT)

trino-stop: ## Stop the local stack's Trino
	@if [ -x $(PY) ]; then $(TRINO) stop --port $(TRINO_PORT); fi

trino-status: ## Whether the local stack's Trino runs, and where
	@$(TRINO) status --port $(TRINO_PORT)

cluster-stop: trino-stop
cluster-test: trino-setup  # test_trino.py is in the cluster selection
