#!/usr/bin/env bash
# Builds Citus 13.2.2 from the vendored source (../shared/vendor/citus-13.2.2.tar.gz, or the
# tarball AGENT_MEMORY_CITUS_TARBALL names) against the chosen pg_config, and installs it into
# that server's directories. The build is kept under target/citus-<major> and reused; the
# install is skipped while the server has this Citus. A minimal configure (no libcurl, lz4 or
# zstd) and no LLVM bitcode. Exits 2, saying so in one line, when the tarball is not there (a
# clone without the vendored sources).
# Recent PostgreSQL 15 minors (Debian 12's 15.20) declare have_createdb_privilege() themselves;
# then the vendored patch (citus-13.2.2-pg15.patch) drops Citus's own copy.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENDOR="$ROOT/../shared/vendor"
TARBALL="${AGENT_MEMORY_CITUS_TARBALL:-$VENDOR/citus-13.2.2.tar.gz}"
PATCH="$VENDOR/citus-13.2.2-pg15.patch"
CITUS_VERSION="13.2"
MAJOR="$(pg_major)"

installed() {
  [ -f "$(pg_config --pkglibdir)/citus.so" ] &&
    grep -q "^default_version = '$CITUS_VERSION-" "$(pg_config --sharedir)/extension/citus.control" 2>/dev/null
}
if installed; then
  note "Citus $CITUS_VERSION is installed for PostgreSQL $MAJOR ($(pg_config --pkglibdir))"
  exit 0
fi
if [ ! -f "$TARBALL" ]; then
  echo "Citus's source is not at $TARBALL (set AGENT_MEMORY_CITUS_TARBALL): no Citus cluster to test on"
  exit 2
fi
src="$ROOT/target/citus-$MAJOR"
log="$ROOT/target/citus-$MAJOR-build.log"
if [ ! -f "$src/src/backend/distributed/citus.so" ]; then
  say "Citus from $TARBALL for PostgreSQL $MAJOR into $src (a few minutes, once)"
  # Debian's server headers include GSSAPI's (libkrb5-dev); a server built here from source has none.
  deps=(make gcc)
  grep -q '^#define ENABLE_GSS' "$(pg_config --includedir-server)/pg_config.h" 2>/dev/null && deps+=(libkrb5-dev)
  apt_install "${deps[@]}" || die "installing Citus's build dependencies failed"
  rm -rf "$src" && mkdir -p "$src"
  # Keep the files' times: the build reruns autoconf when configure.ac looks newer than configure.
  tar -xzf "$TARBALL" -C "$src" --strip-components=1 || die "unpacking $TARBALL failed"
  if grep -q 'extern bool have_createdb_privilege' "$(pg_config --includedir-server)/commands/dbcommands.h" 2>/dev/null; then
    ( cd "$src" && patch -s -p1 <"$PATCH" ) || die "applying $PATCH failed"
  fi
  started=$SECONDS
  ( cd "$src" && ./configure PG_CONFIG="$(command -v pg_config)" --without-libcurl --without-lz4 --without-zstd &&
      make -j"$(nproc)" with_llvm=no ) >"$log" 2>&1 \
    || { tail -n 30 "$log" >&2; die "building Citus failed (log: $log)"; }
  note "built in $((SECONDS - started)) s"
fi
as_root make -C "$src" install with_llvm=no >>"$log" 2>&1 || { tail -n 30 "$log" >&2; die "installing Citus failed (log: $log)"; }
installed || die "Citus is still not installed for PostgreSQL $MAJOR after make install"
note "Citus $CITUS_VERSION installed for PostgreSQL $MAJOR"
