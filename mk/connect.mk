# A real Kafka Connect producer (issue 40): Kafka Connect (standalone worker) with the Debezium PostgreSQL
# source connector and Debezium's OpenLineage integration, against a PostgreSQL server the test starts
# (tests/integration/test_connect_producer.py). Jar pins: conf/maven/pom.xml (profiles connect, debezium);
# PostgreSQL: Debian's postgresql-$(PG_MAJOR). docs/producers.md.

PG_MAJOR := 15
PG_BIN := /usr/lib/postgresql/$(PG_MAJOR)/bin
# The worker loads connectors from plugin.path: a folder of plugin folders, one per plugin.
CONNECT_PLUGINS := $(JARS)/connect-plugins

TEST_PREREQS += connect-setup

.PHONY: connect-setup connect-e2e postgresql

# An explicit rule: it wins over the top Makefile's $(JARS)/%/.fetched, which would copy into .jars/<profile>/.
$(CONNECT_PLUGINS)/debezium/.fetched: $(POM) conf/maven/settings.xml
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the pinned jars (mvn not found)" >&2; exit 1; }
	rm -rf $(@D)
	$(MVN) -Pdebezium dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(@D)
	@touch $@

# Debian's server package, installed as root like mk/graphviz.mk's graphviz. Debian's policy-rc.d (present
# on this machine kind) keeps the packaged cluster from starting; the tests start their own server.
postgresql: ## Install Debian's PostgreSQL $(PG_MAJOR) server (initdb, pg_ctl, postgres, psql) for the Connect test
	@if [ -x $(PG_BIN)/postgres ] && [ -x $(PG_BIN)/psql ]; then exit 0; fi; \
	if [ "$$(id -u)" -ne 0 ]; then \
	  echo "$(PG_BIN)/postgres is missing: install Debian's postgresql-$(PG_MAJOR) as root" >&2; exit 1; \
	fi; \
	exec 9>$(CURDIR)/.apt.lock; flock 9; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q --no-install-recommends postgresql-$(PG_MAJOR) postgresql-client-$(PG_MAJOR) \
	  || { apt-get update -q && apt-get install -y -q --no-install-recommends postgresql-$(PG_MAJOR) postgresql-client-$(PG_MAJOR); }; \
	[ -x $(PG_BIN)/postgres ] || { echo "postgresql-$(PG_MAJOR) was installed but $(PG_BIN)/postgres is missing" >&2; exit 1; }

connect-setup: $(JARS)/kafka/.fetched $(JARS)/connect/.fetched $(CONNECT_PLUGINS)/debezium/.fetched postgresql ## Kafka Connect + Debezium (Maven) and Debian's PostgreSQL, for the Connect producer test
	@echo "Connect ready: $$(ls $(JARS)/connect/connect-runtime-*.jar | xargs -n1 basename), $$(ls $(CONNECT_PLUGINS)/debezium/debezium-connector-postgres-*.jar | xargs -n1 basename), $$($(PG_BIN)/postgres --version)"

connect-e2e: setup connect-setup ## Debezium's PostgreSQL connector on Kafka Connect with OpenLineage -> Kafka -> ingestion -> build
	$(PY) -m pytest tests/integration/test_connect_producer.py tests/unit/test_connect_golden.py
