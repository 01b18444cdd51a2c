// `calrt bench --sweep KEY=V1,V2,...` (at most two): design-space exploration in the manner
// of the LLM inference simulators Vidur and LLMCompass. Every point of the keys' product is
// a whole bench run: a bench key (prompt_len, gen_len, concurrency; also given as a list to
// its flag, `--prompt-len 128,256`, as llama-bench takes them) sets that option, any other
// key is a device-config key added to --device-config. The sweep prints one table row per
// point (TTFT, TPOT, end-to-end time and throughput) and writes it as CSV (--csv) and JSON
// (--json).
#pragma once

#include <string>

#include "runner/bench/bench_options.hpp"

namespace runner {

// "KEY=V1,V2,..." into an axis; an error message naming the text when it is not one.
std::string parse_sweep_axis(const std::string& text, BenchOptions::SweepAxis& axis);
// An axis's values are distinct; an error message naming the repeated one.
std::string check_sweep_values(const BenchOptions::SweepAxis& axis);

// Runs every point; returns the process exit code: 0 when every point passed, 1 when one
// failed (its row says why, the others still run), 2 on bad input. Never throws.
int run_bench_sweep(const BenchOptions& options);

}  // namespace runner
