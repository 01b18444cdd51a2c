#!/usr/bin/env bash
# The whole test suite: installs what the build needs, checks formatting, builds with warnings
# as errors and runs every test, the `long` label included.
#   scripts/test.sh             the normal build, in build-test/
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan/
#                               (the `long` and `campaign` labels are left out: under ASan they
#                               add many minutes and no code path the short cases and the
#                               200-plan campaign miss)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-format.sh

if [[ "${1:-}" == "--sanitize" ]]; then
  scripts/build.sh build-asan -DCALRT_WERROR=ON -DCALRT_SANITIZE=ON
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure --parallel "$(nproc)" --label-exclude 'long|campaign'
else
  scripts/build.sh build-test -DCALRT_WERROR=ON
  ctest --test-dir build-test --output-on-failure --parallel "$(nproc)"
fi
