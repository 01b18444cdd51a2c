#include "runner/bench/bench_cli.hpp"

#include "runner/bench/bench.hpp"
#include "runner/bench/bench_sweep.hpp"
#include "runner/core/exit_codes.hpp"

#include <cstdio>

namespace runner {
namespace {

constexpr const char* kFooter =
    "Figures (P50/P90/P95/P99/min/max/mean by nearest rank, sample stddev; warmup runs excluded): "
    "ttft, "
    "admission_wait, prefill_tok_s, tpot, decode_tok_s, e2e_tok_s, e2e_time, request_latency and "
    "the "
    "per-job phases queue/h2d/infer/d2h (prefill and decode apart) and host_wait are read "
    "on the DEVICE clock (virtual time on the simulator); prepare, bf16_to_fp32 and sampling "
    "on the HOST clock (host-wall or host-model). Every definition is in the JSON report.\n"
    "Host time: after each host phase the bench charges its duration to the device clock "
    "(Clock_HostSpend), so that device-clock times include host work and parallel mode can "
    "overlap it with device work. --host-time wall charges what the steady clock measured; "
    "--host-time model charges --host-overhead-ns + ceil(bytes / --host-gbps) with bytes: "
    "prepare = token + position tensor bytes; greedy ranks the BF16 row in place, rank = "
    "logits tensor bytes; top-k: bf16->fp32 = logits tensor bytes + 4 * vocab, sampling = 8 * "
    "vocab. Model mode makes reports and trace "
    "a pure function of the inputs: identical runs give byte-identical files.\n"
    "Parallel mode: two slots (ping/pong), one job in flight per slot; a request has one job "
    "in flight at a time (its KV handle), so only --concurrency 2 or more overlaps anything.\n"
    "Exit codes: 0 pass; 1 a device step failed (runtime error, failed or timed-out job) or "
    "sync and parallel mode produced different logits; 2 usage or bad input (options, the "
    "calbin, a runtime library that cannot be loaded, options the calbin cannot serve such "
    "as more KV than it reserves, an unwritable report path).";

// Choices given as words; finish_bench_options() turns them into the enums.
struct BenchCliWords {
  std::string modes = "both";
  std::string sampling = "greedy";
  std::string host_time = "wall";
  std::vector<std::string> sweep;
  // A list (128,256) is a sweep over that option; one value is the option itself.
  std::vector<uint32_t> prompt_len{128};
  std::vector<uint32_t> gen_len{32};
  std::vector<uint32_t> concurrency{1};
};

void add_bench_options(CLI::App& app, BenchOptions& o, BenchCliWords& words) {
  app.add_option("CALBIN", o.calbin, "calbin directory")->required();
  app.add_option("--prefill-model", o.prefill_model,
                 "exact prefill model name (default: the calbin's only prefill model)");
  app.add_option("--decode-model", o.decode_model,
                 "exact decode model name (default: the calbin's only decode model)");
  app.add_option("--prompt-len", words.prompt_len,
                 "prompt tokens per request, fed in prefill chunks of the calbin's chunk size; "
                 "a list (128,256) sweeps it")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 24))
      ->capture_default_str();
  app.add_option("--gen-len", words.gen_len,
                 "tokens generated per request: the first from the prefill logits, the others "
                 "from gen-len - 1 decode steps; prompt-len + gen-len - 1 must fit the context; "
                 "a list sweeps it")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1u << 24))
      ->capture_default_str();
  app.add_option("--runs", o.runs, "measured runs per mode")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "unmeasured runs per mode before the measured ones")
      ->check(CLI::Range(0u, 1000000u))
      ->capture_default_str();
  app.add_option("--concurrency", words.concurrency,
                 "requests in flight per run, each with its own KV handle; they take turns job "
                 "by job; a list sweeps it")
      ->delimiter(',')
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--mode", words.modes,
                 "sync (one job in flight), parallel (ping/pong slots, two in flight) or both "
                 "(sync, then parallel, compared)")
      ->check(CLI::IsMember({"sync", "parallel", "both"}))
      ->capture_default_str();
  app.add_option("--sampling", words.sampling,
                 "greedy (argmax; what numeric checks use) or top-k (softmax over the k "
                 "largest logits / temperature, seeded)")
      ->check(CLI::IsMember({"greedy", "top-k"}))
      ->capture_default_str();
  app.add_option("--top-k", o.sampling.top_k, "candidates kept by top-k sampling")
      ->check(CLI::Range(1u, 1u << 24))
      ->capture_default_str();
  app.add_option("--temperature", o.sampling.temperature, "top-k sampling temperature (> 0)")
      ->capture_default_str();
  app.add_option("--sampling-seed", o.sampling.seed,
                 "seed of the sampler; each token's draw depends only on (seed, run, request, "
                 "step)")
      ->capture_default_str();
  app.add_option("--seed", o.seed,
                 "seed of the prompts: token ids uniform in [0, vocab) per (seed, run, request)")
      ->capture_default_str();
  app.add_option("--host-time", words.host_time,
                 "wall (measure host phases) or model (charge the modelled time; "
                 "deterministic); see below")
      ->check(CLI::IsMember({"wall", "model"}))
      ->capture_default_str();
  app.add_option("--host-gbps", o.host_model.gbps,
                 "host memory bandwidth of the host-time model, GB/s (> 0)")
      ->capture_default_str();
  app.add_option("--host-overhead-ns", o.host_model.overhead_ns,
                 "fixed cost of each host phase in the host-time model, ns")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1000000000}))
      ->capture_default_str();
  app.add_option("--json", o.json,
                 "write the JSON report (calrt-bench/3; a sweep calrt-bench-sweep/4) atomically")
      ->check(output_path());
  app.add_option("--csv", o.csv,
                 "write the CSV report atomically: schema,tool_version,commit,command_line, then "
                 "mode,metric,clock,unit,count,min,p50,p90,p95,p99,max,mean,stddev")
      ->check(output_path());
  app.add_option("--md", o.md,
                 "write the figures as markdown tables (a sweep: its points), for pasting into a "
                 "review")
      ->check(output_path());
  app.add_option("--jsonl", o.jsonl,
                 "stream one JSON line per measured run (a sweep: per point) as it finishes, then "
                 "a summary line; `-` for stdout (the human lines then go to stderr)")
      ->check(output_path());
  app.add_option("--trace", o.trace,
                 "write a Chrome trace event JSON timeline (Perfetto, chrome://tracing): one "
                 "track per chip, PCIe H2D/D2H, D2D, queue, and the host")
      ->check(output_path());
  app.add_option_function<std::string>(
         "--trace-runs", [&o](const std::string& runs) { o.trace_warmup = runs == "all"; },
         "all, or measured: leave the warm-up runs out of the trace")
      ->check(CLI::IsMember({"all", "measured"}))
      ->default_str("all");
  app.add_option_function<std::string>(
         "--trace-level", [&o](const std::string& level) { o.trace_layers = level == "layer"; },
         "layer (every segment of every layer), or job: one slice per job and track, for long "
         "prompts")
      ->check(CLI::IsMember({"layer", "job"}))
      ->default_str("layer");
  app.add_flag("--d2d-spans", o.d2d_spans,
               "record each D2D reduction's size and time from the device trace into the JSON "
               "report (d2d_spans, what calrt calibrate fits the die-to-die link to)");
  app.add_option("--trace-max-events", o.trace_max_events,
                 "device events the bench keeps for the trace; later ones are counted, not kept "
                 "(bounds the bench's memory)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
  app.add_option("--trace-capacity", o.trace_capacity,
                 "device trace buffer in events (0: the runtime's default); drained after "
                 "every job")
      ->capture_default_str();
  app.add_flag("!--quiet", o.progress, "no progress line on a terminal");
  add_shard_option(app, o.shard, "sweep points");
  app.add_option("--sweep", words.sweep,
                 "KEY=V1,V2,...: run the whole bench at every value of a device-config key "
                 "(pcie_lanes, d2d_bw_mbps, dram_bw_mbps, ...; simdev/device/README.md); twice for "
                 "the product of two keys. --csv and --json then hold one row per point: TTFT, "
                 "TPOT and end-to-end time and throughput")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--timeout-ms,--timeout", o.timeout_ms,
                 "bound of every device wait, ms (device time for the simulator)")
      ->check(CLI::Range(1u, 3600000u))
      ->capture_default_str();
  app.footer(kFooter);
}

void finish_bench_options(BenchOptions& o, const BenchCliWords& words) {
  o.modes = words.modes == "sync"       ? BenchModes::sync
            : words.modes == "parallel" ? BenchModes::parallel
                                        : BenchModes::both;
  o.sampling.method = words.sampling == "top-k" ? SamplingMethod::top_k : SamplingMethod::greedy;
  o.host_time = words.host_time == "model" ? HostTimeMode::model : HostTimeMode::wall;
}

class BenchCommand : public Command {
 public:
  explicit BenchCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "bench",
            "timing: TTFT, prefill/decode/end-to-end tok/s, TPOT and the per-job phases as "
            "P50/P95/P99 and stddev, in sync and parallel mode; JSON/CSV reports and a Chrome "
            "trace")) {
    add_device_options(*app_, {&options_.device, &options_.device_kind, &options_.device_index,
                               &options_.device_config});
    add_bench_options(*app_, options_, words_);
  }

  int run(int /*argc*/, char** /*argv*/) override {
    finish_bench_options(options_, words_);
    for (const auto& [key, values, field] :
         {std::tuple{"prompt_len", &words_.prompt_len, &options_.prompt_len},
          std::tuple{"gen_len", &words_.gen_len, &options_.gen_len},
          std::tuple{"concurrency", &words_.concurrency, &options_.concurrency}}) {
      *field = values->front();  // CLI11 requires at least one value
      if (values->size() > 1) {
        BenchOptions::SweepAxis axis{key, {}};
        for (const uint32_t v : *values) axis.values.push_back(std::to_string(v));
        if (std::string problem = check_sweep_values(axis); !problem.empty()) {
          std::fprintf(stderr, "calrt bench: bad input: %s\n", problem.c_str());
          return kExitUsage;
        }
        options_.sweep.push_back(std::move(axis));
      }
    }
    for (const std::string& text : words_.sweep) {
      BenchOptions::SweepAxis axis;
      if (std::string problem = parse_sweep_axis(text, axis); !problem.empty()) {
        std::fprintf(stderr, "calrt bench: bad input: %s\n", problem.c_str());
        return kExitUsage;
      }
      options_.sweep.push_back(std::move(axis));
    }
    if (options_.shard && options_.sweep.empty()) {
      std::fprintf(stderr,
                   "calrt bench: bad input: --shard splits a sweep's points: give --sweep or a "
                   "list (--prompt-len 128,256)\n");
      return kExitUsage;
    }
    return options_.sweep.empty() ? run_bench(options_) : run_bench_sweep(options_);
  }

 private:
  BenchOptions options_;
  BenchCliWords words_;
};

}  // namespace

std::unique_ptr<Command> add_bench_command(CLI::App& calrt) {
  return std::make_unique<BenchCommand>(calrt);
}

}  // namespace runner
