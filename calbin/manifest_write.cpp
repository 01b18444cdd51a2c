// The manifest writer. Every field is written, defaults included, so that a manifest on disk
// is self-describing and the reader's optional fields only matter for hand-written files.
#include <nlohmann/json.hpp>

#include "calbin/file_io.hpp"
#include "calbin/manifest.hpp"

namespace calbin {
namespace {

// Insertion order keeps the file in declaration order, which reads like FORMAT.md.
using OrderedJson = nlohmann::ordered_json;

OrderedJson amount_json(const MemoryAmount& amount) {
  return OrderedJson{{"value", amount.value}, {"unit", amount.unit}};
}

OrderedJson layout_json(const Layout& layout) {
  if (layout.kind == Layout::Kind::kRowMajor) {
    return OrderedJson{{"kind", "row_major"}};
  }
  return OrderedJson{{"kind", "tiled"}, {"tile_d0", layout.tile_d0}};
}

OrderedJson tensor_json(const TensorDesc& tensor) {
  return OrderedJson{{"name", tensor.name},
                     {"role", to_string(tensor.role)},
                     {"shape", tensor.shape},
                     {"dtype", to_string(tensor.dtype)},
                     {"layout", layout_json(tensor.layout)},
                     {"bytes", tensor.bytes},
                     {"address", tensor.address},
                     {"chip_mask", tensor.chip_mask},
                     {"reservation", tensor.reservation}};
}

OrderedJson weight_json(const WeightTensor& weight) {
  const Quant& quant = weight.quant;
  const Shard& shard = weight.shard;
  return OrderedJson{{"name", weight.name},
                     {"role", weight.role},
                     {"layer", weight.layer},
                     {"shape", weight.shape},
                     {"dtype", to_string(weight.dtype)},
                     {"quant",
                      {{"scheme", quant.scheme},
                       {"scale_file", quant.scale_file},
                       {"scale_offset", quant.scale_offset},
                       {"scale_count", quant.scale_count},
                       {"group_size", quant.group_size}}},
                     {"shard",
                      {{"axis", shard.axis},
                       {"index", shard.index},
                       {"count", shard.count},
                       {"begin", shard.begin},
                       {"end", shard.end},
                       {"chip_mask", shard.chip_mask}}},
                     {"file", weight.file},
                     {"offset", weight.offset},
                     {"bytes", weight.bytes}};
}

OrderedJson op_json(const Op& op) {
  return OrderedJson{{"type", op.type},
                     {"name", op.name},
                     {"layer", op.layer},
                     {"shape", op.shape},
                     {"dtype", to_string(op.dtype)},
                     {"flops", op.flops},
                     {"bytes", op.bytes},
                     {"weight_bytes", op.weight_bytes},
                     {"experts", op.experts},
                     {"kv_bytes", op.kv_bytes},
                     {"kv_slots", op.kv_slots}};
}

template <class T, class ToJson>
OrderedJson list_json(const std::vector<T>& items, ToJson to_json_one) {
  OrderedJson array = OrderedJson::array();
  for (const T& item : items) {
    array.push_back(to_json_one(item));
  }
  return array;
}

OrderedJson model_json(const Model& model) {
  return OrderedJson{
      {"name", model.name},
      {"type", to_string(model.type)},
      {"metadata_type", model.metadata_type},
      {"inputs", list_json(model.inputs, tensor_json)},
      {"outputs", list_json(model.outputs, tensor_json)},
      {"csrs",
       list_json(
           model.csrs,
           [](const Csr& csr) {
             return OrderedJson{{"name", csr.name}, {"index", csr.index}, {"address", csr.address}};
           })},
      {"ping_pong", list_json(model.ping_pong,
                              [](const PingPongSlot& slot) {
                                return OrderedJson{{"slot", slot.slot},
                                                   {"input_addresses", slot.input_addresses},
                                                   {"output_addresses", slot.output_addresses}};
                              })},
      {"ping_pong_may_alias", model.ping_pong_may_alias},
      {"workspace_bytes", model.workspace_bytes},
      {"ops", list_json(model.ops, [](const ChipOps& chip_ops) {
         return OrderedJson{{"chip", chip_ops.chip}, {"ops", list_json(chip_ops.ops, op_json)}};
       })}};
}

OrderedJson llm_json(const LlmInfo& llm) {
  OrderedJson out{{"vocab", llm.vocab},
                  {"context", llm.context},
                  {"batch", llm.batch},
                  {"layers", llm.layers},
                  {"hidden", llm.hidden},
                  {"q_heads", llm.q_heads},
                  {"kv_heads", llm.kv_heads},
                  {"head_dim", llm.head_dim},
                  {"ffn", llm.ffn},
                  {"experts", llm.experts},
                  {"active_experts", llm.active_experts},
                  {"prefill_chunk", llm.prefill_chunk},
                  {"rope_theta", llm.rope_theta},
                  {"rms_eps", llm.rms_eps},
                  {"k_dtype", to_string(llm.k_dtype)},
                  {"v_dtype", to_string(llm.v_dtype)},
                  {"partition", llm.partition},
                  {"tokenizer_context", llm.tokenizer_context}};
  // Only a mixture of experts routes, so dense manifests do not carry the key.
  if (llm.experts > 0) out["norm_topk_prob"] = llm.norm_topk_prob;
  return out;
}

OrderedJson provenance_json(const Provenance& provenance) {
  return OrderedJson{{"generator", provenance.generator},
                     {"compiler_commit", provenance.compiler_commit},
                     {"kernel_commit", provenance.kernel_commit},
                     {"command", provenance.command},
                     {"config", provenance.config},
                     {"input_onnx_sha256", provenance.input_onnx_sha256}};
}

OrderedJson storage_lists(const Manifest& manifest, OrderedJson root) {
  root["files"] = list_json(manifest.files, [](const FileEntry& file) {
    return OrderedJson{{"path", file.path}, {"size", file.size}, {"sha256", file.sha256}};
  });
  root["param_blocks"] = list_json(manifest.param_blocks, [](const ParamBlock& block) {
    return OrderedJson{{"name", block.name}, {"file", block.file}, {"chip_mask", block.chip_mask}};
  });
  root["reservations"] = list_json(manifest.reservations, [](const Reservation& reservation) {
    return OrderedJson{{"name", reservation.name},
                       {"chip", reservation.chip},
                       {"base", reservation.base},
                       {"size", amount_json(reservation.size)}};
  });
  root["weights"] = list_json(manifest.weights, weight_json);
  return root;
}

}  // namespace

std::string to_json(const Manifest& manifest) {
  OrderedJson root{{"schema", manifest.schema},
                   {"calbin_version", manifest.calbin_version},
                   {"architecture", manifest.architecture},
                   {"runtime_abi", manifest.runtime_abi},
                   {"chips", manifest.chips},
                   {"chip_mask", manifest.chip_mask},
                   {"timing_only", manifest.timing_only},
                   {"device_memory_required", amount_json(manifest.device_memory_required)},
                   {"llm", llm_json(manifest.llm)},
                   {"provenance", provenance_json(manifest.provenance)}};
  root = storage_lists(manifest, std::move(root));
  root["models"] = list_json(manifest.models, model_json);
  if (manifest.golden) {
    root["golden"] = OrderedJson{{"index", manifest.golden->index}};
  }
  // Strings from C++ need not be valid UTF-8; replacing bad bytes keeps dump() from throwing.
  return root.dump(2, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
}

Result<void> write_manifest(const std::filesystem::path& calbin_dir, const Manifest& manifest) {
  try {
    return detail::write_file_atomic(calbin_dir / kManifestFileName, to_json(manifest));
  } catch (const std::exception& error) {
    return fail((calbin_dir / kManifestFileName).string(), "",
                std::string("cannot serialise: ") + error.what());
  }
}

}  // namespace calbin
