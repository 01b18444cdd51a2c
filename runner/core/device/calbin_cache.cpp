#include "runner/core/device/calbin_cache.hpp"

#include <cstdio>
#include <system_error>

#if CALRT_HAVE_SIMDEV_GEN
#include "simdev/gen/generate.hpp"
#endif

namespace runner {
namespace {

std::string how_to_generate(const std::string& preset, const std::filesystem::path& dir) {
  return "generate it with: simdev gen --preset " + preset + " --out " + dir.string() +
         " --no-long";
}

// Makes the calbin when this build can. Another process may be making the same one at the
// same time; the generator publishes a directory only when complete, so losing that race
// is fine as long as the directory exists afterwards.
std::string generate_if_missing(const std::string& preset, const std::filesystem::path& dir,
                                const std::string& command) {
  std::error_code error;
  if (std::filesystem::exists(dir, error)) {
    return {};
  }
#if CALRT_HAVE_SIMDEV_GEN
  std::filesystem::create_directories(dir.parent_path(), error);
  std::fprintf(stderr, "%s: generating calbin %s in %s\n", command.c_str(), preset.c_str(),
               dir.c_str());
  simdev::gen::GenOptions options;
  options.preset = preset;
  options.out_dir = dir;
  options.seed = 1;
  options.long_cases = false;
  const auto made = simdev::gen::generate(options);
  if (!made && !std::filesystem::exists(dir, error)) {
    return dir.string() + ": cannot generate calbin preset '" + preset +
           "': " + made.error().to_string();
  }
  return {};
#else
  (void)command;
  return dir.string() + ": no calbin for preset '" + preset +
         "' (this calrt cannot generate one); " + how_to_generate(preset, dir);
#endif
}

}  // namespace

tl::expected<const ScenarioCalbin*, std::string> CalbinStore::get(const std::string& preset) {
  if (auto found = loaded_.find(preset); found != loaded_.end()) {
    return found->second.get();
  }
  const std::filesystem::path dir = dir_ / preset;
  if (std::string error = generate_if_missing(preset, dir, command_); !error.empty()) {
    return tl::unexpected(error);
  }
  SmokeOptions options;
  options.calbin = dir;
  options.cases = "all";
  auto inputs = load_host_inputs(options);
  if (!inputs) {
    return tl::unexpected(inputs.error() + " (calbin preset '" + preset + "'; " +
                          how_to_generate(preset, dir) + ")");
  }
  auto calbin = std::make_unique<ScenarioCalbin>();
  calbin->dir = dir;
  calbin->inputs = std::move(*inputs);
  const ScenarioCalbin* out = calbin.get();
  loaded_.emplace(preset, std::move(calbin));
  return out;
}

}  // namespace runner
