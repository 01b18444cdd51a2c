// `simdev`: the simulated device's own tool. main only parses arguments and dispatches.
#include <chrono>
#include <cstdio>
#include <string>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "simdev/gen/generate.hpp"

namespace {

std::string joined_command_line(int argc, char** argv) {
  std::string command = "simdev";
  for (int i = 1; i < argc; ++i) {
    command += " ";
    command += argv[i];
  }
  return command;
}

int run_gen(simdev::gen::GenOptions options) {
  // The seed and every derived option come first, so any run can be replayed from its log.
  spdlog::info("gen: preset={} seed={} out={} golden={} long_cases={} force={}", options.preset,
               options.seed, options.out_dir.string(), options.with_golden, options.long_cases,
               options.force);
  const auto start = std::chrono::steady_clock::now();
  const auto manifest = simdev::gen::generate(options);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (!manifest) {
    spdlog::error("gen failed: {}", manifest.error().to_string());
    spdlog::error("replay with: {}", options.command_line);
    return 1;
  }
  spdlog::info("wrote {} ({} models, {} weight shards, {} files) in {:.2f} s",
               options.out_dir.string(), manifest->models.size(), manifest->weights.size(),
               manifest->files.size(), elapsed.count());
  return 0;
}

int run_presets() {
  for (const auto& preset : simdev::gen::presets()) {
    std::printf("%-16s %-11s %s\n", preset.name.c_str(),
                preset.functional ? "functional" : "timing", preset.description.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"simdev: the simulated Calculet NPU's tool"};
  app.require_subcommand(1);

  simdev::gen::GenOptions gen_options;
  std::string out_dir;
  bool no_golden = false;
  bool no_long = false;
  CLI::App* gen = app.add_subcommand("gen", "write a calbin directory for a preset");
  gen->add_option("--preset", gen_options.preset, "preset name (see `simdev presets`)")
      ->capture_default_str();
  gen->add_option("--out", out_dir, "output calbin directory")->required();
  gen->add_option("--seed", gen_options.seed, "master seed of weights and golden prompts")
      ->capture_default_str();
  gen->add_flag("--no-golden", no_golden, "skip the golden set");
  gen->add_flag("--no-long", no_long, "skip the long golden prompts (4095 tokens and up)");
  gen->add_flag("--force", gen_options.force, "replace the output directory if it exists");
  gen->add_option("--threads", gen_options.threads, "golden threads (0: all cores)")
      ->capture_default_str();

  CLI::App* list = app.add_subcommand("presets", "list the presets gen knows");

  CLI11_PARSE(app, argc, argv);

  if (gen->parsed()) {
    gen_options.out_dir = out_dir;
    gen_options.with_golden = !no_golden;
    gen_options.long_cases = !no_long;
    gen_options.command_line = joined_command_line(argc, argv);
    return run_gen(gen_options);
  }
  if (list->parsed()) {
    return run_presets();
  }
  return 2;
}
