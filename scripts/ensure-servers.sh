#!/usr/bin/env bash
# Installs clickhouse-server and redis-server from the OS packages when missing (tests start throwaway copies).
set -euo pipefail
need=()
command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/sbin/clickhouse-server ] || need+=(clickhouse-server)
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need+=(redis-server)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing ${need[*]} from the OS packages" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
# The packages' own services are not needed: tests run their own servers on free ports.
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
