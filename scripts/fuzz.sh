#!/usr/bin/env bash
# Builds the libFuzzer targets (in the clang sanitizer build, build-sanitize/) and runs them
# side by side, each for a bounded time (on two cores each target gets about two thirds of one).
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
# Seeds: the tiny calbin's manifest (generated here), the tiny service manifest, and one
# valid service protocol frame per message kind and call (written by protocol_fuzz_seeds). Findings
# (crashes, leaks, timeouts, out-of-memory, undefined behaviour) fail the run with a non-zero
# exit and leave the reproducer in build-sanitize/fuzz-findings/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/builds.sh
seconds=${1:-60}
scripts/setup.sh
# The sanitizer build of `scripts/test.sh --sanitize`: after that run, nothing to rebuild.
build=${sanitize_build[0]}
scripts/build.sh "${sanitize_build[@]}" -- manifest_fuzz service_manifest_fuzz protocol_fuzz \
  protocol_fuzz_seeds simdev
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

corpus="$build"/fuzz-corpus
mkdir -p "$corpus/manifest" "$corpus/service" "$corpus/protocol" "$build"/fuzz-findings
"$build"/simdev/tool/simdev gen --preset tiny --seed 1 --no-golden --force \
  --out "$build"/fuzz-seed-calbin >/dev/null
cp "$build"/fuzz-seed-calbin/manifest.json "$corpus/manifest/tiny.json"
cp tests/calbin/acceptance/tiny-service.yaml "$corpus/service/tiny.yaml"
"$build"/tests/fuzz/protocol_fuzz_seeds "$corpus/protocol"

run() {
  local target=$1 dir=$2
  local log="$build"/fuzz-findings/"$target".log status=0
  "$build"/tests/fuzz/"$target" "$dir" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=10 -max_len=262144 -print_final_stats=1 \
    -artifact_prefix="$build"/fuzz-findings/"$target"- >"$log" 2>&1 || status=$?
  return "$status"
}
report() {
  local target=$1 status=$2
  local log="$build"/fuzz-findings/"$target".log
  echo "fuzz: $target for ${seconds}s"
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY|Done" "$log" || true
  if ((status != 0)); then
    echo "fuzz: $target failed (exit $status); the reproducer is in $build/fuzz-findings/, the log in $log"
  fi
}
echo "fuzz: 3 targets side by side, ${seconds}s each"
declare -A pids
run manifest_fuzz "$corpus/manifest" &
pids[manifest_fuzz]=$!
run service_manifest_fuzz "$corpus/service" &
pids[service_manifest_fuzz]=$!
run protocol_fuzz "$corpus/protocol" &
pids[protocol_fuzz]=$!
failed=0
for target in manifest_fuzz service_manifest_fuzz protocol_fuzz; do
  status=0
  wait "${pids[$target]}" || status=$?
  report "$target" "$status"
  ((status == 0)) || failed=1
done
exit "$failed"
