#!/usr/bin/env bash
# Configures and builds into a build directory.
#   scripts/build.sh BUILD_DIR [cmake configure args...] [-- targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
configure=()
targets=()
while (($#)); do
  if [[ "$1" == "--" ]]; then
    shift
    targets=("$@")
    break
  fi
  configure+=("$1")
  shift
done
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure[@]}" >/dev/null
if ((${#targets[@]})); then
  cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build_dir" --parallel "$(nproc)"
fi
