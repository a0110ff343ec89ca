#!/usr/bin/env bash
# Takes a Debian 12 or Ubuntu machine (root, or a user with sudo) to a working agent_memory build:
# PostgreSQL server and headers, pgvector, clang, cargo-pgrx, `cargo pgrx init`, and an OS user
# for the server. Idempotent: a second run only checks and skips.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

say "System packages"
command -v apt-get >/dev/null || die "this script needs a Debian or Ubuntu machine (apt-get)"
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then die "run as root, or install sudo"; fi
apt_install ca-certificates curl build-essential pkg-config libssl-dev clang libclang-dev dpkg-dev sudo

if [ -n "${PG_CONFIG:-}" ]; then
  # The server an operator chose: nothing of PostgreSQL is installed or replaced.
  MAJOR="$(pg_major)"
  [ -x "$(pg_config --bindir)/postgres" ] || die "$(pg_config --bindir)/postgres does not exist (PG_CONFIG=$PG_CONFIG)"
  [ -f "$(pg_config --includedir-server)/postgres.h" ] || die "the server headers of PG_CONFIG=$PG_CONFIG are missing"
  note "PostgreSQL $MAJOR ($(pg_config --bindir), chosen by PG_CONFIG)"
else
  # PostgreSQL: use the installed major, else the distribution's default.
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    apt_install postgresql
  fi
  MAJOR="$(ls -d /usr/lib/postgresql/*/bin/postgres | sed -E 's|/usr/lib/postgresql/([0-9]+)/.*|\1|' | sort -n | tail -1)"
  apt_install "postgresql-$MAJOR" "postgresql-server-dev-$MAJOR"
  command -v pg_config >/dev/null || die "pg_config not found after installing postgresql-server-dev-$MAJOR"
  [ "$(pg_major)" = "$MAJOR" ] || die "pg_config reports PostgreSQL $(pg_major), expected $MAJOR (choose a server with PG_CONFIG=/path/to/pg_config)"
  note "PostgreSQL $MAJOR ($(pg_config --bindir))"
fi

say "pgvector"
if [ -f "$(pg_config --sharedir)/extension/vector.control" ]; then
  note "installed: $(grep default_version "$(pg_config --sharedir)/extension/vector.control")"
else
  [ "$APT_UPDATED" -eq 1 ] || { as_root apt-get update -qq; APT_UPDATED=1; }
  # A distribution package fits the distribution's server only; a chosen server gets a build.
  if [ -z "${PG_CONFIG:-}" ] && apt_has "postgresql-$MAJOR-pgvector"; then
    apt_install "postgresql-$MAJOR-pgvector"
  else
    # Not packaged here (Debian 12): build Debian's trixie source package with PGXS.
    src_list=/etc/apt/sources.list.d/agent-memory-trixie-src.sources
    if [ ! -f "$src_list" ]; then
      mirror="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
                | grep -v security | head -1 | awk '{print $2}' || true)"
      [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
      note "adding the trixie source index from $mirror"
      printf 'Types: deb-src\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" | as_root tee "$src_list" >/dev/null
      as_root apt-get update -qq
    fi
    build="$ROOT/target/pgvector-src"
    rm -rf "$build"; mkdir -p "$build"
    ( cd "$build" && apt-get source -qq "pgvector=$PGVECTOR_DEB_VERSION" >/dev/null 2>&1 ) \
      || die "apt-get source pgvector=$PGVECTOR_DEB_VERSION failed"
    srcdir="$(find "$build" -maxdepth 1 -mindepth 1 -type d -name 'pgvector-*' | head -1)"
    note "building $(basename "$srcdir") with PGXS"
    make -s -C "$srcdir" PG_CONFIG="$(command -v pg_config)" >/dev/null 2>&1 || die "building pgvector failed"
    as_root make -s -C "$srcdir" PG_CONFIG="$(command -v pg_config)" install >/dev/null || die "installing pgvector failed"
  fi
  [ -f "$(pg_config --sharedir)/extension/vector.control" ] || die "pgvector is still missing"
  note "installed"
fi

say "Rust and cargo-pgrx $PGRX_VERSION"
if ! command -v cargo >/dev/null; then
  note "installing Rust with rustup"
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  note "cargo-pgrx $PGRX_VERSION installed"
else
  note "cargo install cargo-pgrx --version $PGRX_VERSION --locked (several minutes, once)"
  cargo install cargo-pgrx --version "$PGRX_VERSION" --locked >/dev/null 2>&1 \
    || die "cargo install cargo-pgrx failed"
fi
PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}"
# A server pgrx was pointed at that is gone (a clone deleted with its scratch build) breaks
# every build: pgrx's build scripts ask each configured pg_config for its version.
if [ -f "$PGRX_HOME/config.toml" ]; then
  while IFS= read -r line; do
    path="$(sed -nE 's/^pg[0-9]+ = "(.*)"$/\1/p' <<<"$line")"
    if [ -n "$path" ] && [ ! -x "$path" ]; then
      grep -vxF "$line" "$PGRX_HOME/config.toml" >"$PGRX_HOME/config.toml.new" || true
      mv "$PGRX_HOME/config.toml.new" "$PGRX_HOME/config.toml"
      note "cargo pgrx: forgot ${line%% =*}, whose pg_config $path is gone"
    fi
  done < <(cat "$PGRX_HOME/config.toml")
fi
if grep -q "^pg$MAJOR = \"$(command -v pg_config)\"" "$PGRX_HOME/config.toml" 2>/dev/null; then
  note "cargo pgrx init: pg$MAJOR uses the system server"
else
  cargo pgrx init "--pg$MAJOR" "$(command -v pg_config)" >/dev/null
  note "cargo pgrx init --pg$MAJOR $(command -v pg_config)"
fi

bash "$ROOT/scripts/model.sh"

say "Server user"
u="$(server_user)"
if id "$u" >/dev/null 2>&1; then note "$u exists"; else as_root useradd --system --create-home "$u"; note "created $u"; fi
say "Setup complete"
