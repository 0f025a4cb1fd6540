# Benchmarks (issue 6), never part of `make test`: `make bench-quick` (tier S) and `make bench` (S, M, L).
# Results: var/bench/results/<tier>.json (+ history/); report: BENCHMARKS.md and BENCHMARKS.png.
# The harness is the top-level package benchmarks/ (beside tests/, not installed: pyproject.toml packages
# lineage* only), run from the repository root as `python -m benchmarks run|report|workload`.
# Knobs: BENCH_TIERS="S M" BENCH_REPEAT=5 BENCH_ARGS="--label 'quiet machine'" make bench
# A stage left out of --stages keeps its last result; e.g. after `--stages ingest --keep`, measure the build and
# the queries again without ingesting: python -m benchmarks run --tier M --stages build,queries \
#   --seed-lake <a copy of var/bench/work/M/lake> (Iceberg metadata holds absolute paths: it is copied back there)
# The build stage appends its deltas to the lake, so a lake kept after it seeds `--stages queries` only.

BENCH_TIERS ?= S M L
BENCH_REPEAT ?= 3
BENCH_RENTGEN_TIERS ?= S
BENCH_ARGS ?=
bench_comma := ,
bench_empty :=
bench_space := $(bench_empty) $(bench_empty)

# Data.Rentgen for the side by side, in its own venv. Its current releases require Python >= 3.12 (this
# project's venv is 3.11); the first python3.13/python3.12 found (PATH, then pyenv) is used.
RENTGEN_VENV := .venv-rentgen
RENTGEN_VERSION := 0.7.2
RENTGEN_PYTHON ?= $(shell for p in python3.13 python3.12 $$HOME/.pyenv/versions/3.1[23]*/bin/python3; do \
  "$$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v "$$p"; break; }; done)

.PHONY: bench bench-quick bench-report bench-setup bench-rentgen postgres-server bench-soak

$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[bench]'
	@touch $@

# The `server` extra too: data-rentgen's consumer imports FastAPI (data_rentgen.services), which only that
# extra installs.
$(RENTGEN_VENV)/.installed: mk/bench.mk
	@test -n "$(RENTGEN_PYTHON)" || { echo "Data.Rentgen $(RENTGEN_VERSION) needs Python >= 3.12:" \
	  "none found (python3.12/3.13 on PATH or in pyenv); set RENTGEN_PYTHON=/path/to/python3.12" >&2; exit 1; }
	rm -rf $(RENTGEN_VENV)
	$(RENTGEN_PYTHON) -m venv $(RENTGEN_VENV)
	$(RENTGEN_VENV)/bin/python -m pip install -q --upgrade pip
	$(RENTGEN_VENV)/bin/python -m pip install -q 'data-rentgen[consumer,postgres,server]==$(RENTGEN_VERSION)'
	@touch $@

# Debian's PostgreSQL server binaries (the benchmark starts a private cluster of its own on a free port).
# On a machine without postgresql-common yet, the package is told not to create and start a cluster.
postgres-server:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" -ne 0 ]; then \
	  echo "PostgreSQL is missing: install Debian's postgresql as root (apt-get install -y postgresql)" >&2; exit 1; \
	fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	if [ ! -e /etc/postgresql-common/createcluster.conf ]; then \
	  mkdir -p /etc/postgresql-common && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf; \
	fi; \
	apt-get install -y -q postgresql || { apt-get update -q && apt-get install -y -q postgresql; }

bench-rentgen: $(RENTGEN_VENV)/.installed postgres-server $(JARS)/kafka39/.fetched ## Install Data.Rentgen, PostgreSQL, a Kafka 3.9 broker

bench-setup: setup $(VENV)/.bench-installed bench-rentgen

bench: bench-setup ## Benchmarks of every tier (S, M, L: hours on 2 cores), then BENCHMARKS.md and .png
	$(PY) -m benchmarks run $(foreach t,$(BENCH_TIERS),--tier $(t)) --repeat $(BENCH_REPEAT) \
	  --rentgen-tiers $(subst $(bench_space),$(bench_comma),$(strip $(BENCH_RENTGEN_TIERS))) $(BENCH_ARGS)
	$(PY) -m benchmarks report

bench-quick: bench-setup ## Benchmarks of tier S only, then BENCHMARKS.md and BENCHMARKS.png
	$(PY) -m benchmarks run --tier S --repeat $(BENCH_REPEAT) --rentgen-tiers S $(BENCH_ARGS)
	$(PY) -m benchmarks report

bench-report: ## Rewrite BENCHMARKS.md and BENCHMARKS.png from var/bench/results
	$(PY) -m benchmarks report

# Soak (issue 18): the ingestion at a 1 s trigger for SOAK_MINUTES with builds and maintenance on batch
# schedules, then the same without maintenance; results in var/bench/soak/results, report in
# docs/benchmark-soak.md (read into BENCHMARKS.md by `benchmarks report`) and BENCHMARKS-soak.png.
SOAK_MINUTES ?= 15
SOAK_ARGS ?=

bench-soak: setup $(VENV)/.bench-installed ## Soak with and without maintenance (2 x SOAK_MINUTES), then its report
	$(PY) -m benchmarks.soak --label maintained --minutes $(SOAK_MINUTES) $(SOAK_ARGS)
	$(PY) -m benchmarks.soak --label unmaintained --no-maintain --minutes $(SOAK_MINUTES) $(SOAK_ARGS)
	$(PY) -m benchmarks.soak report
