#!/usr/bin/env bash
# Sourced by scripts/demo and scripts/test: make a fresh machine ready.
#   - the PostgreSQL server binaries (Debian's `postgresql` package) when missing and we are root
#   - for the tests ("dev"): Debian's `chromium` (the web view's page tests) when missing and root
#   - for the tests ("dev"): etcd, pgbouncer and a Patroni venv (the failover and pooler tests)
#     when missing and root
#   - a virtualenv in .venv with claimsched installed (editable) and the requested extras
# Usage: bootstrap "<extras>"   e.g. bootstrap "" or bootstrap "dev"
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

have_postgres() {
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null
}

# apt-get install PACKAGES (space-separated, saying WHAT for) when we are root on Debian; fails
# otherwise. The package lists are updated once per run.
apt_updated=""
apt_install() {
  local packages="$1" what="$2"
  [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null || return 1
  echo "==> installing $what (apt-get install $packages)" >&2
  if [ -z "$apt_updated" ]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null
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

# The failover and pooler tests (tests/ha) start etcd, Patroni and pgbouncer themselves; Debian
# starts them as services only where systemd runs.
patroni_venv="${CLAIMSCHED_PATRONI_VENV:-/opt/claimsched-patroni}"

ensure_ha_packages() {
  local missing=()
  [ -x /usr/bin/etcd ] || command -v etcd >/dev/null || missing+=(etcd-server)
  [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null || missing+=(pgbouncer)
  # Patroni's venv (below) is made by Debian's python3, which needs python3-venv for that.
  if [ ! -x "$patroni_venv/bin/patroni" ] && ! /usr/bin/python3 -c "import ensurepip" 2>/dev/null
  then
    missing+=(python3-venv)
  fi
  [ "${#missing[@]}" -eq 0 ] && return
  if ! apt_install "${missing[*]}" "the failover tests' tools"; then
    echo "claimsched: ${missing[*]} missing: the failover tests (tests/ha) will fail;" \
         "install them (or run this as root)" >&2
  fi
}

ensure_patroni() {
  [ -x "$patroni_venv/bin/patroni" ] && return
  if [ "$(id -u)" != "0" ] && [ ! -w "$(dirname "$patroni_venv")" ]; then
    echo "claimsched: no Patroni in $patroni_venv: the failover tests (tests/ha) will fail" >&2
    return
  fi
  # Patroni runs as the `postgres` user when we are root: its interpreter must not live under
  # /root (mode 700), so its venv comes from Debian's python3, outside the repo and /root.
  echo "==> installing Patroni into $patroni_venv" >&2
  local log
  log="$(mktemp)"
  if ! { /usr/bin/python3 -m venv "$patroni_venv" \
         && "$patroni_venv/bin/pip" install -q --disable-pip-version-check \
              'patroni[etcd3,psycopg3]'; } >"$log" 2>&1; then
    grep -v "is ignored" "$log" | tail -20 >&2
    echo "claimsched: installing Patroni failed (log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
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
  case ",$1," in *,dev,*) ensure_chromium; ensure_ha_packages; ensure_patroni ;; esac
  ensure_venv "$1"
}
