#!/usr/bin/env bash
# Builds llama-server (llama.cpp's own OpenAI-compatible HTTP server) offline, from the llama.cpp source that the
# node-llama-cpp npm package ships as llama/gitRelease.bundle, into a cache outside the repo:
#   ${LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tracegate/llama-server}/<llama.cpp commit>/llama-server
# Idempotent: when that binary exists and was built with the same flags, it only prints its path.
#
#   scripts/build-llama-server.sh [--path | --background] [NODE_MODULES_DIR]
# The last stdout line is the binary's path (all progress goes to stderr). --path builds nothing: it prints the
# path and exits 0 when the binary is there, 1 when not. --background starts the build detached (its output in the
# cache's build.log) and returns at once; a later run without options waits for it (flock) and prints the path.
# NODE_MODULES_DIR defaults to test/support/local-model/node_modules (make test installs it).
# Needs git, cmake, a C++17 compiler (and ninja if present).
# LLAMA_SERVER_JOBS (default nproc) and LLAMA_SERVER_NICE (default 19) tune the build.
set -euo pipefail

mode=build
case "${1:-}" in
  --path) mode=path; shift ;;
  --background) mode=background; shift ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
node_modules=${1:-$here/../test/support/local-model/node_modules}
bundle=$node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || { echo "build-llama-server: $bundle not found (npm ci --prefix test/support/local-model first)" >&2; exit 2; }

commit=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print substr($1, 1, 12) }')
[ -n "$commit" ] || { echo "build-llama-server: no HEAD in $bundle" >&2; exit 2; }
cache=${LLAMA_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tracegate/llama-server}
out=$cache/$commit
bin=$out/llama-server

# Only the llama-server target: static, CPU only. For build time on 2 cores: -Os (MinSizeRel) instead of -O3, no
# -march=native (GGML_NATIVE=OFF: also keeps the cached binary portable), no llamafile sgemm, no Q4_0 repacking, no
# OpenMP, no warning flags. -DLLAMA_USE_PREBUILT_UI=OFF is required offline: otherwise cmake downloads the web UI.
flags=(
  -DCMAKE_BUILD_TYPE=MinSizeRel -DBUILD_SHARED_LIBS=OFF -DLLAMA_ALL_WARNINGS=OFF
  -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_LLAMAFILE=OFF -DGGML_CPU_REPACK=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
)
generator=()
if command -v ninja > /dev/null; then generator=(-G Ninja); fi
signature="${flags[*]} ${generator[*]}"

if [ -x "$bin" ] && [ "$(cat "$out/build-flags.txt" 2> /dev/null)" = "$signature" ]; then
  echo "$bin"
  exit 0
fi
if [ "$mode" = path ]; then echo "$bin"; exit 1; fi
if [ "$mode" = background ]; then
  mkdir -p "$out"
  # Detached from make's process group: it outlives an interrupted `make test` and finishes filling the cache.
  setsid "$0" "$node_modules" > "$out/background.log" 2>&1 < /dev/null &
  echo "build-llama-server: building in the background (pid $!, log $out/build.log)" >&2
  echo "$bin"
  exit 0
fi
for tool in git cmake c++; do
  command -v "$tool" > /dev/null || { echo "build-llama-server: '$tool' is required (apt-get install git cmake g++)" >&2; exit 2; }
done

mkdir -p "$out"
exec 9> "$out/.lock"
flock 9 # a concurrent run waits, then finds the binary
if [ -x "$bin" ] && [ "$(cat "$out/build-flags.txt" 2> /dev/null)" = "$signature" ]; then echo "$bin"; exit 0; fi

work=$(mktemp -d "$out/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$out/build.log
start=$(date +%s)
echo "build-llama-server: building llama.cpp $commit into $out (log: $log; ~13 CPU-minutes: 8-18 min on 2 cores)" >&2
{
  git clone -q "$bundle" "$work/src"
  nice -n "${LLAMA_SERVER_NICE:-19}" cmake -S "$work/src" -B "$work/build" "${generator[@]}" "${flags[@]}"
  nice -n "${LLAMA_SERVER_NICE:-19}" cmake --build "$work/build" --target llama-server -j "${LLAMA_SERVER_JOBS:-$(nproc)}"
} > "$log" 2>&1 || { tail -n 30 "$log" >&2; echo "build-llama-server: build failed (see $log)" >&2; exit 1; }

strip "$work/build/bin/llama-server" 2> /dev/null || true
mv "$work/build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
echo "$signature" > "$out/build-flags.txt"
echo "build-llama-server: done in $(($(date +%s) - start)) s: $("$bin" --version 2>&1 | grep -m1 version)" >&2
echo "$bin"
