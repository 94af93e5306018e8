#!/usr/bin/env bash
# Sourced by scripts/demo and scripts/test: make a fresh machine ready.
#   - the PostgreSQL server binaries (Debian's `postgresql` package) when missing and we are root
#   - for the tests ("dev"): etcd, pgbouncer and a Patroni venv for the failover tests, when
#     missing and we are root
#   - a virtualenv in .venv with claimsched installed (editable) and the requested extras
# Usage: bootstrap "<extras>"   e.g. bootstrap "" or bootstrap "dev"
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

have_postgres() {
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null
}

apt_updated=""
apt_update_once() {
  if [ -z "$apt_updated" ]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
}

ensure_postgres() {
  if have_postgres; then return; fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "==> installing the PostgreSQL server (apt-get install postgresql)" >&2
    apt_update_once
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "claimsched: no PostgreSQL server binaries found; install the 'postgresql' package" \
         "(or run this as root), or set CLAIMSCHED_TEST_DSN / pass --dsn" >&2
    exit 1
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

# The failover and pooler tests (tests/ha) start etcd, Patroni and pgbouncer themselves.
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
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "==> installing ${missing[*]} for the failover tests" >&2
    apt_update_once
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    # Debian starts them as services where systemd runs; the tests start their own.
  else
    echo "claimsched: ${missing[*]} missing: the failover tests (tests/ha) will fail" >&2
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

bootstrap() {
  ensure_postgres
  if [[ "$1" == *dev* ]]; then
    ensure_ha_packages
    ensure_patroni
  fi
  ensure_venv "$1"
}
