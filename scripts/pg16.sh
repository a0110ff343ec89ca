#!/usr/bin/env bash
# Builds PostgreSQL 16 from the vendored source (../shared/vendor/postgresql-16.2.tar.gz, or the
# tarball AGENT_MEMORY_PG16_TARBALL names) into target/postgresql-16, once: while that prefix
# holds a built server it is reused. Prints the path of its pg_config, for
#   PG_CONFIG="$(scripts/pg16.sh)" ./scripts/test.sh
# which then builds pgvector and the extension against it and runs every tier on PostgreSQL 16.
# The source is a git snapshot, not a release tarball: it needs bison and flex (installed here
# with apt when missing), besides the readline and zlib headers.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TARBALL="${AGENT_MEMORY_PG16_TARBALL:-$ROOT/../shared/vendor/postgresql-16.2.tar.gz}"
PREFIX="$ROOT/target/postgresql-16"
PG_CONFIG16="$PREFIX/bin/pg_config"

if [ -x "$PG_CONFIG16" ] && [ -x "$PREFIX/bin/postgres" ] && [ -f "$PREFIX/include/server/postgres.h" ]; then
  echo "    PostgreSQL 16 already built in $PREFIX" >&2
  echo "$PG_CONFIG16"
  exit 0
fi
[ -f "$TARBALL" ] || die "PostgreSQL 16's source is not at $TARBALL (set AGENT_MEMORY_PG16_TARBALL)"
say "PostgreSQL 16 from $TARBALL into $PREFIX (several minutes, once)" >&2
# (stdout carries only the path of pg_config)
apt_install bison flex libreadline-dev zlib1g-dev make gcc >&2 || die "installing PostgreSQL 16's build dependencies failed"
src="$ROOT/target/postgresql-16-src"
rm -rf "$src" && mkdir -p "$src"
tar -xzf "$TARBALL" -C "$src" --strip-components=1 || die "unpacking $TARBALL failed"
log="$ROOT/target/postgresql-16-build.log"
started=$SECONDS
( cd "$src" && ./configure --prefix="$PREFIX" --without-icu && make -j"$(nproc)" && make install ) >"$log" 2>&1 \
  || { tail -n 30 "$log" >&2; die "building PostgreSQL 16 failed (log: $log)"; }
# The server runs as an unprivileged user: it reads the prefix (and the libraries installed into it).
chmod -R a+rX "$PREFIX"
echo "    built in $((SECONDS - started)) s" >&2
rm -rf "$src"
echo "$PG_CONFIG16"
