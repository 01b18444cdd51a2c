#!/usr/bin/env bash
# Configures and builds into a build directory.
#   scripts/build.sh BUILD_DIR [--gcc] [cmake configure args...] [-- targets...]
# Builds with clang/clang++: on the project's 2-core machine it compiles this tree in 292 s
# where GCC takes 408-484 s (README.md, "Build times"), and the sanitizer and fuzzing builds
# need it anyway. --gcc builds with the system's default compiler instead. ccache and a fast
# linker are used when installed (cmake/CalrtBuildSpeed.cmake); scripts/build-profile
# BUILD_DIR shows where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
compiler=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
configure=()
targets=()
while (($#)); do
  case "$1" in
    --)
      shift
      targets=("$@")
      break
      ;;
    --gcc)
      compiler=(-DCMAKE_C_COMPILER=cc -DCMAKE_CXX_COMPILER=c++)
      ;;
    *)
      configure+=("$1")
      ;;
  esac
  shift
done
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${compiler[@]}" \
  "${configure[@]}" >/dev/null
if ((${#targets[@]})); then
  cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build_dir" --parallel "$(nproc)"
fi
