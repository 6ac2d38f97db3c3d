# jobscheduler — every set-up step lives here. `just dev` and `just test` work on a fresh clone.

set shell := ["bash", "-euo", "pipefail", "-c"]

venv := ".venv"
bin := venv / "bin"
# The tests that need no external server.
unit := "not integration and not e2e and not faults"

# Show the recipes.
default:
    @just --list

# Create the virtualenv if needed and install the package with every extra a contributor uses.
install: (_install "dev")

# The virtualenv with the package and the given extras of pyproject.toml (none: what running
# needs). Each set is installed once per version of pyproject.toml (stamps in .venv/.stamps).
_install *EXTRAS:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ ! -x {{bin}}/python ]; then
        python3 -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
        python3 -m venv {{venv}}
        {{bin}}/python -m pip install --quiet --upgrade pip
    fi
    stamps={{venv}}/.stamps
    want=$(sha256sum pyproject.toml | cut -d' ' -f1)
    missing=()
    for extra in run {{EXTRAS}}; do
        [ "$(cat "$stamps/$extra" 2>/dev/null)" = "$want" ] || missing+=("$extra")
    done
    [ ${#missing[@]} -eq 0 ] && exit 0
    extras=$(printf '%s\n' {{EXTRAS}} | paste -sd, -)
    echo "install: jobscheduler${extras:+[$extras]}"
    {{bin}}/python -m pip install --quiet -e ".${extras:+[$extras]}"
    mkdir -p "$stamps"
    # dev is every other extra.
    for extra in run {{EXTRAS}} $([[ " {{EXTRAS}} " == *" dev "* ]] && echo lint test bench protos docs examples otel); do
        echo "$want" > "$stamps/$extra"
    done

# Installs only what running needs.
# Run the whole system in one process on SQLite: API :8080, metrics :9100 (`just dev --app myjobs`).
dev *ARGS: (_install)
    {{bin}}/jobscheduler dev {{ARGS}}

# (The docs site is built after lint, in a few seconds: a stale reference page fails it.)
# Install everything the tests need, start etcd/Kafka/FerretDB, run lint + docs + every test, stop them.
test *ARGS: (_install "dev")
    #!/usr/bin/env bash
    set -euo pipefail
    scripts/browser.sh
    scripts/deps.sh up
    trap 'scripts/deps.sh down' EXIT
    just lint
    just docs
    args=({{ARGS}})
    status=0
    if [ ${#args[@]} -gt 0 ]; then
        {{bin}}/python -m pytest --durations=30 "${args[@]}" || status=$?
    else
        # The tests that need no server run on every core; then the others one at a time
        # (they share the servers and time what they do), even if the first part failed.
        {{bin}}/python -m pytest -n auto -m "{{unit}}" || status=$?
        {{bin}}/python -m pytest --durations=30 -m "not ({{unit}})" || status=$?
    fi
    exit $status

# Tests that need no external server (fast inner loop), on every core.
test-unit *ARGS: (_install "test")
    {{bin}}/python -m pytest -n auto -m "{{unit}}" {{ARGS}}

# ruff, mypy and the import contracts (layers, no cycles; pyproject's [tool.importlinter]).
lint: (_install "lint")
    {{bin}}/ruff check jobscheduler tests
    {{bin}}/ruff format --check jobscheduler tests
    {{bin}}/mypy
    {{bin}}/lint-imports --no-cache

# Format the code.
fmt: (_install "lint")
    {{bin}}/ruff format jobscheduler tests
    {{bin}}/ruff check --fix jobscheduler tests

# Benchmarks against a fresh `jobscheduler dev` (prints figures; not a test).
bench *ARGS: (_install "bench")
    {{bin}}/jobscheduler bench {{ARGS}}

# The same, against one process per role on etcd, Kafka and FerretDB (started if needed),
# plus failover times.
bench-distributed *ARGS: (_install "bench") deps-up
    {{bin}}/jobscheduler bench --stack distributed {{ARGS}}

# Install (if missing) and start etcd, Kafka and FerretDB on 127.0.0.1.
deps-up:
    scripts/deps.sh up

# Stop etcd, Kafka and FerretDB.
deps-down:
    scripts/deps.sh down

# One role on MongoDB/Kafka/etcd, configured from the environment (.env is read if present).
run-api: (_install)
    set -a; [ -f .env ] && . ./.env; set +a; {{bin}}/jobscheduler run-api

run-scheduler: (_install)
    set -a; [ -f .env ] && . ./.env; set +a; {{bin}}/jobscheduler run-scheduler

# JOB_TYPE selects the handler, e.g. `JOB_TYPE=noop just run-executor`.
run-executor: (_install)
    set -a; [ -f .env ] && . ./.env; set +a; {{bin}}/jobscheduler run-executor

run-reaper: (_install)
    set -a; [ -f .env ] && . ./.env; set +a; {{bin}}/jobscheduler run-reaper

# Insert a realistic mix of demo jobs into the configured store.
seed *ARGS: (_install)
    {{bin}}/jobscheduler seed {{ARGS}}

# Send jobs over HTTP at a target rate and report latencies.
loadtest *ARGS: (_install)
    {{bin}}/jobscheduler loadtest {{ARGS}}

# Regenerate the etcd gRPC stubs from protos/etcd/.
protos: (_install "protos")
    scripts/gen-protos.sh

# Screenshots of each dashboard view (headless Chromium against a fresh dev) into docs/images/
screenshots: (_install "test")
    scripts/browser.sh
    {{bin}}/python -m tests.support.screenshots docs/images

# Dashboard page timings with many jobs in a fresh store (`just bench-ui --store mongo`).
bench-ui *ARGS: (_install "test")
    {{bin}}/python -m tests.support.ui_bench {{ARGS}}

# Regenerate the docs' reference pages from the code (HTTP API, configuration, CLI, Python).
docs-gen: (_install)
    {{bin}}/python -m jobscheduler.reference docs

# Build the documentation site into site/ (strict: a broken link or a stale page fails it).
docs: (_install "docs")
    {{bin}}/python -m jobscheduler.reference docs --check
    NO_MKDOCS_2_WARNING=1 {{bin}}/mkdocs build --strict --quiet --site-dir site

# Serve the documentation site with live reload on 127.0.0.1:8000.
docs-serve: (_install "docs")
    NO_MKDOCS_2_WARNING=1 {{bin}}/mkdocs serve --dev-addr 127.0.0.1:8000
