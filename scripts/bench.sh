#!/usr/bin/env bash
# Builds the benchmarks in Release and runs them, then prints one summary line each:
#   the host's decode step (D2H, BF16 -> FP32, greedy, top-k), as separate passes and fused
#   into one (runner::read_row_pick), ranking only (runner::rank_row), and the ranking alone
#   with the D2H left to the device's DMA, against a memcpy of the row;
#   Job_Wait's wake-up (paced simulator) by a cancel against a condition-variable handoff,
#   and at the job's completion against a condition variable's timed wait;
#   the event engine's throughput on PHOLD, in events per second at three queue depths.
#   scripts/bench.sh [BUILD_DIR] [-- extra Google Benchmark flags...]
# Default: build-release, 5 repetitions, medians. A loaded machine moves every figure; the
# ratios, measured in the same run, move less.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-release
if (($#)) && [[ "$1" != "--" ]]; then
  build_dir=$1
  shift
fi
[[ "${1:-}" == "--" ]] && shift
flags=(--benchmark_repetitions=5 "$@")

scripts/setup.sh
scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=Release -- calrt_host_bench calrt_wait_bench \
  calrt_engine_bench

out="$build_dir/bench-results"
mkdir -p "$out"
for bench in calrt_host_bench calrt_wait_bench calrt_engine_bench; do
  echo "== $bench"
  "$build_dir/benchmarks/$bench" "${flags[@]}" --benchmark_out="$out/$bench.json" \
    --benchmark_out_format=json
done

python3 - "$out/calrt_host_bench.json" "$out/calrt_wait_bench.json" \
  "$out/calrt_engine_bench.json" <<'EOF'
import json
import sys


def runs(path):
    """name -> run: the median aggregate when the run was repeated, else the run itself."""
    with open(path) as f:
        doc = json.load(f)
    plain, medians = {}, {}
    for b in doc["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
        else:
            plain.setdefault(name, b)
    plain.update(medians)
    return plain


def ns(run, field="real_time"):
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[run.get("time_unit", "ns")]
    return run[field] * scale


host = runs(sys.argv[1])
wait = runs(sys.argv[2])
engine = runs(sys.argv[3])

memcpy = host.get("BM_Memcpy")
steps = [(label, host.get(name)) for label, name in
         (("unfused", "BM_DecodeHostStep"), ("fused", "BM_DecodeHostStepFused"),
          ("rank-only", "BM_DecodeHostStepRankOnly"), ("ranking alone", "BM_RankBf16Row"))]
measured = [(label, step) for label, step in steps if step and not step.get("error_occurred")]
if memcpy and measured:
    # Every step is timed on the same row, so the byte count comes from the first one.
    first = measured[0][1]
    row = first["bytes_per_second"] * ns(first, "cpu_time") / 1e9
    parts = [f"{label} {ns(step) / ns(memcpy):.2f}x ({ns(step) / 1e3:.1f} us; by CPU time "
             f"{ns(step, 'cpu_time') / ns(memcpy, 'cpu_time'):.2f}x)" for label, step in measured]
    done = {label for label, _ in measured}
    parts += [f"{label} not measured" for label, _ in steps if label not in done]
    print(f"host step / memcpy: {', '.join(parts)} "
          f"(BM_Memcpy {ns(memcpy) / 1e3:.1f} us of the same {row:.0f} bytes)")
else:
    print("host step / memcpy: not measured (see the benchmark output above)")



def latency_ratio(title, run_name, floor_name, prefix):
    """The ratio of p50s from the floor samples interleaved in the run, then of the separate
    floor benchmark."""
    run, floor = wait.get(run_name), wait.get(floor_name)
    if not run or run.get("error_occurred"):
        reason = (run or {}).get("error_message", "not run")
        print(f"{title}: not measured ({reason})")
        return
    line = (f"{title} (p50): {run[f'p50_vs_{prefix}']:.2f}x "
            f"({run['p50_ns'] / 1e3:.1f} us vs {run[f'{prefix}_p50_ns'] / 1e3:.1f} us interleaved; "
            f"mean {run['mean_ns'] / 1e3:.1f} us vs {run[f'{prefix}_mean_ns'] / 1e3:.1f} us)")
    if floor and not floor.get("error_occurred"):
        line += (f"; vs the separate {floor_name.split('/')[0]} "
                 f"{run['p50_ns'] / floor['p50_ns']:.2f}x ({floor['p50_ns'] / 1e3:.1f} us)")
    print(line)


latency_ratio("Job_Wait woken by Job_Cancel / condvar handoff", "BM_WaitWakeup/real_time",
              "BM_CondvarHandoff/real_time", "condvar")
latency_ratio("Job_Wait woken by completion / condvar timed wake",
              "BM_WaitCompletion/real_time", "BM_CondvarTimedWake/real_time", "timed")
rates = [(name.split(":")[1], run["items_per_second"]) for name, run in sorted(
    engine.items(), key=lambda kv: int(kv[0].split(":")[1]) if ":" in kv[0] else 0)
    if name.startswith("BM_EnginePhold/") and not run.get("error_occurred")]
print("event engine (PHOLD): " + (", ".join(f"{r / 1e6:.1f}M events/s at depth {d}"
                                            for d, r in rates) or "not measured"))
EOF
