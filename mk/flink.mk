# Real Flink producers (issue 7): PyPI apache-flink in a venv per Flink line, the OpenLineage and Kafka jars
# from Maven Central, and the end-to-end tests that run them (tests/integration/test_flink_producers.py).
# Flink pins: conf/flink/requirements-flink{1,2}.txt; jar pins: conf/maven/flink/pom.xml. docs/flink.md.

FLINK_POM := conf/maven/flink/pom.xml
FLINK_MVN := $(MVN_LOCKED) -q -B -s conf/maven/settings.xml -f $(FLINK_POM)
# One venv per Flink line: apache-flink 1.x and 2.x cannot share one, nor live in the Spark venv
# (they pin their own pyarrow, pandas, numpy and apache-beam).
FLINK_VENVS := .venv-flink2 .venv-flink1
FLINK_JAR_STAMPS := $(JARS)/flink2/.fetched $(JARS)/flink1/.fetched

TEST_PREREQS += flink-setup

.PHONY: flink-setup flink-e2e flink-clean

.venv-flink%/.installed: conf/flink/requirements-flink%.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required (set PYTHON=...)")'
	rm -rf .venv-flink$*
	$(PYTHON) -m venv .venv-flink$*
	.venv-flink$*/bin/python -m pip install -q -r $<
	@touch $@

# A static pattern rule: it wins over the top Makefile's $(JARS)/%/.fetched, which reads the main POM.
$(FLINK_JAR_STAMPS): $(JARS)/%/.fetched: $(FLINK_POM) conf/maven/settings.xml
	@command -v mvn >/dev/null || { echo "Maven is required to fetch the pinned jars (mvn not found)" >&2; exit 1; }
	@command -v java >/dev/null || { echo "Java 17 is required (java not found)" >&2; exit 1; }
	rm -rf $(JARS)/$*
	$(FLINK_MVN) -P$* dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JARS)/$*
	@touch $@

flink-setup: $(addsuffix /.installed,$(FLINK_VENVS)) $(FLINK_JAR_STAMPS) ## Install Flink 2.x/1.x (PyPI) into .venv-flink2/1 and their OpenLineage + Kafka jars
	@echo "Flink ready: $$(.venv-flink2/bin/python -c 'import pyflink.version as v; print(v.__version__)'), $$(.venv-flink1/bin/python -c 'import pyflink.version as v; print(v.__version__)')"

flink-e2e: setup flink-setup ## Real Flink 2.x/1.x jobs with OpenLineage -> Kafka -> ingestion -> build (pytest -m flink)
	@$(PY) -m pytest -m flink; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no flink tests: failing loudly" >&2; exit 1; fi; exit $$rc

flink-clean: ## Delete the Flink venvs (the jars go with .jars/ on distclean)
	rm -rf $(FLINK_VENVS)

distclean: flink-clean
