# Two commands: `make run` (embedded storage) and `make test` (everything, both storages).
# `make test-unit`: the tests that need no server (test/unit), in well under a minute, without ClickHouse or Redis.
SHELL := /bin/bash
NODE_BIN := $(shell ./scripts/node-bin.sh)
export PATH := $(if $(NODE_BIN),$(NODE_BIN):,)$(PATH)

.PHONY: run key test test-unit typecheck lint format bench deps run-deps servers local-model llama-server-background clean

# npm ci installs exactly the lockfile and never rewrites it, so a fresh clone stays clean.
node_modules/.deps-stamp: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# `make run` and `make key` need the runtime dependencies only, not the test tools (chDB alone is ~540 MB);
# a current full install (`make test`) already holds them.
node_modules/.run-deps-stamp: package.json package-lock.json
	@if [ node_modules/.deps-stamp -nt package.json ] && [ node_modules/.deps-stamp -nt package-lock.json ]; then :; \
	else npm ci --omit=dev --no-audit --no-fund --loglevel=error; fi
	@touch $@

deps: node_modules/.deps-stamp
run-deps: node_modules/.run-deps-stamp

# The local model test infrastructure's own package (node-llama-cpp, which carries llama.cpp's source): installed
# apart from the root, optional packages omitted by its .npmrc (CUDA, Vulkan, other platforms). See docs/development.md.
LOCAL_MODEL := test/support/local-model
$(LOCAL_MODEL)/node_modules/.deps-stamp: $(LOCAL_MODEL)/package.json $(LOCAL_MODEL)/package-lock.json
	npm ci --prefix $(LOCAL_MODEL) --no-audit --no-fund --loglevel=error
	@touch $@

local-model: $(LOCAL_MODEL)/node_modules/.deps-stamp

# llama.cpp's own llama-server for the OpenAI-protocol tests, built once per machine into a cache outside the repo
# (~/.cache/tracegate/llama-server; about 13 CPU-minutes). Started in the background, so that on a fresh machine it
# overlaps the checks and the other suites; the tests that need it wait for it. Cached: nothing to do.
llama-server-background: local-model
	@./scripts/build-llama-server.sh --background > /dev/null

servers:
	./scripts/ensure-servers.sh

run: run-deps
	@echo "tracegate on http://localhost:$${TRACEGATE_PORT:-4318} (embedded storage in $${TRACEGATE_DATA_DIR:-./data})"
	@echo "create a key in another terminal:  make key WORKSPACE=demo"
	node bin/tracegate.ts serve

key: run-deps
	node bin/tracegate.ts keys create --workspace $${WORKSPACE:-demo}

typecheck: deps local-model
	npx tsc --noEmit -p .
	npx tsc --noEmit -p $(LOCAL_MODEL)

# Formatting and lint rules (biome.jsonc): `make format` applies both.
lint: deps
	npx biome ci .

format: deps
	npx biome check --write .

# Everything: the unit tests first, then the suites that start servers (.mocharc.cjs). The shared ClickHouse and the
# two-shard cluster start on first use by a suite that needs them (test/support/shared.ts); the llama-server build (if
# not cached) runs in the background meanwhile.
test: deps local-model llama-server-background servers typecheck lint
	npx mocha

# test/unit only (.mocharc.unit.cjs): no ClickHouse, chDB, Redis, child process nor listener, so no `servers` step;
# test/support/unit-guard.ts fails a test that tries.
test-unit: deps
	npx mocha --config .mocharc.unit.cjs

bench: deps servers
	node bench/run.ts

clean:
	rm -rf node_modules .tools data
