# Scale-out (issue 16): the same jobs on a Spark standalone cluster (master + workers from the pyspark wheel),
# Iceberg's REST catalog server and an S3-API object store (S3Proxy), all on this machine (jars from Maven
# Central, nothing from PyPI beyond the project's venv); lineage/cluster/, conf/cluster.toml,
# docs/deployment.md.
# The stack keeps its data, logs and generated S3 keys in var/cluster/ (local_cluster.data_dir).

CLUSTER_JARS := .jars-cluster
CLUSTER_PROFILES := cluster-spark s3proxy iceberg-rest
CLUSTER_JAR_STAMPS := $(foreach p,$(CLUSTER_PROFILES),$(CLUSTER_JARS)/$(p)/.fetched)
CLUSTER_CONFIG := conf/cluster.toml
CLUSTER := LINEAGE_CONFIG=$(CLUSTER_CONFIG) $(PY) -m lineage.cluster

# Only for a selection that can hold the cluster tests (make test-all, make cluster-test): make test leaves
# them out, so it does not fetch the stack's jars.
CLUSTER_TEST_PREREQS := cluster-setup

.PHONY: cluster-setup cluster-start cluster-stop cluster-status cluster-demo cluster-test

$(CLUSTER_JAR_STAMPS): $(CLUSTER_JARS)/%/.fetched: $(POM) conf/maven/settings.xml
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the pinned jars (mvn not found)" >&2; exit 1; }
	rm -rf $(CLUSTER_JARS)/$*
	$(MVN) -P$* dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(CLUSTER_JARS)/$*
	@touch $@

cluster-setup: setup $(CLUSTER_JAR_STAMPS) ## Fetch the scale-out stack: S3Proxy, Iceberg REST server, S3 jars

cluster-start: cluster-setup ## Start the local stack (S3Proxy, REST catalog, Spark master + 2 workers, history)
	$(CLUSTER) start

cluster-stop: ## Stop every service of the local stack (its data stays in var/cluster)
	@if [ -x $(PY) ]; then $(CLUSTER) stop; fi

cluster-status: ## Which services of the local stack run, and where
	@$(CLUSTER) status

# Like `make demo`, on the stack: the jobs go through spark-submit to the standalone master with our wheel
# and jars; tables in the REST catalog on s3://lake/warehouse, the checkpoint on s3a://lake/checkpoints. Safe to
# re-run (the checkpoint lands nothing twice, an idle build commits nothing); the stack keeps running.
cluster-demo: cluster-start publish-demo ## The demo on the stack: spark-submit ingest + build, then report and CLI
	@set -e; \
	eval "$$($(CLUSTER) env)"; export LINEAGE_CONFIG=$(CLUSTER_CONFIG); \
	$(PY) -m lineage.cluster submit ingest -- --trigger availableNow; \
	$(PY) -m lineage.demo report; \
	$(PY) -m lineage.cluster submit build; \
	$(PY) -m lineage.demo lineage; \
	echo; echo "+ LINEAGE_CONFIG=$(CLUSTER_CONFIG) lineage runs --state lost"; \
	$(VENV)/bin/lineage runs --state lost; \
	echo; echo "The stack keeps running (make cluster-stop). To ask it yourself:"; \
	echo '  eval "$$($(CLUSTER) env)"   # the object store keys, as AWS_* variables'; \
	echo "  LINEAGE_CONFIG=$(CLUSTER_CONFIG) $(VENV)/bin/lineage runs"

cluster-test: cluster-setup ## Only the tests on the local stack (pytest -m cluster)
	@$(PY) -m pytest -m cluster; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no cluster tests: failing loudly" >&2; exit 1; fi; exit $$rc

clean: cluster-stop

distclean: cluster-clean-jars

.PHONY: cluster-clean-jars
cluster-clean-jars:
	rm -rf $(CLUSTER_JARS)
