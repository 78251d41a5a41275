#!/usr/bin/env bash
# One-step, idempotent set-up: .venv with the pinned packages, the Ansible
# collections, the generated gRPC stubs' tooling and (as root) Debian packages.
# A second run does nothing slow: every step is keyed by a stamp of its inputs.
#
# setup.sh --build: only what building the collection needs (`make collection`):
# .venv with requirements/build.txt; no Debian packages, no test or benchmark tools.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=.venv
say() { printf 'setup: %s\n' "$*"; }
# The inputs of the full venv's stamp (.venv/.mco-stamp).
venv_inputs() { cat requirements/node.txt requirements/control.txt requirements/build.txt requirements/dev.txt pyproject.toml; }

case "${1:-}" in
  "") ;;
  --build)
    command -v "$PYTHON" >/dev/null || { echo "setup: $PYTHON not found; install Python 3.11 (Debian: apt-get install python3.11-venv)" >&2; exit 1; }
    [ -x "$VENV/bin/python" ] || { say "creating $VENV with $($PYTHON --version)"; "$PYTHON" -m venv "$VENV"; }
    full=$(venv_inputs | sha256sum | cut -d' ' -f1)
    want=$(cat requirements/build.txt | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$VENV/.mco-stamp" 2>/dev/null)" = "$full" ] || [ "$(cat "$VENV/.mco-build-stamp" 2>/dev/null)" = "$want" ]; then
      say "build packages up to date"
    else
      say "installing the build packages (requirements/build.txt)"
      "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements/build.txt 2> >(grep -v '^WARNING: Location' >&2)
      echo "$want" > "$VENV/.mco-build-stamp"
    fi
    exit 0 ;;
  *) echo "setup: unknown argument ${1}; usage: setup.sh [--build]" >&2; exit 2 ;;
esac

# --- Debian packages (root only) -------------------------------------------
debs=$(grep -vE '^\s*(#|$)' requirements/debian.txt | tr '\n' ' ')
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in $debs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # Debian's supervisor package starts its own daemon (MCO runs its own instance), and the
    # prometheus package its server (only promtool is wanted here).
    for daemon in supervisor prometheus; do
      if command -v service >/dev/null && [ -e "/etc/init.d/$daemon" ]; then
        service "$daemon" stop >/dev/null 2>&1 || true
      fi
    done
  else
    say "Debian packages present"
  fi
else
  say "not root: skipping Debian packages ($debs); tiers that need them will say so"
fi

# --- Python venv ------------------------------------------------------------
command -v "$PYTHON" >/dev/null || { echo "setup: $PYTHON not found; install Python 3.11 (Debian: apt-get install python3.11-venv)" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
want=$(venv_inputs | sha256sum | cut -d' ' -f1)
if [ "$(cat "$VENV/.mco-stamp" 2>/dev/null)" != "$want" ]; then
  say "installing pinned Python packages (requirements/dev.txt)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt 2> >(grep -v '^WARNING: Location' >&2)
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . 2> >(grep -v '^WARNING: Location' >&2)
  echo "$want" > "$VENV/.mco-stamp"
else
  say "Python packages up to date"
fi

# --- Ansible collections ----------------------------------------------------
"$VENV/bin/python" scripts/install_collections.py

# --- CO-RE eBPF object (when the toolchain and BTF are present) -------------
if [ -f bpf/Makefile ]; then
  make -s -C bpf || say "eBPF object not built (see above); the collector will fall back to tracefs"
fi
say "done"
