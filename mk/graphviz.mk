# Graphviz for the DOT export's rendering test (tests/unit/test_graph_render.py runs `dot -Tsvg` on the
# export; without it the test is skipped). Debian's package, installed like mk/browser.mk's chromium.

DOT := /usr/bin/dot

UNIT_TEST_PREREQS += graphviz

.PHONY: graphviz

graphviz: ## Install Debian's graphviz (/usr/bin/dot) so the DOT export's rendering test runs
	@if [ -x $(DOT) ]; then exit 0; fi; \
	if [ "$$(id -u)" -ne 0 ]; then \
	  echo "$(DOT) is missing: install Debian's graphviz as root (apt-get install -y --no-install-recommends graphviz)" >&2; \
	  exit 1; \
	fi; \
	exec 9>$(CURDIR)/.apt.lock; flock 9; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q --no-install-recommends graphviz \
	  || { apt-get update -q && apt-get install -y -q --no-install-recommends graphviz; }; \
	[ -x $(DOT) ] || { echo "graphviz was installed but $(DOT) is still missing" >&2; exit 1; }
