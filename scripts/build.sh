#!/usr/bin/env bash
# Configures and builds into a build directory.
#   scripts/build.sh BUILD_DIR [--clang] [cmake configure args...] [-- targets...]
# --clang builds with clang/clang++ (the sanitizer and fuzzing builds); otherwise the
# system's default compiler. ccache and a fast linker are used when installed
# (cmake/CalrtBuildSpeed.cmake); scripts/build-profile BUILD_DIR shows where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
configure=()
targets=()
while (($#)); do
  case "$1" in
    --)
      shift
      targets=("$@")
      break
      ;;
    --clang)
      configure+=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
      ;;
    *)
      configure+=("$1")
      ;;
  esac
  shift
done
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure[@]}" >/dev/null
if ((${#targets[@]})); then
  cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build_dir" --parallel "$(nproc)"
fi
