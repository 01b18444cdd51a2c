# The project's build configurations, shared by the scripts so that two scripts naming the
# same build directory configure it the same way (a differing option would rebuild it all).
# Sourced; each array holds scripts/build.sh's arguments after the build directory.

# Every build is clang's (scripts/build.sh). The test build: warnings as errors.
test_build=(build-test -DCALRT_WERROR=ON)
# ASan + UBSan with libFuzzer's coverage instrumentation: the sanitizer test run and the
# fuzz targets come from this one build. The benchmarks are left out: they time code whose
# correctness the unit tests check in this build too, and they cost 40 s of its compile time.
sanitize_build=(build-sanitize -DCALRT_WERROR=ON -DCALRT_FUZZ=ON -DCALRT_BENCHMARKS=OFF)
# ThreadSanitizer, for the threaded parts only (the `threaded_tests` target).
tsan_build=(build-tsan -DCALRT_WERROR=ON -DCALRT_SANITIZE=thread)
