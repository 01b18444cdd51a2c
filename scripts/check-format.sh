#!/usr/bin/env bash
# Fails when a tracked C/C++ source differs from what clang-format makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -- '*.h' '*.hpp' '*.c' '*.cpp')
if ((${#files[@]} == 0)); then
  # An empty list means git saw no sources (not a checkout, or a broken pattern): checking
  # nothing must not pass.
  echo "check-format: git ls-files found no C/C++ sources to check" >&2
  exit 1
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check-format: run 'clang-format -i' on the files above" >&2
  exit 1
fi
