# Shared helpers for the agent_memory scripts. Sourced, not run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PGRX_VERSION="0.18.1"
PGVECTOR_DEB_VERSION="0.8.0-1"

say()  { printf '\033[1m==> %s\033[0m\n' "$*"; }
note() { printf '    %s\n' "$*"; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

# PG_CONFIG=/path/to/pg_config chooses the PostgreSQL server to build, test and run the demo
# against (for example one built from source); without it, the distribution's server.
if [ -n "${PG_CONFIG:-}" ]; then
  [ -x "$PG_CONFIG" ] || die "PG_CONFIG=$PG_CONFIG is not an executable pg_config"
  PATH="$(cd "$(dirname "$PG_CONFIG")" && pwd):$PATH"
  export PATH
fi

# check NAME EXPECTED ACTUAL: one check of a shell test tier (tests/standby.sh, tests/upgrade.sh),
# counted in PASSED and FAILED.
PASSED=0
FAILED=0
check() {
  if [ "$2" = "$3" ]; then PASSED=$((PASSED + 1)); note "ok: $1";
  else FAILED=$((FAILED + 1)); printf '\033[31m    FAILED: %s: expected [%s], got [%s]\033[0m\n' "$1" "$2" "$3"; fi
}

# Run a command as root: directly when we are root, else through sudo.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Debian packages: apt_install installs those of its arguments that are missing (one apt-get
# update per script run), apt_has says whether the package index knows one.
APT_UPDATED=0
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$APT_UPDATED" -eq 0 ]; then as_root apt-get update -qq; APT_UPDATED=1; fi
  note "apt-get install ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

apt_has() {  # whether the package index knows a package
  apt-cache show "$1" >/dev/null 2>&1
}

# Make cargo reachable when rustup put it in ~/.cargo/bin but the shell has no profile.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

# The PostgreSQL major version the build targets: the one pg_config reports.
pg_major() {
  pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/'
}

pg_bindir() { pg_config --bindir; }

# The OS user that owns the server processes: postgres when we are root, else ourselves.
server_user() {
  if [ "$(id -u)" -eq 0 ]; then echo postgres; else id -un; fi
}

# Run a command as the server user.
as_server_user() {
  local u; u="$(server_user)"
  if [ "$(id -un)" = "$u" ]; then "$@"; else runuser -u "$u" -- "$@"; fi
}

# A directory the server user can write, under the project's build output when the server user
# can reach it, else under /var/tmp (for example when the clone sits in root's home).
server_dir() {
  local name="$1" dir
  dir="$ROOT/target/agent_memory/$name"
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown "$(server_user)" "$dir"; fi
  if ! as_server_user test -w "$dir" 2>/dev/null; then
    dir="/var/tmp/agent_memory-$(echo "$ROOT" | md5sum | cut -c1-8)/$name"
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown "$(server_user)" "$dir" "$(dirname "$dir")"; fi
  fi
  echo "$dir"
}

# start_server DATADIR SOCKDIR PORT [extra postgresql.conf lines...]
# Creates the cluster if needed, writes the settings, and starts it.
start_server() {
  local data="$1" sock="$2" port="$3"; shift 3
  local bindir; bindir="$(pg_bindir)"
  # A scratch cluster of another major version (the scripts were run with another pg_config):
  # made again for this one.
  if [ -f "$data/PG_VERSION" ] && [ "$(cat "$data/PG_VERSION")" != "$(pg_major)" ]; then
    say "Recreating $data for PostgreSQL $(pg_major) (it was made by $(cat "$data/PG_VERSION"))"
    as_root rm -rf "$data"
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    as_server_user "$bindir/initdb" -D "$data" -A trust -U postgres --no-instructions >/dev/null
  fi
  {
    echo "# written by agent_memory's scripts"
    echo "port = $port"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$sock'"
    echo "shared_preload_libraries = 'agent_memory'"
    echo "fsync = off"
    echo "max_worker_processes = 16"
    for line in "$@"; do echo "$line"; done
  } | as_server_user tee "$data/agent_memory.conf" >/dev/null
  if ! grep -q "^include_if_exists = 'agent_memory.conf'" "$data/postgresql.conf"; then
    echo "include_if_exists = 'agent_memory.conf'" | as_server_user tee -a "$data/postgresql.conf" >/dev/null
  fi
  if as_server_user "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_server_user "$bindir/pg_ctl" -D "$data" -w -m fast stop >/dev/null
  fi
  # SERVER_ENV: extra environment of the server (the test server runs with RUST_BACKTRACE=1, to
  # prove that clients never see a Rust backtrace whatever the environment).
  as_server_user env ${SERVER_ENV:-} \
    "$bindir/pg_ctl" -D "$data" -w -t 60 -l "$data/server.log" start >/dev/null \
    || { tail -n 30 "$data/server.log" >&2; die "the server in $data did not start"; }
}

stop_server() {
  local data="$1"
  if [ -f "$data/postmaster.pid" ]; then
    as_server_user "$(pg_bindir)/pg_ctl" -D "$data" -w -m fast stop >/dev/null 2>&1 || true
  fi
}

# Build the extension and install it into the server's directories. Every file is written
# next to its destination and renamed over it, so a server that has the old library loaded (the
# demo's, a test server's, an operator's) keeps running on the old file until it restarts; the
# library is never rewritten in place under a running server.
install_extension() {
  say "Building and installing agent_memory (release) for PostgreSQL $(pg_major)"
  local feat="pg$(pg_major)" out="$ROOT/target/agent_memory/package"
  mkdir -p "$ROOT/target/agent_memory"
  rm -rf "$out"
  ( cd "$ROOT" && cargo pgrx package --no-default-features --features "$feat" \
      --pg-config "$(command -v pg_config)" --out-dir "$out" ) >"$ROOT/target/install.log" 2>&1 \
    || { tail -n 40 "$ROOT/target/install.log" >&2; die "cargo pgrx package failed (log: target/install.log)"; }
  local f rel dest
  while IFS= read -r -d '' f; do
    rel="${f#"$out"}"
    dest="$rel"
    as_root mkdir -p "$(dirname "$dest")"
    as_root cp "$f" "$dest.agent_memory-new.$$"
    as_root chmod 644 "$dest.agent_memory-new.$$"
    case "$dest" in *.so) as_root chmod 755 "$dest.agent_memory-new.$$" ;; esac
    as_root mv -f "$dest.agent_memory-new.$$" "$dest"
  done < <(find "$out" -type f -print0)
}
