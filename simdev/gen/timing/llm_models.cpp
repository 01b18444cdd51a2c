#include "simdev/gen/timing/llm_models.hpp"

#include <string>

#include "simdev/gen/timing/moe_op_list.hpp"
#include "simdev/gen/timing/op_list.hpp"

namespace simdev::gen {
namespace {

calbin::Result<calbin::TensorDesc> tensor(std::string name, calbin::TensorRole role,
                                          std::vector<int64_t> shape, calbin::Dtype dtype,
                                          calbin::Layout layout, uint32_t chip_mask) {
  const std::optional<uint64_t> bytes = calbin::tensor_bytes(shape, dtype, layout);
  if (!bytes) {
    return calbin::fail("preset", name, "tensor size overflows");
  }
  calbin::TensorDesc desc;
  desc.name = std::move(name);
  desc.role = role;
  desc.shape = std::move(shape);
  desc.dtype = dtype;
  desc.layout = layout;
  desc.bytes = *bytes;
  desc.chip_mask = chip_mask;
  desc.reservation = "io";
  return desc;
}

calbin::Result<calbin::Model> describe(const ModelConfig& c, calbin::ModelType type) {
  const bool prefill = type == calbin::ModelType::kPrefill;
  // A prefill carries one sequence; a decode one token for each of its batch rows (calrt.h,
  // Kv_Apply).
  const int64_t batch = prefill ? 1 : c.batch, tokens = prefill ? c.prefill_chunk : 1;
  const uint32_t all_chips = (1u << c.chips) - 1;
  calbin::Model model;
  model.name = prefill ? c.prefill_model : c.decode_model;
  model.type = type;
  model.metadata_type = prefill ? "llm_prefill" : "llm_decode";
  const calbin::Layout row_major{};
  const calbin::Layout tiled{calbin::Layout::Kind::kTiled, c.logits_tile_d0};
  // Both chips read the inputs; the gathered logits row ends up on chip 0.
  auto token_desc = tensor("tokens", calbin::TensorRole::kToken, {batch, tokens},
                           calbin::Dtype::kInt32, row_major, all_chips);
  auto position_desc = tensor("positions", calbin::TensorRole::kPosition, {batch, tokens},
                              calbin::Dtype::kInt32, row_major, all_chips);
  model.inputs = {};
  model.outputs = {};
  if (!token_desc || !position_desc) {
    return calbin::fail("preset", model.name, "I/O tensor sizes overflow");
  }
  model.inputs = {*token_desc, *position_desc};
  if (prefill || c.decode_top_k == 0) {
    auto logits_desc = tensor("logits", calbin::TensorRole::kLogits, {batch, int64_t{c.vocab}},
                              calbin::Dtype::kBf16, tiled, 1u);
    if (!logits_desc) return calbin::fail("preset", model.name, "I/O tensor sizes overflow");
    model.outputs = {*logits_desc};
  } else {
    // A decode that ranks on the device: the merged candidates end up on chip 0.
    const int64_t k = c.decode_top_k;
    auto ids = tensor("top_ids", calbin::TensorRole::kTopIds, {batch, k}, calbin::Dtype::kInt32,
                      row_major, 1u);
    auto values = tensor("top_logits", calbin::TensorRole::kTopLogits, {batch, k},
                         calbin::Dtype::kBf16, row_major, 1u);
    if (!ids || !values) return calbin::fail("preset", model.name, "I/O tensor sizes overflow");
    model.outputs = {*ids, *values};
  }
  model.csrs = {{kCsrCurSeqLen, 0, 0}, {kCsrPastKvSeqLen, 1, 0}};
  model.ping_pong = {{"ping", {}, {}}, {"pong", {}, {}}};
  model.ping_pong_may_alias = false;
  const bool moe = c.experts > 0;
  model.workspace_bytes = moe ? moe_workspace_bytes(c, type) : workspace_bytes(c, type);
  model.ops = moe ? moe_op_lists(c, type) : op_lists(c, type);
  return model;
}

}  // namespace

calbin::Result<std::vector<calbin::Model>> describe_models(const ModelConfig& config) {
  std::vector<calbin::Model> models;
  for (const auto type : {calbin::ModelType::kPrefill, calbin::ModelType::kDecode}) {
    auto model = describe(config, type);
    if (!model) {
      return tl::unexpected(model.error());
    }
    models.push_back(std::move(*model));
  }
  return models;
}

}  // namespace simdev::gen
