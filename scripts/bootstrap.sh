#!/usr/bin/env bash
# Sourced by scripts/demo and scripts/test: make a fresh machine ready.
#   - the PostgreSQL server binaries (Debian's `postgresql` package) when missing and we are root
#   - for the tests ("dev"): Debian's `chromium` (the web view's page tests) when missing and root
#   - a virtualenv in .venv with claimsched installed (editable) and the requested extras
# Usage: bootstrap "<extras>"   e.g. bootstrap "" or bootstrap "dev"
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

have_postgres() {
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null
}

# apt-get install PACKAGE (saying WHAT for) when we are root on Debian; fails otherwise.
apt_install() {
  local package="$1" what="$2"
  [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null || return 1
  echo "==> installing $what (apt-get install $package)" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
}

ensure_postgres() {
  if have_postgres; then return; fi
  if ! apt_install postgresql "the PostgreSQL server"; then
    echo "claimsched: no PostgreSQL server binaries found; install the 'postgresql' package" \
         "(or run this as root), or set CLAIMSCHED_TEST_DSN / pass --dsn" >&2
    exit 1
  fi
}

# The page tests drive Debian's chromium through Playwright (never `playwright install`); without
# it they fail and say so.
ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then return; fi
  if ! apt_install chromium "Chromium for the page tests"; then
    echo "claimsched: /usr/bin/chromium is missing: the page tests (tests/web) will fail;" \
         "install the 'chromium' package (or run this as root)" >&2
  fi
}

ensure_venv() {
  local extras="$1" python="${PYTHON:-python3}"
  local spec=""
  [ -n "$extras" ] && spec="[$extras]"
  local stamp="$repo/.venv/.installed-$(echo "$extras" | tr -c 'a-z' '_')"
  if [ ! -x "$repo/.venv/bin/python" ]; then
    echo "==> creating .venv" >&2
    "$python" -m venv "$repo/.venv"
  fi
  if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ]; then
    echo "==> installing claimsched${extras:+[$extras]} into .venv" >&2
    local log="$repo/.venv/install.log"
    if ! { "$repo/.venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip \
           && "$repo/.venv/bin/python" -m pip install -q --disable-pip-version-check \
                -e "$repo$spec"; } >"$log" 2>&1; then
      grep -v "is ignored" "$log" | tail -20 >&2
      echo "claimsched: installing the Python dependencies failed (log: $log)" >&2
      exit 1
    fi
    touch "$stamp"
  fi
}

bootstrap() {
  ensure_postgres
  case ",$1," in *,dev,*) ensure_chromium ;; esac
  ensure_venv "$1"
}
