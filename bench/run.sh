#!/usr/bin/env bash
# Runs agent_memory's benchmarks against a local server with the release build preloaded.
#   bench/run.sh write     write path: reconcile latency, batch throughput, COPY vs INSERT
#   bench/run.sh recall    recall: memory_recall vs reference SQL vs plain HNSW vs exact ranking
#   bench/run.sh storage   storage of 512-d embeddings: EXTERNAL vs in line vs PLAIN vs halfvec
#   bench/run.sh maintain  memory_forget and memory_consolidate on 1,000,000 memories
#   bench/run.sh evict     the eviction simulation: six policies, three question streams (no server)
#   bench/run.sh embed     text in: embeddings per second, what a text question adds to recall, memory
#   bench/run.sh throughput  reads under 1-32 connections: hits folded by the worker vs touch in place vs none
#   bench/run.sh policy    the tenant policy as a writer role: 0.9.0's subquery vs a SQL function per row vs the library's
#   bench/run.sh quality   evidence recall on real conversations (shared/eval), before and after maintenance;
#                          writes docs/quality.md
#   bench/run.sh citus     recall on a Citus cluster (a coordinator and two workers on this machine,
#                          tests/citus.sh up) beside one server: latency through the coordinator, on
#                          the worker and on one server; throughput with two workers and one (drained).
#                          Needs PostgreSQL 16: PG_CONFIG="$(bash scripts/pg16.sh)" bench/run.sh citus
# Figures are printed and written under target/agent_memory/.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
which="${1:-write}"
cd "$ROOT"
if [ "$which" = evict ]; then
  # A simulation in memory: no server, only the policy code of agent_memory_core.
  mkdir -p "$ROOT/target/agent_memory"
  cargo build --release -p agent_memory_bench --bin evict 2>&1 | tail -1
  BENCH_OUT="$ROOT/target/agent_memory/bench-evict.md" "$ROOT/target/release/evict"
  exit 0
fi
bash "$ROOT/scripts/setup.sh" >/dev/null
install_extension
PORT="${AGENT_MEMORY_BENCH_PORT:-28837}"
DATA="$(server_dir bench)/data"
SOCK="$(server_dir bench-socket)"
trap 'stop_server "$DATA"' EXIT
start_server "$DATA" "$SOCK" "$PORT" "shared_buffers = '6GB'" "max_wal_size = '4GB'" \
  "agent_memory.worker_databases = 'am_bench_maintain, am_bench_throughput'" "log_min_messages = warning"
say "Benchmark: $which (PostgreSQL $(pg_major), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB)"
if [ "$which" = storage ]; then
  psql -X -h "$SOCK" -p "$PORT" -U postgres -d postgres -q -c "DROP DATABASE IF EXISTS am_bench_storage" -c "CREATE DATABASE am_bench_storage"
  psql -X -h "$SOCK" -p "$PORT" -U postgres -d am_bench_storage -f "$ROOT/bench/storage.sql" | tee "$ROOT/target/agent_memory/bench-storage.md"
  exit 0
fi
if [ "$which" = citus ]; then
  # The cluster on ports of its own (the tests' tier uses 28860-28862), left running for the next
  # run; `AGENT_MEMORY_CITUS_PORT=28870 bash tests/citus.sh down` stops it.
  export AGENT_MEMORY_CITUS_PORT="${AGENT_MEMORY_CITUS_PORT:-28870}"
  AGENT_MEMORY_INSTALLED=1 bash "$ROOT/tests/citus.sh" up >/dev/null || die "the Citus cluster did not start (tests/citus.sh up)"
  export AGENT_MEMORY_CITUS_HOST=localhost AGENT_MEMORY_CITUS_DB=agent_memory_citus
fi
cargo build --release -p agent_memory_bench --bin "$which" 2>&1 | tail -1
if [ "$which" = quality ] || [ "$which" = embed ]; then
  export AGENT_MEMORY_EVAL="${AGENT_MEMORY_EVAL:-$ROOT/../shared/eval/conversations}"
  export QUALITY_DOC="${QUALITY_DOC:-$ROOT/docs/quality.md}"
fi
AGENT_MEMORY_TEST_HOST="$SOCK" AGENT_MEMORY_TEST_PORT="$PORT" BENCH_OUT="$ROOT/target/agent_memory/bench-$which.md" \
  "$ROOT/target/release/$which"
