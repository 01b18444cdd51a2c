// `simdev gen`: writes a calbin directory (and its golden set) for a preset or a config file.
#include <spdlog/spdlog.h>

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

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

// Ctrl-C, a kill or a hang-up while a calbin is generated removes its half-written
// directory, then ends the process by that signal as it would have. The signals go to a
// thread of this object's own (sigwait), where removing a tree is safe, unlike in a handler;
// so it must be made before any other thread starts, which inherits the blocked mask.
class RemoveOnInterrupt {
 public:
  explicit RemoveOnInterrupt(std::filesystem::path path) : path_(std::move(path)) {
    sigset_t blocked;
    sigemptyset(&blocked);
    for (const int signal : {SIGINT, SIGTERM, SIGHUP, kStop}) sigaddset(&blocked, signal);
    pthread_sigmask(SIG_BLOCK, &blocked, &previous_);
    watcher_ = std::thread([this, blocked] {
      int signal = 0;
      while (sigwait(&blocked, &signal) == 0 && signal != kStop) {
        std::error_code error;
        std::filesystem::remove_all(path_, error);
        std::signal(signal, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, signal);
        pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
        ::raise(signal);
      }
    });
  }
  ~RemoveOnInterrupt() {
    pthread_kill(watcher_.native_handle(), kStop);
    watcher_.join();
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

 private:
  static constexpr int kStop = SIGUSR2;  // the destructor's "done", never sent by a user
  std::filesystem::path path_;
  sigset_t previous_{};
  std::thread watcher_;
};

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
  const RemoveOnInterrupt cleanup(gen::staging_dir(options));
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
