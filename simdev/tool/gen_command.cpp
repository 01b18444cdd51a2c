// `simdev gen`: writes a calbin directory (and its golden set) for a preset or a config file.
#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

#include "simdev/gen/generate.hpp"
#include "simdev/tool/command.hpp"

namespace simdev::tool {
namespace {

std::string joined_command_line(int argc, char** argv) {
  std::string command = "simdev";
  for (int i = 1; i < argc; ++i) {
    command += " ";
    command += argv[i];
  }
  return command;
}

int run_gen(const gen::GenOptions& options) {
  // The seed and every derived option come first, so any run can be replayed from its log.
  spdlog::info("gen: {} seed={} out={} golden={} long_cases={} force={}",
               options.config_file.empty() ? "preset=" + options.preset
                                           : "config=" + options.config_file.string(),
               options.seed, options.out_dir.string(), options.with_golden, options.long_cases,
               options.force);
  if (auto checked = gen::check_gen_options(options); !checked) {
    spdlog::error("gen: {}", checked.error().to_string());
    return kExitUsage;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto manifest = gen::generate(options);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (!manifest) {
    spdlog::error("gen failed: {}", manifest.error().to_string());
    spdlog::error("replay with: {}", options.command_line);
    return kExitFail;
  }
  spdlog::info("wrote {} ({} models, {} weight shards, {} files) in {:.2f} s",
               options.out_dir.string(), manifest->models.size(), manifest->weights.size(),
               manifest->files.size(), elapsed.count());
  return kExitPass;
}

class GenCommand : public Command {
 public:
  explicit GenCommand(CLI::App& simdev)
      : Command(simdev.add_subcommand("gen", "write a calbin directory for a preset")) {
    gen::GenOptions& o = options_;
    CLI::Option* preset_option =
        app_->add_option("--preset", o.preset, "preset name (see `simdev presets`)")
            ->capture_default_str();
    app_->add_option("--config", o.config_file,
                     "the model from a file instead: a Hugging Face config.json (qwen3, "
                     "qwen3_moe, llama) or the project's YAML (simdev/gen/README.md)")
        ->excludes(preset_option);
    app_->add_option("--weights", o.weights_dir,
                     "with --config: the weights from this Hugging Face checkpoint directory "
                     "(model.safetensors, or shards and model.safetensors.index.json; F32, "
                     "BF16, F16) instead of seeded ones");
    app_->add_option("--out", out_dir_, "output calbin directory")->required();
    app_->add_option("--seed", o.seed, "master seed of weights and golden prompts")
        ->capture_default_str();
    app_->add_flag("--no-golden", no_golden_, "skip the golden set");
    app_->add_flag("--no-long", no_long_, "skip the long golden prompts (4095 tokens and up)");
    app_->add_flag("--force", o.force, "replace the output directory if it exists");
    app_->add_option("--threads", o.threads, "golden threads (0: all cores)")
        ->capture_default_str();
    app_->add_option("--decode-top-k", o.decode_top_k,
                     "a decode that ranks on the device: each row gives its K best token ids "
                     "and their logits instead of the full row (the model's decode_top_k)")
        ->check(CLI::Range(1u, 1u << 30));
  }

  int run(int argc, char** argv) override {
    options_.out_dir = out_dir_;
    options_.with_golden = !no_golden_;
    options_.long_cases = !no_long_;
    options_.command_line = joined_command_line(argc, argv);
    return run_gen(options_);
  }

 private:
  gen::GenOptions options_;
  std::string out_dir_;
  bool no_golden_ = false;
  bool no_long_ = false;
};

}  // namespace

std::unique_ptr<Command> add_gen_command(CLI::App& simdev) {
  return std::make_unique<GenCommand>(simdev);
}

}  // namespace simdev::tool
