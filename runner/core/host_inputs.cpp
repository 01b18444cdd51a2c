#include "runner/core/host_inputs.hpp"

#include <sstream>
#include <system_error>

namespace runner {
namespace {

using Unexpected = tl::unexpected<std::string>;

// Every tensor's declared buffer bytes must hold its shape in its dtype and layout; the
// device would otherwise read or write past the buffer.
std::string check_tensor_sizes(const std::filesystem::path& calbin_dir,
                               const calbin::Manifest& manifest) {
  const std::string file = (calbin_dir / calbin::kManifestFileName).string();
  for (size_t m = 0; m < manifest.models.size(); ++m) {
    const calbin::Model& model = manifest.models[m];
    for (const char* kind : {"inputs", "outputs"}) {
      const auto& tensors = std::string(kind) == "inputs" ? model.inputs : model.outputs;
      for (size_t t = 0; t < tensors.size(); ++t) {
        const auto needed =
            calbin::tensor_bytes(tensors[t].shape, tensors[t].dtype, tensors[t].layout);
        std::ostringstream field;
        field << "models[" << m << "]." << kind << "[" << t << "].bytes";
        if (!needed) {
          return file + ": " + field.str() + ": the size of tensor " + tensors[t].name +
                 " overflows";
        }
        if (*needed > tensors[t].bytes) {
          return file + ": " + field.str() + ": tensor " + tensors[t].name + " of model " +
                 model.name + " needs " + std::to_string(*needed) + " bytes, its buffer has " +
                 std::to_string(tensors[t].bytes);
        }
      }
    }
  }
  return {};
}

// The golden index to read: --golden DIR's golden.json, else the file the manifest names
// (golden.index), whatever its name.
tl::expected<std::filesystem::path, std::string> golden_index_of(const SmokeOptions& options,
                                                                 const calbin::Manifest& manifest) {
  if (options.golden) {
    return *options.golden / calbin::kGoldenIndexName;
  }
  if (!manifest.golden || manifest.golden->index.empty()) {
    return Unexpected((options.calbin / calbin::kManifestFileName).string() +
                      ": golden: the calbin has no golden set; pass --golden DIR");
  }
  auto index = calbin::resolve_inside(options.calbin, manifest.golden->index);
  if (!index) {
    return Unexpected(index.error().to_string());
  }
  return *index;
}

// Resolves --cases against the golden set: "short", "all" or a comma-separated list of
// exact case names.
tl::expected<std::vector<size_t>, std::string> select_cases(const std::string& spec,
                                                            const calbin::GoldenSet& golden,
                                                            const std::filesystem::path& dir) {
  std::vector<size_t> out;
  if (spec == "short" || spec == "all") {
    for (size_t i = 0; i < golden.cases.size(); ++i) {
      if (spec == "all" || !golden.cases[i].long_case) {
        out.push_back(i);
      }
    }
  } else {
    std::stringstream names(spec);
    std::string name;
    while (std::getline(names, name, ',')) {
      size_t i = 0;
      while (i < golden.cases.size() && golden.cases[i].name != name) {
        ++i;
      }
      if (i == golden.cases.size()) {
        std::string known;
        for (const auto& c : golden.cases) {
          known += (known.empty() ? "" : ", ") + c.name;
        }
        return Unexpected("--cases: no golden case named '" + name + "' in " + dir.string() +
                          " (cases: " + known + ")");
      }
      out.push_back(i);
    }
  }
  if (out.empty()) {
    return Unexpected("--cases " + spec + ": selects no golden case in " + dir.string());
  }
  return out;
}

}  // namespace

tl::expected<HostInputs, std::string> load_host_inputs(const SmokeOptions& options) {
  std::error_code error;
  if (!std::filesystem::is_directory(options.calbin, error)) {
    return Unexpected(options.calbin.string() + ": not a calbin directory (no such directory)");
  }
  for (const std::filesystem::path& resident : options.resident) {
    if (auto m = calbin::read_manifest(resident); !m) {
      return Unexpected("--resident " + resident.string() + ": " + m.error().to_string());
    }
  }
  HostInputs inputs;
  auto manifest = calbin::read_manifest(options.calbin);
  if (!manifest) {
    return Unexpected(manifest.error().to_string());
  }
  inputs.manifest = std::move(*manifest);
  if (auto verified = calbin::verify_files(options.calbin, inputs.manifest); !verified) {
    return Unexpected(verified.error().to_string());
  }
  if (std::string bad = check_tensor_sizes(options.calbin, inputs.manifest); !bad.empty()) {
    return Unexpected(bad);
  }
  auto index = golden_index_of(options, inputs.manifest);
  if (!index) {
    return Unexpected(index.error());
  }
  inputs.golden_dir = index->parent_path();
  if (!std::filesystem::is_directory(inputs.golden_dir, error)) {
    return Unexpected(inputs.golden_dir.string() + ": golden directory does not exist");
  }
  auto golden = calbin::read_golden_index(*index);
  if (!golden) {
    return Unexpected(golden.error().to_string());
  }
  inputs.golden = std::move(*golden);
  if (inputs.golden.vocab != inputs.manifest.llm.vocab) {
    return Unexpected(index->string() + ": vocab: " + std::to_string(inputs.golden.vocab) +
                      " differs from the calbin's " + std::to_string(inputs.manifest.llm.vocab));
  }
  auto cases = select_cases(options.cases, inputs.golden, inputs.golden_dir);
  if (!cases) {
    return Unexpected(cases.error());
  }
  inputs.case_indices = std::move(*cases);
  return inputs;
}

}  // namespace runner
