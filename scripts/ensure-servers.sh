#!/usr/bin/env bash
# Installs clickhouse-server, redis-server and chromium (the web UI tests drive it with playwright-core) from the OS
# packages when missing (tests start throwaway copies).
set -euo pipefail
need=()
command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/sbin/clickhouse-server ] || need+=(clickhouse-server)
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || [ -x /usr/lib/chromium/chromium ] || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing ${need[*]} from the OS packages" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
# The packages' own services are not needed: tests run their own servers on free ports.
if ! $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
  echo "could not install ${need[*]}: install them with apt-get (Debian/Ubuntu), or the suites that need them fail" >&2
  exit 1
fi
