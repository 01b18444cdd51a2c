#!/usr/bin/env bash
# The whole test suite: installs what the build needs, checks formatting, builds with warnings
# as errors and runs every test, the `long` label included.
#   scripts/test.sh             the normal build (clang), in build-test/
#   scripts/test.sh --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer (clang), in
#                               build-sanitize/. The same objects carry libFuzzer's coverage
#                               instrumentation, so scripts/fuzz.sh reuses this build. The
#                               `long`, `campaign` and `calibration` labels are left out: under
#                               ASan they add many minutes and no code path the short cases,
#                               the smoke tests and the campaign miss. The benchmarks are not
#                               built there (scripts/lib/builds.sh).
#   scripts/test.sh --tsan      ThreadSanitizer (clang), in build-tsan/: only the threaded
#                               parts and the tests labelled `threads` (tests/CMakeLists.txt).
# Each step prints its wall time. CTest runs on every core and fails when it finds no tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/phase.sh
source scripts/lib/builds.sh

mode=${1:-normal}
phase "setup" scripts/setup.sh
phase "format check" scripts/check-format.sh

ctest_args=(--output-on-failure --no-tests=error --parallel "$(nproc)")
# The tests write their scratch files into a directory of their own, removed at the end,
# never straight into a shared /tmp, where another local user could take a test's file name
# first. Mode 0711: nobody else can create or list entries in it; the service tests' other
# uids can still reach the sockets they are meant to be refused or welcomed at.
# (GoogleTest's testing::TempDir() follows TMPDIR too.)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/calrt-tests.XXXXXX")
chmod 0711 "$scratch"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
case "$mode" in
  normal)
    phase "build (clang)" scripts/build.sh "${test_build[@]}"
    phase "tests" ctest --test-dir build-test "${ctest_args[@]}"
    ;;
  --sanitize)
    phase "build (clang, asan+ubsan)" scripts/build.sh "${sanitize_build[@]}"
    # intercept_tls_get_addr=0: LeakSanitizer's exit-time scan follows the dynamic TLS of
    # every library the process loaded. With Debian 12's glibc 2.36-9+deb12u14 the slot of a
    # library already dlclose()d holds a bogus range (seen: 0x3877-0x6100004979) and the scan
    # crashes ("Tracer caught signal 11") in every test that loads a runtime with --device and
    # unloads it. Without the interception that memory is simply not a root of the check.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    phase "tests (asan+ubsan)" ctest --test-dir build-sanitize "${ctest_args[@]}" \
      --label-exclude 'long|campaign|calibration'
    ;;
  --tsan)
    phase "build (clang, tsan)" scripts/build.sh "${tsan_build[@]}" -- threaded_tests
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
    phase "tests (tsan)" ctest --test-dir build-tsan "${ctest_args[@]}" --label-regex threads \
      --label-exclude 'long'
    ;;
  *)
    echo "test.sh: unknown mode '$mode' (expected nothing, --sanitize or --tsan)" >&2
    exit 2
    ;;
esac
