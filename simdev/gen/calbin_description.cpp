#include "simdev/gen/calbin_description.hpp"

#include <nlohmann/json.hpp>

#include "calbin/sha256.hpp"
#include "simdev/gen/memory_layout.hpp"
#include "simdev/gen/timing/llm_models.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;

// The oldest ABI that can drive the calbin, so that it runs on as many runtimes as it can:
// a batch decode needs ABI 0.8's per-row Kv_Apply, a decode that ranks on the device ABI
// 0.9's top-k roles (calrt.h).
std::string required_abi(const ModelConfig& c) {
  const bool before_0_9 = c.runtime_abi.rfind("0.7", 0) == 0 || c.runtime_abi.rfind("0.8", 0) == 0;
  if (c.decode_top_k > 0 && before_0_9) return "0.9.0";
  return c.batch > 1 && c.runtime_abi.rfind("0.7", 0) == 0 ? "0.8.0" : c.runtime_abi;
}

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
  llm.experts = c.experts;
  llm.active_experts = c.active_experts;
  llm.norm_topk_prob = c.norm_topk_prob;
  llm.prefill_chunk = c.prefill_chunk;
  llm.rope_theta = c.rope_theta;
  llm.rms_eps = c.rms_eps;
  llm.k_dtype = calbin::Dtype::kBf16;
  llm.v_dtype = c.v_cache;
  llm.partition = "tensor_parallel";
  llm.tokenizer_context = c.tokenizer_context;
  return llm;
}

// The MoE keys appear only for MoE models, so dense manifests stay as they were.
calbin::Provenance provenance(const ModelConfig& c, const GenOptions& options,
                              const ProvenanceNote& note) {
  nlohmann::ordered_json config = {{"preset", options.preset},
                                   {"seed", options.seed},
                                   {"golden", options.with_golden},
                                   {"long_cases", options.long_cases},
                                   {"layers", c.layers},
                                   {"hidden", c.hidden},
                                   {"q_heads", c.q_heads},
                                   {"kv_heads", c.kv_heads},
                                   {"head_dim", c.head_dim},
                                   {"ffn", c.ffn}};
  // Only when set, so that a full-row calbin's manifest (and its hash) stays what it was.
  if (c.decode_top_k > 0) config["decode_top_k"] = c.decode_top_k;
  if (!options.config_file.empty()) {
    config.erase("preset");
    config["config_file"] = options.config_file.string();
    config["architecture"] = c.architecture;
  }
  if (c.experts > 0) {
    config["experts"] = c.experts;
    config["active_experts"] = c.active_experts;
    config["norm_topk_prob"] = c.norm_topk_prob;
  }
  config["vocab"] = c.vocab;
  config["context"] = c.context;
  config["prefill_chunk"] = c.prefill_chunk;
  config["chips"] = c.chips;
  config["rope_theta"] = c.rope_theta;
  config["rms_eps"] = c.rms_eps;
  config[note.key] = note.text;
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

}  // namespace

calbin::Result<calbin::Manifest> describe_calbin(const ModelConfig& model_config,
                                                 const GenOptions& options, WeightsPart weights,
                                                 const ProvenanceNote& note) {
  // The override was checked against the model with the options (generate.cpp).
  ModelConfig config = model_config;
  if (options.decode_top_k > 0) config.decode_top_k = options.decode_top_k;
  auto models = describe_models(config);
  if (!models) {
    return tl::unexpected(models.error());
  }
  auto plan = plan_memory(config, weights.param_bytes, *models);
  if (!plan) {
    return tl::unexpected(plan.error());
  }
  calbin::Manifest m;
  m.calbin_version = config.calbin_version_prefix + "-" + std::to_string(options.seed);
  m.architecture = config.architecture;
  m.runtime_abi = required_abi(config);
  m.chips = config.chips;
  m.chip_mask = (1u << config.chips) - 1;
  m.device_memory_required = plan->device_memory_required;
  m.llm = llm_info(config);
  m.provenance = provenance(config, options, note);
  m.param_blocks = std::move(weights.param_blocks);
  m.reservations = std::move(plan->reservations);
  m.weights = std::move(weights.weights);
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

std::string equivalent_command(const GenOptions& options) {
  const std::string model = options.config_file.empty()
                                ? "--preset " + options.preset
                                : "--config " + options.config_file.string();
  std::string command = "simdev gen " + model + " --out " + options.out_dir.string() + " --seed " +
                        std::to_string(options.seed);
  command += options.with_golden ? "" : " --no-golden";
  command += options.long_cases ? "" : " --no-long";
  command += options.force ? " --force" : "";
  command +=
      options.decode_top_k > 0 ? " --decode-top-k " + std::to_string(options.decode_top_k) : "";
  return command;
}

}  // namespace simdev::gen
