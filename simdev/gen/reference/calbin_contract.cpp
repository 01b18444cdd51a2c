#include "simdev/gen/reference/calbin_contract.hpp"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "simdev/gen/reference/calbin_weights.hpp"
#include "simdev/gen/reference/contract_model.hpp"
#include "simdev/gen/reference/golden_cases.hpp"
#include "simdev/gen/reference/reference_model.hpp"

namespace simdev::gen {

calbin::Result<ModelConfig> config_of(const calbin::Manifest& manifest) {
  const calbin::LlmInfo& llm = manifest.llm;
  ModelConfig c;
  c.architecture = manifest.architecture;
  c.layers = llm.layers;
  c.hidden = llm.hidden;
  c.q_heads = llm.q_heads;
  c.kv_heads = llm.kv_heads;
  c.head_dim = llm.head_dim;
  c.ffn = llm.ffn;
  c.experts = llm.experts;
  c.active_experts = llm.active_experts;
  c.norm_topk_prob = llm.norm_topk_prob;
  c.vocab = llm.vocab;
  c.context = llm.context;
  c.batch = std::max<uint32_t>(llm.batch, 1);
  c.prefill_chunk = llm.prefill_chunk;
  c.chips = manifest.chips;
  c.rope_theta = llm.rope_theta;
  c.rms_eps = llm.rms_eps;
  c.v_cache = llm.v_dtype;
  if (llm.k_dtype != calbin::Dtype::kBf16) {
    return calbin::fail(
        "manifest.json", "llm.k_dtype",
        std::string(calbin::to_string(llm.k_dtype)) + ": MODEL.md's contract has a bf16 K-cache");
  }
  if (auto checked = check_config(c); !checked) {
    return tl::unexpected(checked.error());
  }
  return c;
}

std::string contract_unavailable(const calbin::Manifest& manifest) {
  if (manifest.weights.empty()) {
    return "the calbin lists no weights (calbin/FORMAT.md, \"weights\"), so its numerics "
           "cannot be recomputed on the host";
  }
  if (manifest.llm.layers == 0) {
    return "the calbin declares no model shape (llm.layers = 0)";
  }
  return {};
}

namespace {

calbin::Result<void> add_contract(const contract::Model& model, calbin::GoldenCase& golden) {
  std::vector<calbin::GoldenCase> chain(1);
  chain[0] = std::move(golden);
  auto added = add_contract_rows(model, chain);
  golden = std::move(chain[0]);
  return added;
}

// The FP32 model fed the case's tokens: its rows, top lists and argmaxes.
calbin::Result<calbin::GoldenCase> fp32_case(const ref::Model& model,
                                             const calbin::GoldenCase& fed) {
  calbin::GoldenCase out;
  out.name = fed.name;
  out.prompt_len = fed.prompt_len;
  out.decode_steps = fed.decode_steps;
  out.long_case = fed.long_case;
  out.tokens = fed.tokens;
  std::vector<int32_t> positions(fed.tokens.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(i);
  ref::Session session(model);
  auto prefill = session.forward(fed.tokens, positions);
  if (!prefill) return tl::unexpected(prefill.error());
  out.prefill_logits = std::move(*prefill);
  out.greedy.push_back(top_ids(out.prefill_logits, 1).at(0));
  for (uint32_t s = 0; s < fed.decode_steps; ++s) {
    const int32_t token = fed.greedy[s];
    const auto position = static_cast<int32_t>(fed.prompt_len + s);
    auto row = session.forward(std::span(&token, 1), std::span(&position, 1));
    if (!row) return tl::unexpected(row.error());
    out.greedy.push_back(top_ids(*row, 1).at(0));
    for (const int32_t id : top_ids(*row, kGoldenTopK)) {
      out.top_ids.push_back(id);
      out.top_logits.push_back((*row)[static_cast<size_t>(id)]);
    }
    out.decode_logits.insert(out.decode_logits.end(), row->begin(), row->end());
  }
  out.contract_rows = fed.contract_rows;
  out.contract_logits = fed.contract_logits;
  return out;
}

calbin::Result<void> check_fed(const calbin::GoldenCase& golden) {
  if (golden.greedy.size() < golden.decode_steps || golden.tokens.size() != golden.prompt_len ||
      golden.prompt_len == 0) {
    return calbin::fail("golden", golden.name,
                        std::to_string(golden.tokens.size()) + " prompt tokens for prompt_len " +
                            std::to_string(golden.prompt_len) + ", " +
                            std::to_string(golden.greedy.size()) + " greedy tokens for " +
                            std::to_string(golden.decode_steps) + " decode steps");
  }
  return {};
}

}  // namespace

calbin::Result<void> add_calbin_references(const std::filesystem::path& calbin_dir,
                                           const calbin::Manifest& manifest,
                                           std::span<calbin::GoldenCase*> cases,
                                           std::span<calbin::GoldenCase> fp32, unsigned threads) {
  if (const std::string why = contract_unavailable(manifest); !why.empty()) {
    return calbin::fail(calbin_dir.string(), "contract reference", why);
  }
  if (fp32.size() != cases.size()) {
    return calbin::fail(calbin_dir.string(), "references", "one FP32 case per golden case");
  }
  auto config = config_of(manifest);
  if (!config) return tl::unexpected(config.error());
  auto weights = ref::CalbinWeights::read(calbin_dir, manifest);
  if (!weights) return tl::unexpected(weights.error());
  auto contract = contract::Model::create(*config, *weights);
  if (!contract) return tl::unexpected(contract.error());
  auto dequantised = ref::dequantised(*config, *weights);
  if (!dequantised) return tl::unexpected(dequantised.error());
  auto fp32_model = ref::Model::create(*config, *dequantised);
  if (!fp32_model) return tl::unexpected(fp32_model.error());
  std::vector<std::optional<calbin::Result<void>>> results(cases.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < cases.size(); i = next++) {
      results[i] = check_fed(*cases[i])
                       .and_then([&] { return add_contract(*contract, *cases[i]); })
                       .and_then([&]() -> calbin::Result<void> {
                         auto reference = fp32_case(*fp32_model, *cases[i]);
                         if (!reference) return tl::unexpected(reference.error());
                         fp32[i] = std::move(*reference);
                         return {};
                       });
    }
  };
  std::vector<std::jthread> pool;
  const size_t thread_count = std::clamp<size_t>(threads, 1, std::max<size_t>(cases.size(), 1));
  for (size_t t = 1; t < thread_count; ++t) pool.emplace_back(worker);
  worker();
  pool.clear();  // joins
  for (auto& result : results) {
    if (result && !*result) return tl::unexpected(result->error());
  }
  return {};
}

}  // namespace simdev::gen
