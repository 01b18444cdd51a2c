#include "simdev/gen/functional_calbin.hpp"

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "calbin/golden.hpp"
#include "calbin/sha256.hpp"
#include "simdev/gen/golden_cases.hpp"
#include "simdev/gen/llm_models.hpp"
#include "simdev/gen/memory_plan.hpp"
#include "simdev/gen/param_blocks.hpp"
#include "simdev/gen/reference_weights.hpp"
#include "simdev/gen/weights.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;

calbin::LlmInfo llm_info(const ModelConfig& c) {
  calbin::LlmInfo llm;
  llm.vocab = c.vocab;
  llm.context = c.context;
  llm.batch = c.batch;
  llm.layers = c.layers;
  llm.hidden = c.hidden;
  llm.q_heads = c.q_heads;
  llm.kv_heads = c.kv_heads;
  llm.head_dim = c.head_dim;
  llm.ffn = c.ffn;
  llm.prefill_chunk = c.prefill_chunk;
  llm.rope_theta = c.rope_theta;
  llm.rms_eps = c.rms_eps;
  llm.k_dtype = calbin::Dtype::kBf16;
  llm.v_dtype = calbin::Dtype::kBf16;
  llm.partition = "tensor_parallel";
  llm.tokenizer_context = c.tokenizer_context;
  return llm;
}

calbin::Provenance provenance(const ModelConfig& c, const GenOptions& options) {
  const nlohmann::ordered_json config = {
      {"preset", options.preset},
      {"seed", options.seed},
      {"golden", options.with_golden},
      {"long_cases", options.long_cases},
      {"layers", c.layers},
      {"hidden", c.hidden},
      {"q_heads", c.q_heads},
      {"kv_heads", c.kv_heads},
      {"head_dim", c.head_dim},
      {"ffn", c.ffn},
      {"vocab", c.vocab},
      {"context", c.context},
      {"prefill_chunk", c.prefill_chunk},
      {"chips", c.chips},
      {"rope_theta", c.rope_theta},
      {"rms_eps", c.rms_eps},
      {"init",
       "matrices N(0,1/fan_in) int8 w8a8_dynamic; norms 1+N(0,0.1); embeddings N(0,1); "
       "lm_head N(0,9/H); normal = Irwin-Hall(12) over mt19937_64"}};
  calbin::Provenance p;
  p.generator = "simdev gen";
  p.compiler_commit = "n/a";
  p.kernel_commit = "n/a";
  p.command = options.command_line.empty() ? equivalent_command(options) : options.command_line;
  p.config = config.dump();
  return p;
}

calbin::Result<calbin::FileEntry> file_entry(const fs::path& dir, const std::string& relative) {
  const fs::path path = dir / relative;
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error) {
    return calbin::fail(path.string(), "", "cannot stat: " + error.message());
  }
  auto digest = calbin::sha256_file(path);
  if (!digest) {
    return tl::unexpected(digest.error());
  }
  return calbin::FileEntry{relative, size, *digest};
}

// Computes and writes the golden set; returns the written paths relative to `dir`.
calbin::Result<std::vector<std::string>> write_golden_set(const ModelConfig& c,
                                                          const std::vector<StoredWeight>& weights,
                                                          const GenOptions& options,
                                                          const fs::path& dir) {
  auto reference_weights = dequantised_unsplit(c, weights);
  if (!reference_weights) {
    return tl::unexpected(reference_weights.error());
  }
  auto model = ref::Model::create(c, *reference_weights);
  if (!model) {
    return tl::unexpected(model.error());
  }
  const unsigned threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  auto set =
      compute_golden(*model, golden_case_specs(c, options.long_cases), options.seed, threads);
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

// Everything but files and golden: identity, LLM facts, param blocks, weights, memory plan.
calbin::Result<calbin::Manifest> describe_calbin(const ModelConfig& config,
                                                 const GenOptions& options,
                                                 const ParamLayout& layout) {
  auto models = describe_models(config);
  if (!models) {
    return tl::unexpected(models.error());
  }
  // Both chips get the same plan, sized for the chip that loads the most param bytes.
  uint64_t param_bytes = 0;
  for (uint32_t chip = 0; chip < config.chips; ++chip) {
    param_bytes = std::max(param_bytes, param_bytes_for_chip(layout, chip));
  }
  auto plan = plan_memory(config, param_bytes, *models);
  if (!plan) {
    return tl::unexpected(plan.error());
  }
  calbin::Manifest m;
  m.calbin_version = config.calbin_version_prefix + "-" + std::to_string(options.seed);
  m.architecture = config.architecture;
  m.runtime_abi = config.runtime_abi;
  m.chips = config.chips;
  m.chip_mask = (1u << config.chips) - 1;
  m.device_memory_required = plan->device_memory_required;
  m.llm = llm_info(config);
  m.provenance = provenance(config, options);
  for (const BlockImage& block : layout.blocks) {
    m.param_blocks.push_back({block.name, block.file, block.chip_mask});
  }
  m.reservations = std::move(plan->reservations);
  m.weights = layout.entries;
  m.models = std::move(*models);
  return m;
}

calbin::Result<void> list_files(const fs::path& dir, const std::vector<std::string>& paths,
                                calbin::Manifest& m) {
  for (const std::string& path : paths) {
    auto entry = file_entry(dir, path);
    if (!entry) {
      return tl::unexpected(entry.error());
    }
    m.files.push_back(std::move(*entry));
  }
  return {};
}

}  // namespace

std::string equivalent_command(const GenOptions& options) {
  std::string command = "simdev gen --preset " + options.preset + " --out " +
                        options.out_dir.string() + " --seed " + std::to_string(options.seed);
  command += options.with_golden ? "" : " --no-golden";
  command += options.long_cases ? "" : " --no-long";
  command += options.force ? " --force" : "";
  return command;
}

calbin::Result<calbin::Manifest> build_functional(const ModelConfig& config,
                                                  const GenOptions& options, const fs::path& dir) {
  if (auto checked = check_config(config); !checked) {
    return tl::unexpected(checked.error());
  }
  const std::vector<StoredWeight> weights = make_weights(config, options.seed);
  const ParamLayout layout = layout_param_blocks(config, weights);
  if (auto written = write_param_blocks(dir, layout); !written) {
    return tl::unexpected(written.error());
  }
  auto m = describe_calbin(config, options, layout);
  if (!m) {
    return m;
  }
  std::vector<std::string> file_paths;
  for (const BlockImage& block : layout.blocks) {
    file_paths.push_back(block.file);
  }
  if (options.with_golden) {
    auto golden_paths = write_golden_set(config, weights, options, dir);
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
