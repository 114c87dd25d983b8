# Two commands: `make run` (embedded storage) and `make test` (everything, both storages).
SHELL := /bin/bash
NODE_BIN := $(shell ./scripts/node-bin.sh)
export PATH := $(if $(NODE_BIN),$(NODE_BIN):,)$(PATH)

.PHONY: run key test typecheck bench deps servers clean

node_modules/.deps-stamp: package.json package-lock.json
	@# npm ci rejects this lockfile (npm 11 omits other platforms' optional DuckDB bindings); install honours the lock.
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

deps: node_modules/.deps-stamp

servers:
	./scripts/ensure-servers.sh

run: deps
	@echo "tracegate on http://localhost:$${TRACEGATE_PORT:-4318} (embedded storage in $${TRACEGATE_DATA_DIR:-./data})"
	@echo "create a key in another terminal:  make key WORKSPACE=demo"
	node bin/tracegate.ts serve

key: deps
	node bin/tracegate.ts keys create --workspace $${WORKSPACE:-demo}

typecheck: deps
	npx tsc --noEmit -p .

test: deps servers typecheck
	npx mocha

bench: deps servers
	node bench/run.ts

clean:
	rm -rf node_modules .tools data
