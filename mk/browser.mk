# The lineage graph page: Debian's Chromium for its browser test, and its vendored JS libraries.

CHROMIUM := /usr/bin/chromium
NPM ?= npm
GRAPH_VENDOR := lineage/graph/vendor

# The JS libraries inlined into lineage/graph/page.html, pinned here and only here (`make vendor-js`).
CYTOSCAPE_VERSION := 3.34.4
CYTOSCAPE_DAGRE_VERSION := 4.0.1
# cytoscape-dagre's dist file bundles these two: fetched for their LICENSE, the bundle's version is checked.
DAGRE_VERSION := 3.0.0
GRAPHLIB_VERSION := 4.0.1

TEST_PREREQS += browser

.PHONY: browser vendor-js

browser: ## Install Debian's chromium (/usr/bin/chromium) for the graph page test
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if [ "$$(id -u)" -ne 0 ]; then \
	  echo "$(CHROMIUM) is missing: install Debian's chromium as root (apt-get install -y --no-install-recommends chromium)" >&2; \
	  exit 1; \
	fi; \
	exec 9>$(CURDIR)/.apt.lock; flock 9; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q --no-install-recommends chromium \
	  || { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; }; \
	[ -x $(CHROMIUM) ] || { echo "chromium was installed but $(CHROMIUM) is still missing" >&2; exit 1; }

vendor-js: ## Re-fetch the pinned cytoscape.js and cytoscape-dagre from the npm registry into lineage/graph/vendor/
	@command -v $(NPM) >/dev/null && command -v node >/dev/null || { echo "npm and node are required to refresh the vendored JS" >&2; exit 1; }
	@set -euo pipefail; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	unpack() { mkdir "$$tmp/$$1"; (cd "$$tmp/$$1" && $(NPM) pack --silent "$$2" >/dev/null && tar -xzf ./*.tgz); }; \
	unpack cytoscape cytoscape@$(CYTOSCAPE_VERSION); \
	unpack cytoscape-dagre cytoscape-dagre@$(CYTOSCAPE_DAGRE_VERSION); \
	unpack dagre @dagrejs/dagre@$(DAGRE_VERSION); \
	unpack graphlib @dagrejs/graphlib@$(GRAPHLIB_VERSION); \
	bundle="$$tmp/cytoscape-dagre/package/dist/cytoscape-dagre.min.js"; \
	grep -q 'version:"$(DAGRE_VERSION)"' "$$bundle" \
	  || { echo "cytoscape-dagre $(CYTOSCAPE_DAGRE_VERSION) does not bundle dagre $(DAGRE_VERSION): fix DAGRE_VERSION" >&2; exit 1; }; \
	grep -q '="$(GRAPHLIB_VERSION)"' "$$bundle" \
	  || { echo "cytoscape-dagre $(CYTOSCAPE_DAGRE_VERSION) does not bundle graphlib $(GRAPHLIB_VERSION): fix GRAPHLIB_VERSION" >&2; exit 1; }; \
	rm -rf $(GRAPH_VENDOR); mkdir -p $(GRAPH_VENDOR); \
	install -m 644 "$$tmp/cytoscape/package/dist/cytoscape.min.js" $(GRAPH_VENDOR)/cytoscape.min.js; \
	install -m 644 "$$bundle" $(GRAPH_VENDOR)/cytoscape-dagre.min.js; \
	install -m 644 "$$tmp/cytoscape/package/LICENSE" $(GRAPH_VENDOR)/cytoscape.LICENSE; \
	install -m 644 "$$tmp/cytoscape-dagre/package/LICENSE" $(GRAPH_VENDOR)/cytoscape-dagre.LICENSE; \
	install -m 644 "$$tmp/dagre/package/LICENSE" $(GRAPH_VENDOR)/dagre.LICENSE; \
	install -m 644 "$$tmp/graphlib/package/LICENSE" $(GRAPH_VENDOR)/graphlib.LICENSE; \
	licence() { node -p "require('$$tmp/$$1/package/package.json').license"; }; \
	sha() { sha256sum "$(GRAPH_VENDOR)/$$1" | cut -d' ' -f1; }; \
	{ echo "# Written by make vendor-js (mk/browser.mk): package version licence file sha256"; \
	  echo "cytoscape $(CYTOSCAPE_VERSION) $$(licence cytoscape) cytoscape.min.js $$(sha cytoscape.min.js)"; \
	  echo "cytoscape-dagre $(CYTOSCAPE_DAGRE_VERSION) $$(licence cytoscape-dagre) cytoscape-dagre.min.js $$(sha cytoscape-dagre.min.js)"; \
	  echo "@dagrejs/dagre $(DAGRE_VERSION) $$(licence dagre) cytoscape-dagre.min.js bundled"; \
	  echo "@dagrejs/graphlib $(GRAPHLIB_VERSION) $$(licence graphlib) cytoscape-dagre.min.js bundled"; \
	} > $(GRAPH_VENDOR)/VERSIONS; \
	echo "vendored into $(GRAPH_VENDOR):"; ls -l $(GRAPH_VENDOR)
