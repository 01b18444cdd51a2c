#!/usr/bin/env bash
# The simulator's functional prefill and decode against llama.cpp's CPU build, on one model
# shape, in one run (benchmarks/README.md, "Side by side with llama.cpp"):
#   benchmarks/llama_cpp/side_by_side.sh [--config FILE] [--seed N] [--layers N]
#       [--build-dir DIR] [--threads N] [--prompt-short N] [--prompt-long N]
#       [--gen-short N] [--gen-long N] [--reps N] [--sim-reps N] [--no-build]
# Defaults: simdev/gen/configs/qwen3-0.6b-shape.json, seed 11, the config's layers,
# build-release (Release; built when missing or stale, under nice), 2 threads, prompts of 512
# against 64 tokens, 66 against 2 generated tokens (64 decode steps), each side's times
# medians of 3.
# 1. writes the shape as a GGUF with Q8_0 weights of seeded random values (make_gguf.py) and
#    `simdev gen --no-golden` the calbin from the same config; both are kept in
#    BUILD_DIR/llama_cpp_side_by_side/ and reused while their inputs are the same;
# 2. installs node-llama-cpp (its prebuilt CPU binaries) with `npm ci` from package-lock.json
#    into BUILD_DIR/llama_cpp_node/, once per lock file;
# 3. times llama.cpp (llama_bench.mjs), then `calrt bench` on the simulated device;
# 4. prints both sides' tokens/s and the ratios, and warns when the machine was not idle.
# No figure is checked against a bound: this measures, it does not test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

config=simdev/gen/configs/qwen3-0.6b-shape.json
seed=11
layers=""
build_dir="build-release"
threads=2
prompt_short=64
prompt_long=512
gen_short=2
gen_long=66
reps=3
sim_reps=3
build=1

die() {
  echo "side_by_side: $*" >&2
  exit 2
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
need_int() {
  [[ "$2" =~ ^[0-9]+$ ]] || die "$1 takes a whole number, not '$2'"
}

while (($#)); do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --no-build)
      build=0
      shift
      continue
      ;;
    --config | --seed | --layers | --build-dir | --threads | --prompt-short | --prompt-long | \
      --gen-short | --gen-long | --reps | --sim-reps)
      (($# >= 2)) || die "$1 needs a value"
      ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
  case "$1" in
    --config) config=$2 ;;
    --seed) need_int "$1" "$2" && seed=$2 ;;
    --layers) need_int "$1" "$2" && layers=$2 ;;
    --build-dir) build_dir=$2 ;;
    --threads) need_int "$1" "$2" && threads=$2 ;;
    --prompt-short) need_int "$1" "$2" && prompt_short=$2 ;;
    --prompt-long) need_int "$1" "$2" && prompt_long=$2 ;;
    --gen-short) need_int "$1" "$2" && gen_short=$2 ;;
    --gen-long) need_int "$1" "$2" && gen_long=$2 ;;
    --reps) need_int "$1" "$2" && reps=$2 ;;
    --sim-reps) need_int "$1" "$2" && sim_reps=$2 ;;
  esac
  shift 2
done
((prompt_long > prompt_short && gen_long > gen_short && gen_short >= 1 && reps >= 1 &&
  sim_reps >= 1)) || die "need --prompt-long > --prompt-short, --gen-long > --gen-short >= 1" \
  "and --reps, --sim-reps >= 1"

# What the run needs, named when missing.
python=/usr/bin/python3
[[ -x $python ]] || die "missing $python (Debian's python3, which has numpy)"
"$python" -c 'import numpy' 2>/dev/null ||
  die "$python has no numpy: apt-get install python3-numpy (scripts/setup.sh installs it)"
command -v node >/dev/null || die "missing node (Node.js 20 or later) for llama.cpp's side"
command -v npm >/dev/null || die "missing npm, which installs node-llama-cpp"
[[ -f $config ]] || die "no config file '$config'"
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")

# The idle check comes first, before this script loads the machine itself.
idle_warnings=0
"$python" "$here/sbs.py" idle --seconds 2 || idle_warnings=1

calrt=$build_dir/runner/calrt
simdev=$build_dir/simdev/tool/simdev
if ((build)); then
  echo "building calrt and simdev in $build_dir (Release, nice -n 10)"
  nice -n 10 scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=Release -- calrt simdev calrt_kernel_bench \
    >"${TMPDIR:-/tmp}/side_by_side_build.$$.log" 2>&1 || {
    tail -30 "${TMPDIR:-/tmp}/side_by_side_build.$$.log" >&2
    die "the build of $build_dir failed (the lines above)"
  }
  rm -f "${TMPDIR:-/tmp}/side_by_side_build.$$.log"
fi
[[ -x $calrt && -x $simdev ]] || die "no $calrt or $simdev: build them, or leave out --no-build"
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)
[[ $build_type == Release ]] ||
  echo "WARNING: $build_dir is a '${build_type:-unknown}' build, not Release"

work=$build_dir/llama_cpp_side_by_side
mkdir -p "$work"

# node-llama-cpp with its prebuilt binaries: --omit=optional leaves out the GPU builds (the
# CPU one is a direct dependency), --ignore-scripts its postinstall, which would try to
# download or build llama.cpp when no prebuilt binary fits.
node_dir=$build_dir/llama_cpp_node
lock_sum=$(sha256sum "$here/package-lock.json" "$here/package.json" | sha256sum | cut -c1-16)
if [[ "$(cat "$node_dir/node_modules/.side_by_side_lock" 2>/dev/null)" != "$lock_sum" ]]; then
  echo "installing node-llama-cpp into $node_dir (npm ci)"
  mkdir -p "$node_dir"
  cp "$here/package.json" "$here/package-lock.json" "$node_dir/"
  (cd "$node_dir" && npm ci --ignore-scripts --omit=optional --no-audit --no-fund >/dev/null) ||
    die "npm ci in $node_dir failed: is the npm registry reachable?"
  echo "$lock_sum" >"$node_dir/node_modules/.side_by_side_lock"
fi

# The same shape on both sides: the GGUF from the config, the calbin from the config or, with
# --layers, from a YAML on top of it (simdev/gen/README.md).
layer_args=()
[[ -n $layers ]] && layer_args=(--layers "$layers")
echo "writing the GGUF (Q8_0, seed $seed) unless it is there"
gguf=$(nice -n 10 "$python" "$here/make_gguf.py" --config "$config" --seed "$seed" \
  "${layer_args[@]}" --out-dir "$work") || die "make_gguf.py failed"
read -r vocab config_layers < <("$python" -c 'import json, sys
c = json.load(open(sys.argv[1]))
print(c["vocab_size"], c["num_hidden_layers"])' "$config") ||
  die "$config: no vocab_size or num_hidden_layers"
shape_name=$(basename "$config" .json)-L${layers:-$config_layers}
sim_config=$config
if [[ -n $layers ]]; then
  sim_config=$work/$shape_name.yaml
  printf 'name: %s\nhf_config: %s\nlayers: %s\n' "$shape_name" "$config" "$layers" \
    >"$sim_config"
fi
calbin_key=$(cat "$sim_config" "$config" "$simdev" <(echo "seed $seed") | sha256sum | cut -c1-12)
calbin=$work/$shape_name-seed$seed-$calbin_key
if [[ ! -f $calbin/.side_by_side_done ]]; then
  echo "simdev gen --no-golden: $calbin"
  rm -rf "$calbin"
  nice -n 10 "$simdev" gen --config "$sim_config" --seed "$seed" --no-golden --out "$calbin" \
    >"$work/gen.log" 2>&1 || {
    tail -20 "$work/gen.log" >&2
    die "simdev gen failed (the lines above; $work/gen.log)"
  }
  touch "$calbin/.side_by_side_done"
fi
# Earlier files of the same shape and seed (another writer, another simdev) are stale.
for old in "$work/$shape_name-seed$seed-"*; do
  [[ $old == "$calbin" || $old == "$gguf" ]] || rm -rf "$old"
done

echo "== llama.cpp: $gguf"
run=$work/run
rm -rf "$run"
mkdir -p "$run"
"$python" "$here/sbs.py" timed --out "$run/llama-timing.json" -- \
  node "$here/llama_bench.mjs" --modules "$node_dir" --model "$gguf" --vocab "$vocab" \
  --threads "$threads" --prompt-short "$prompt_short" --prompt-long "$prompt_long" \
  --gen-short "$gen_short" --gen-long "$gen_long" --reps "$reps" --seed "$seed" \
  >"$run/llama.out" || die "llama_bench.mjs failed (its messages above)"
tail -1 "$run/llama.out" >"$run/llama.json"

echo "== simulator: calrt bench $calbin"
bench() { # NAME PROMPT GEN
  local i
  for ((i = 0; i < sim_reps; i++)); do
    "$python" "$here/sbs.py" timed --out "$run/$1.json" --log "$run/$1.log" \
      --label "prompt $2, gen $3" -- \
      "$calrt" bench "$calbin" --device sim --device-config "host_threads=$threads" \
      --prompt-len "$2" --gen-len "$3" --runs 1 --warmup 0 --mode sync --seed "$seed" || {
      tail -20 "$run/$1.log" >&2
      die "calrt bench at prompt $2, gen $3 failed (the lines above; $run/$1.log)"
    }
  done
}
bench base "$prompt_short" "$gen_short"
bench prefill "$prompt_long" "$gen_short"
bench decode "$prompt_short" "$gen_long"

# The machine's read bandwidth on as many threads, the bound of a decode step.
read_bench=$build_dir/benchmarks/calrt_kernel_bench
read_json=""
if [[ -x $read_bench ]]; then
  echo "== memory read bandwidth: calrt_kernel_bench BM_MemoryRead"
  "$read_bench" --benchmark_filter="BM_MemoryRead/.*threads:$threads\$" \
    --benchmark_out="$run/memory_read.json" --benchmark_out_format=json >/dev/null ||
    die "calrt_kernel_bench BM_MemoryRead failed"
  read_json="$run/memory_read.json"
fi

"$python" "$here/sbs.py" report --llama "$run/llama.json" --llama-timing "$run/llama-timing.json" \
  --sim-dir "$run" --shape "$shape_name (seed $seed)" --build-type "${build_type:-unknown}" \
  --threads "$threads" --prompt-short "$prompt_short" --prompt-long "$prompt_long" \
  --gen-short "$gen_short" --gen-long "$gen_long" --idle-warnings "$idle_warnings" \
  --calbin "$calbin" ${read_json:+--memory-read "$read_json"}
