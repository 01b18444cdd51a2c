#include "simdev/gen/generate.hpp"

#include <unistd.h>

#include <string>
#include <system_error>

#include "simdev/gen/config_file.hpp"
#include "simdev/gen/functional_calbin.hpp"
#include "simdev/gen/preset_table.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;

std::string known_presets() {
  std::string names;
  for (const PresetEntry& entry : preset_table()) {
    names += names.empty() ? "" : ", ";
    names += entry.name;
  }
  return names;
}

// --decode-top-k against the model it changes.
calbin::Result<void> check_overrides(const GenOptions& options, ModelConfig config) {
  if (options.decode_top_k == 0) {
    return {};
  }
  config.decode_top_k = options.decode_top_k;
  if (auto checked = check_config(config); !checked) {
    return calbin::fail("", "--decode-top-k", checked.error().message);
  }
  return {};
}

calbin::Result<void> check_options(const GenOptions& options) {
  if (!options.weights_dir.empty() && options.config_file.empty()) {
    return calbin::fail("", "--weights", "needs --config: the weights' model config");
  }
  if (!options.config_file.empty()) {
    auto config = read_model_config(options.config_file);
    if (!config) {
      return tl::unexpected(config.error());
    }
    if (auto ok = check_overrides(options, *config); !ok) return ok;
    if (!options.weights_dir.empty() && config->architecture == "llama") {
      return calbin::fail(options.config_file.string(), "model_type",
                          "'llama': its checkpoints have no q_norm/k_norm, which the device's "
                          "attention applies (calbin/MODEL.md); --weights reads qwen3");
    }
    if (!options.weights_dir.empty()) {
      // Headers, names and shapes before any work: bad weights are bad input (exit 2).
      auto checkpoint = SafetensorsDir::open(options.weights_dir);
      if (!checkpoint) return tl::unexpected(checkpoint.error());
      if (auto ok = check_checkpoint(*config, *checkpoint); !ok) {
        calbin::Error error = ok.error();
        if (error.file.empty()) error.file = options.weights_dir.string();
        return tl::unexpected(error);
      }
    }
  } else if (const PresetEntry* preset = find_preset(options.preset); preset == nullptr) {
    return calbin::fail("", "--preset",
                        "unknown preset '" + options.preset + "' (known: " + known_presets() + ")");
  } else if (auto ok = check_overrides(options, preset->config()); !ok) {
    return ok;
  }
  if (options.out_dir.empty() || !options.out_dir.has_filename()) {
    return calbin::fail(
        "", "--out",
        "the output directory '" + options.out_dir.string() + "' must name a directory");
  }
  std::error_code error;
  if (fs::exists(options.out_dir, error) && !options.force) {
    return calbin::fail(options.out_dir.string(), "",
                        "the output directory already exists (use --force to replace it)");
  }
  return {};
}

calbin::Result<calbin::Manifest> build_from_config(const GenOptions& options, const fs::path& dir) {
  auto config = read_model_config(options.config_file);
  if (!config) return tl::unexpected(config.error());
  return build_functional(*config, options, dir);
}

// "out/" and "out" name the same directory; the temporary sibling needs the latter.
GenOptions normalized(const GenOptions& requested) {
  GenOptions options = requested;
  options.out_dir = options.out_dir.lexically_normal();
  if (!options.out_dir.has_filename() && options.out_dir.has_parent_path()) {
    options.out_dir = options.out_dir.parent_path();
  }
  return options;
}

fs::path sibling(const fs::path& out_dir, const std::string& suffix) {
  fs::path path = out_dir;
  path += suffix + std::to_string(::getpid());
  return path;
}

// Moves a finished directory into place. An existing out_dir is first moved aside, so that
// out_dir names either the old or the new calbin at every instant.
calbin::Result<void> publish(const fs::path& tmp, const fs::path& out_dir) {
  std::error_code error;
  const fs::path old = sibling(out_dir, ".old-");
  const bool replacing = fs::exists(out_dir, error);
  if (replacing) {
    fs::remove_all(old, error);
    fs::rename(out_dir, old, error);
    if (error) {
      return calbin::fail(out_dir.string(), "", "cannot move aside: " + error.message());
    }
  }
  fs::rename(tmp, out_dir, error);
  if (error) {
    return calbin::fail(out_dir.string(), "", "cannot rename into place: " + error.message());
  }
  if (replacing) {
    fs::remove_all(old, error);
  }
  return {};
}

}  // namespace

std::vector<PresetInfo> presets() {
  std::vector<PresetInfo> out;
  for (const PresetEntry& entry : preset_table()) {
    out.push_back({std::string(entry.name), std::string(entry.description), entry.functional});
  }
  return out;
}

calbin::Result<void> check_gen_options(const GenOptions& options) {
  return check_options(normalized(options));
}

fs::path staging_dir(const GenOptions& options) {
  return sibling(normalized(options).out_dir, ".tmp-");
}

calbin::Result<calbin::Manifest> generate(const GenOptions& requested) {
  const GenOptions options = normalized(requested);
  if (auto checked = check_options(options); !checked) {
    return tl::unexpected(checked.error());
  }
  const fs::path tmp = staging_dir(options);
  std::error_code error;
  fs::remove_all(tmp, error);
  fs::create_directories(tmp, error);
  if (error) {
    return calbin::fail(tmp.string(), "", "cannot create: " + error.message());
  }
  auto manifest = options.config_file.empty() ? find_preset(options.preset)->build(options, tmp)
                                              : build_from_config(options, tmp);
  if (!manifest) {
    fs::remove_all(tmp, error);
    return manifest;
  }
  if (auto published = publish(tmp, options.out_dir); !published) {
    fs::remove_all(tmp, error);
    return tl::unexpected(published.error());
  }
  return manifest;
}

}  // namespace simdev::gen
