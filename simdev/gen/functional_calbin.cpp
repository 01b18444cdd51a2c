#include "simdev/gen/functional_calbin.hpp"

#include <algorithm>
#include <thread>

#include "calbin/golden.hpp"
#include "simdev/gen/calbin_description.hpp"
#include "simdev/gen/reference/calbin_weights.hpp"
#include "simdev/gen/reference/golden_cases.hpp"
#include "simdev/gen/weights/param_blocks.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;

// Computes and writes the golden set; returns the written paths relative to `dir`.
// Both references read the weights back from the param blocks just written, so the golden
// set describes the files the device loads.
calbin::Result<std::vector<std::string>> write_golden_set(const ModelConfig& c,
                                                          const calbin::Manifest& manifest,
                                                          const GenOptions& options,
                                                          const fs::path& dir) {
  auto stored = ref::CalbinWeights::read(dir, manifest);
  if (!stored) {
    return tl::unexpected(stored.error());
  }
  auto reference_weights = ref::dequantised(c, *stored);
  if (!reference_weights) {
    return tl::unexpected(reference_weights.error());
  }
  auto model = ref::Model::create(c, *reference_weights);
  if (!model) {
    return tl::unexpected(model.error());
  }
  auto contract = contract::Model::create(c, *stored);
  if (!contract) {
    return tl::unexpected(contract.error());
  }
  const unsigned threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  auto set = compute_golden(*model, &*contract, golden_case_specs(c, options.long_cases),
                            options.seed, threads);
  if (!set) {
    return tl::unexpected(set.error());
  }
  auto names = calbin::write_golden(dir / "golden", *set);
  if (!names) {
    return tl::unexpected(names.error());
  }
  std::vector<std::string> paths;
  for (const std::string& name : *names) {
    paths.push_back("golden/" + name);
  }
  const std::string index = "golden/" + std::string(calbin::kGoldenIndexName);
  if (std::find(paths.begin(), paths.end(), index) == paths.end()) {
    paths.push_back(index);
  }
  return paths;
}

// The seeded weights, packed into param blocks.
WeightsPart weights_part(const ModelConfig& config, const ParamLayout& layout) {
  WeightsPart part;
  for (const BlockImage& block : layout.blocks) {
    part.param_blocks.push_back({block.name, block.file, block.chip_mask});
  }
  part.weights = layout.entries;
  // Both chips get the same plan, sized for the chip that loads the most param bytes.
  for (uint32_t chip = 0; chip < config.chips; ++chip) {
    part.param_bytes = std::max(part.param_bytes, param_bytes_for_chip(layout, chip));
  }
  return part;
}

const ProvenanceNote kInitNote{
    "init",
    "matrices N(0,1/fan_in) int8 w8a8_dynamic; norms 1+N(0,0.1); embeddings N(0,1); "
    "lm_head N(0,9/H); MoE router N(0,4/H) bf16; normal = Irwin-Hall(12) over mt19937_64"};

const char* const kTrainedInitNote =
    "; weight_init trained: int8 matrices Student-t(4) at the same std; max(2, H/128) "
    "hidden channels drawn from the seed: attn/ffn norm weights x outlier_gain there, the "
    "columns of q/k/v/gate/up (and experts' gate/up) reading them / outlier_gain";

}  // namespace

calbin::Result<calbin::Manifest> build_functional(const ModelConfig& config,
                                                  const GenOptions& options, const fs::path& dir) {
  if (auto checked = check_config(config); !checked) {
    return tl::unexpected(checked.error());
  }
  std::vector<StoredWeight> weights;
  ProvenanceNote note = kInitNote;
  if (options.weights_dir.empty()) {
    weights = make_weights(config, options.seed, options.threads);
    if (config.weight_init == ModelConfig::WeightInit::kTrained) note.text += kTrainedInitNote;
  } else {
    auto checkpoint = SafetensorsDir::open(options.weights_dir);
    if (!checkpoint) return tl::unexpected(checkpoint.error());
    auto read = read_weights(config, *checkpoint);
    if (!read) {
      calbin::Error error = read.error();
      if (error.file.empty()) error.file = options.weights_dir.string();
      return tl::unexpected(error);
    }
    weights = std::move(*read);
    note = {"init", "weights from " + options.weights_dir.string() + " (safetensors, " +
                        std::to_string(checkpoint->size()) +
                        " tensors), matrices int8 w8a8_dynamic per row, the rest bf16"};
  }
  const ParamLayout layout = layout_param_blocks(config, weights);
  if (auto written = write_param_blocks(dir, layout); !written) {
    return tl::unexpected(written.error());
  }
  auto m = describe_calbin(config, options, weights_part(config, layout), note);
  if (!m) {
    return m;
  }
  std::vector<std::string> file_paths;
  for (const BlockImage& block : layout.blocks) {
    file_paths.push_back(block.file);
  }
  if (options.with_golden) {
    auto golden_paths = write_golden_set(config, *m, options, dir);
    if (!golden_paths) {
      return tl::unexpected(golden_paths.error());
    }
    file_paths.insert(file_paths.end(), golden_paths->begin(), golden_paths->end());
    m->golden = calbin::GoldenRef{"golden/" + std::string(calbin::kGoldenIndexName)};
  }
  if (auto listed = list_files(dir, file_paths, *m); !listed) {
    return tl::unexpected(listed.error());
  }
  if (auto written = calbin::write_manifest(dir, *m); !written) {
    return tl::unexpected(written.error());
  }
  return m;
}

}  // namespace simdev::gen
