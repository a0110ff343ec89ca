#!/usr/bin/env bash
# Sets up what is missing, then runs every test tier of agent_memory:
#   0. lints: rustfmt --check, clippy with warnings as errors, unsafe code only where allowed
#   1. unit tests of the algorithms, the embedder's parity with sentence-transformers, and the reading of
#      every SQL text for its user (tests/tests/statements.rs) (cargo test, no server)
#   2. #[pg_test] tests inside a backend (cargo pgrx test)
#   3. the pg_regress spec against a real server with the library preloaded
#   4. a streaming standby of the test server (tests/standby.sh)
#   5. out-of-process tests: real clients over a socket (tests/)
#   6. the upgrade path from the oldest shipped version (tests/upgrade.sh)
#   7. a new cluster whose worker database does not exist yet (tests/new_cluster.sh)
#   8. the Python package (python/): its client, LangGraph store, MCP server and examples/agent.py,
#      with pytest in a virtual environment under target/, against the test server
#   9. a server beside the tests (tests/bystander.sh): started with the library preloaded before
#      the other tiers, it must keep serving, uncrashed, while they (and scripts/package.sh) install
#  10. a Citus cluster (tests/citus.sh): Citus 13.2.2 built from ../shared/vendor once, a
#      coordinator and two workers, and the probes of delegation; on PostgreSQL 16 only (CI's
#      second run; AGENT_MEMORY_CITUS=any runs it on any version), skipped in one line without
#      the vendored source
# Exits non-zero when any tier fails.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
MAJOR="$(pg_major)"
PORT="${AGENT_MEMORY_TEST_PORT:-28836}"
FAILED=()
PASSED=()
# AGENT_MEMORY_TIERS="regress standby" runs only the named tiers (unit_tests, pg_tests, regress,
# standby, out_of_process, python_package, upgrade, new_cluster, lint, bystander, citus); unset, all of them.
wanted() { [ -z "${AGENT_MEMORY_TIERS:-}" ] || [[ " $AGENT_MEMORY_TIERS " == *" $1 "* ]]; }
tier() {  # tier NAME COMMAND...: runs one tier and records the outcome
  local name="$1"; shift
  wanted "$1" || return 0
  say "Tier: $name"
  if "$@"; then PASSED+=("$name"); else FAILED+=("$name"); printf '\033[31m    tier failed: %s\033[0m\n' "$name"; fi
}

# rustfmt.toml's format and clippy without warnings over the workspace (the extension crate denies
# unsafe code outside the modules that wrap PostgreSQL and pgvector: Cargo.toml's [lints]).
lint() {
  local c
  for c in rustfmt clippy; do
    if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
      rustup component add "$c" >/dev/null 2>&1 || { echo "cargo ${c/rustfmt/fmt} is not installed and rustup could not add it"; return 1; }
    fi
  done
  cargo fmt --all -- --check &&
    cargo clippy --workspace --all-targets --no-default-features --features "agent_memory/pg$MAJOR agent_memory/pg_test" -- -D warnings
}

# The embedder's tests run the real model (installed by setup) on every eval text: in release,
# where it takes a minute instead of most of an hour.
# tests/tests/statements.rs reads the extension's SQL and needs no server.
unit_tests() {
  cargo test -p agent_memory_core && cargo test --release -p agent_memory_embed &&
    cargo test -p agent_memory_tests --test statements
}

# cargo pgrx test installs its build with `sudo cp`, in place; scripts/pgrx-install/sudo makes that
# a rename, so a server running beside the tests (the demo's) keeps the library it loaded.
pg_tests() {
  local data; data="$(server_dir pgrx-test)/data"
  PATH="$ROOT/scripts/pgrx-install:$PATH" cargo pgrx test "pg$MAJOR" --no-default-features --runas "$(server_user)" --pgdata "$data"
}

DATA="" SOCK="" BYSTANDER=""
cleanup() {
  [ -n "$DATA" ] && stop_server "$DATA"
  [ -n "$BYSTANDER" ] && stop_server "$BYSTANDER"
  return 0
}
trap cleanup EXIT

start_test_server() {
  install_extension
  DATA="$(server_dir test-server)/data"
  SOCK="$(server_dir test-socket)"
  say "Starting the test server (port $PORT, socket $SOCK)"
  # The workers of one database, for the out-of-process tests of the workers.
  SERVER_ENV="RUST_BACKTRACE=1" start_server "$DATA" "$SOCK" "$PORT" "log_min_messages = warning" "agent_memory.worker_databases = 'agent_memory_workers'"
  local psql=("$(pg_bindir)/psql" -X -q -h "$SOCK" -p "$PORT" -U postgres -d postgres)
  # Settings a previous run left with ALTER SYSTEM go, and the workers' database exists.
  "${psql[@]}" -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null
  if [ -z "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = 'agent_memory_workers'")" ]; then
    "${psql[@]}" -c "CREATE DATABASE agent_memory_workers"
  fi
}

regress() {
  local pg_regress out
  pg_regress="$(dirname "$(pg_config --pgxs)")/../test/regress/pg_regress"
  out="$ROOT/target/agent_memory/regress"
  rm -rf "$out"; mkdir -p "$out"
  "$pg_regress" --inputdir="$ROOT/pg_regress" --outputdir="$out" --bindir="$(pg_bindir)" \
    --host="$SOCK" --port="$PORT" --user=postgres --dbname=agent_memory_regress \
    --schedule="$ROOT/pg_regress/schedule" \
    || { [ -f "$out/regression.diffs" ] && head -n 200 "$out/regression.diffs"; return 1; }
}

standby() {
  bash "$ROOT/tests/standby.sh" "$SOCK" "$PORT"
}

upgrade() {
  bash "$ROOT/tests/upgrade.sh"
}

new_cluster() {
  bash "$ROOT/tests/new_cluster.sh"
}

bystander() {
  bash "$ROOT/tests/bystander.sh" check
}

citus() {
  if [ "$MAJOR" != 16 ] && [ "${AGENT_MEMORY_CITUS:-}" != any ]; then
    echo "skipped: the Citus tier runs on PostgreSQL 16 (CI's second run; AGENT_MEMORY_CITUS=any runs it here)"
    return 0
  fi
  AGENT_MEMORY_INSTALLED=1 AGENT_MEMORY_TEST_HOST="$SOCK" AGENT_MEMORY_TEST_PORT="$PORT" bash "$ROOT/tests/citus.sh"
}

out_of_process() {
  AGENT_MEMORY_TEST_HOST="$SOCK" AGENT_MEMORY_TEST_PORT="$PORT" cargo test -p agent_memory_tests --no-fail-fast -- --test-threads=1
}

# The Python package, installed from ./python into a virtual environment under target/ (packages
# from PyPI, at the versions of python/constraints.txt), type-checked and tested against the test
# server: the client, the LangGraph store (with LangGraph itself), the MCP server over stdio and
# examples/agent.py; then LangGraph's own store tests on the store (python/langgraph_suites: their
# source taken from the pinned sdist, their fixtures rebuilt on AgentMemoryStore).
python_package() {
  local venv="$ROOT/target/python-venv"
  command -v python3 >/dev/null 2>&1 || apt_install python3
  python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || return 1
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$ROOT/python/constraints.txt" \
    "$ROOT/python[test]" mypy || return 1
  "$venv/bin/mypy" --strict "$ROOT/python/src/agent_memory" &&
    AGENT_MEMORY_TEST_HOST="$SOCK" AGENT_MEMORY_TEST_PORT="$PORT" "$venv/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/python/tests" &&
    AGENT_MEMORY_TEST_HOST="$SOCK" AGENT_MEMORY_TEST_PORT="$PORT" "$venv/bin/python" "$ROOT/python/langgraph_suites/run.py" "$ROOT/target/langgraph-suites"
}

if wanted bystander; then
  install_extension
  if bash "$ROOT/tests/bystander.sh" start; then BYSTANDER="$(server_dir bystander)/data"; else FAILED+=("bystander (start)"); fi
fi
tier "lints (rustfmt, clippy, unsafe code)" lint
tier "unit tests (cargo test)" unit_tests
tier "pg_test (cargo pgrx test)" pg_tests
start_test_server
tier "pg_regress" regress
tier "standby (a streaming replica, psql)" standby
tier "out-of-process tests (tests/)" out_of_process
tier "Python package (python/, pytest)" python_package
tier "upgrade from 0.1.0 (ALTER EXTENSION ... UPDATE, psql)" upgrade
tier "new cluster (the workers' launcher, psql)" new_cluster
tier "Citus cluster (tests/citus.sh: a coordinator and two workers)" citus
[ -n "$BYSTANDER" ] && tier "a server beside the tests (tests/bystander.sh, psql)" bystander

say "Summary"
for t in "${PASSED[@]}"; do note "passed: $t"; done
for t in "${FAILED[@]}"; do note "FAILED: $t"; done
echo "tiers: ${#PASSED[@]} passed, ${#FAILED[@]} failed"
[ ${#FAILED[@]} -eq 0 ]
