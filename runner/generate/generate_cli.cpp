#include "runner/generate/generate_cli.hpp"

#include "runner/generate/generate.hpp"

namespace runner {
namespace {

class GenerateCommand : public Command {
 public:
  explicit GenerateCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "generate",
            "one request through the LLM adapter (calrt::llm): tokens in, tokens out as JSONL")) {
    GenerateOptions& o = options_;
    app_->add_option("CALBIN", o.calbin, "calbin directory")->required();
    app_->add_option("--manifest", o.manifest,
                     "the service manifest (YAML) checked against the calbin at start-up "
                     "(default: one derived from the calbin's own manifest)");
    app_->add_option("--tokens", o.tokens, "the prompt's token ids, comma-separated: 1,2,3")
        ->required();
    app_->add_option("--max-new", o.max_new, "tokens to generate")
        ->check(CLI::Range(1u, 1u << 20))
        ->capture_default_str();
    app_->add_option("--sampling", o.sampling, "greedy or top-k")
        ->check(CLI::IsMember({"greedy", "top-k"}))
        ->capture_default_str();
    app_->add_option("--top-k", o.top_k, "candidates kept by top-k sampling")
        ->check(CLI::Range(1u, 1u << 24))
        ->capture_default_str();
    app_->add_option("--top-p", o.top_p, "nucleus of the top-k candidates, in (0, 1]")
        ->check(finite_range(1e-9, 1.0))
        ->capture_default_str();
    app_->add_option("--temperature", o.temperature, "divides the logits before the softmax")
        ->check(finite_range(1e-6, 1e6))
        ->capture_default_str();
    app_->add_option("--seed", o.seed, "sampling seed (the same seed, the same tokens)")
        ->capture_default_str();
    app_->add_option("--context-shift", o.context_shift_keep,
                     "N_KEEP: at n_ctx keep the first N_KEEP tokens, drop the oldest half of the "
                     "rest and prefill again (default: a request past n_ctx is refused)");
    app_->add_flag("--logits", o.logits, "each token line carries the row's best 5 ids and logits");
    app_->add_flag("!--no-parallel", o.parallel,
                   "one job in flight instead of two on the ping/pong slots");
    app_->add_option("--timeout-ms", o.timeout_ms,
                     "bound of every device wait (device time for the simulator)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    add_device_options(*app_, {&o.device, &o.device_kind, &o.device_index, &o.device_config});
    app_->footer(
        "Output (stdout, JSONL): a start line (n_ctx, n_batch, vocab), one line per token (step, "
        "token, row, slot, ms since submit), then a done or error line with the tokens, the "
        "request's timings and its resource ledger. Exit codes: 0 completed; 1 the request or "
        "the device failed, or the calbin failed its start-up contract check; 2 bad input (an "
        "option's value, a token outside the vocabulary, a missing calbin or manifest).");
  }
  int run(int /*argc*/, char** /*argv*/) override { return run_generate(options_); }

 private:
  GenerateOptions options_;
};

}  // namespace

std::unique_ptr<Command> add_generate_command(CLI::App& calrt) {
  return std::make_unique<GenerateCommand>(calrt);
}

}  // namespace runner
