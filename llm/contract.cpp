#include "llm/contract.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <vector>

#include "calbin/acceptance/check_context.hpp"
#include "llm/host/tensor_io.hpp"

namespace calrt::llm {
namespace {

// Every mismatch found, so that one start-up names all of them instead of the first.
struct Mismatches {
  std::vector<std::string> lines;
  void add(std::string line) { lines.push_back(std::move(line)); }
  Result<void> result() const {
    if (lines.empty()) return {};
    return tl::unexpected(
        model_error(ErrorCode::model_mismatch, fmt::format("{}", fmt::join(lines, "; "))));
  }
};

// The service manifest against the calbin's manifest: the acceptance checks `calrt check
// --manifest` runs (calbin/acceptance/check_service.cpp), each message naming both files.
void check_files(const ContractSources& s, Mismatches& out) {
  const calbin::CheckOptions options;
  const calbin::acceptance::CheckContext context{
      s.manifest, {}, s.manifest_file, &s.service, s.service_file, options};
  using Fn = void (*)(const calbin::acceptance::CheckContext&, calbin::CheckResult&);
  for (const Fn fn :
       {&calbin::acceptance::check_service_models, &calbin::acceptance::check_service_dimensions,
        &calbin::acceptance::check_service_dtypes, &calbin::acceptance::check_service_tensors,
        &calbin::acceptance::check_service_versions}) {
    calbin::CheckResult result;
    fn(context, result);
    if (result.status == calbin::CheckStatus::kFail) {
      for (std::string& message : result.messages) out.add(std::move(message));
    }
  }
}

// What the device reports (Calbin_GetInfo) against the service manifest.
void check_info(const calrt::CalbinInfo& info, const ContractSources& s, Mismatches& out) {
  const std::pair<const char*, std::pair<uint32_t, uint32_t>> pairs[] = {
      {"vocab", {s.service.vocab, info.vocab}},
      {"context", {s.service.context, info.context}},
      {"batch", {s.service.batch, info.batch}},
  };
  for (const auto& [key, values] : pairs) {
    if (values.first != values.second) {
      out.add(fmt::format("{}: {} is {} but the device's Calbin_GetInfo {} is {}", s.service_file,
                          key, values.first, key, values.second));
    }
  }
  if (info.prefill_chunk != s.manifest.llm.prefill_chunk) {
    out.add(
        fmt::format("{}: llm.prefill_chunk is {} but the device's Calbin_GetInfo "
                    "prefill_chunk is {}",
                    s.manifest_file, s.manifest.llm.prefill_chunk, info.prefill_chunk));
  }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

// The tensor a service reference names on the device, with its role, dtype and shape exact.
const calrt::TensorDesc* bind_tensor(const calrt::ModelDesc& model, const ContractSources& s,
                                     const char* key, const calbin::TensorRef& ref,
                                     std::initializer_list<calrt::TensorRole> roles,
                                     calrt::Dtype dtype, std::vector<int64_t> shape,
                                     Mismatches& out) {
  const auto& list = ref.output ? model.outputs : model.inputs;
  const std::string named =
      fmt::format("{}: tensors.{} {}[{}] of model \"{}\"", s.service_file, key,
                  ref.output ? "outputs" : "inputs", ref.index, model.name);
  if (ref.index >= list.size()) {
    out.add(fmt::format("{} does not exist on the device (it reports {} {})", named, list.size(),
                        ref.output ? "outputs" : "inputs"));
    return nullptr;
  }
  const calrt::TensorDesc& t = list[ref.index];
  if (std::find(roles.begin(), roles.end(), t.role) == roles.end()) {
    out.add(fmt::format("{} is \"{}\" with role {} on the device, not {}", named, t.name,
                        calrt::to_string(t.role), calrt::to_string(*roles.begin())));
    return nullptr;
  }
  if (t.dtype != dtype) {
    out.add(fmt::format("{}: dtype expected {} but the device reports {}", named,
                        calrt::to_string(dtype), calrt::to_string(t.dtype)));
  }
  if (t.shape != shape) {
    out.add(fmt::format("{}: shape expected {} but the device reports {}", named, shape_text(shape),
                        shape_text(t.shape)));
  }
  return &t;
}

// The device's layout of an output against the calbin manifest's, and its byte size against
// its shape (tensor_io.hpp): the row reader takes the tile size from here, never assumes it.
void check_layout(const calrt::ModelDesc& model, const calrt::TensorDesc& t,
                  const ContractSources& s, Mismatches& out) {
  const calbin::Model* declared = s.manifest.find_model(model.name);
  const auto& list = t.direction == calrt::Direction::output ? declared->outputs : declared->inputs;
  if (t.index < list.size()) {
    const calbin::Layout& layout = list[t.index].layout;
    const bool tiled = layout.kind == calbin::Layout::Kind::kTiled;
    if (tiled != (t.layout == calrt::Layout::tiled) || layout.tile_d0 != t.tile_d0) {
      out.add(
          fmt::format("{}: model \"{}\" tensor \"{}\" layout is {} (tile_d0 {}) but the "
                      "device reports {} (tile_d0 {})",
                      s.manifest_file, model.name, t.name, tiled ? "tiled" : "row_major",
                      layout.tile_d0, calrt::to_string(t.layout), t.tile_d0));
    }
  }
  try {
    (void)physical_shape(t);
  } catch (const std::exception& error) {
    out.add(fmt::format("model \"{}\" on the device: {}", model.name, error.what()));
  }
}

// A decode that ranks on the device: its top_ids and top_logits outputs, [batch, K] each.
void bind_ranked(const calrt::ModelDesc& model, const calrt::CalbinInfo& info,
                 const ContractSources& s, ModelBinding& b, Mismatches& out) {
  const calrt::TensorDesc* ids =
      model.find_tensor(calrt::Direction::output, calrt::TensorRole::top_ids);
  const calrt::TensorDesc* values =
      model.find_tensor(calrt::Direction::output, calrt::TensorRole::top_logits);
  if (ids == nullptr || values == nullptr || ids->shape.size() != 2 ||
      ids->shape != values->shape) {
    out.add(
        fmt::format("model \"{}\" on the device: a top_ids output needs a top_logits output "
                    "of the same [batch, K] shape",
                    model.name));
    return;
  }
  const int64_t k = ids->shape[1];
  if (ids->shape[0] != int64_t{info.batch} || k < 1 || k > int64_t{info.vocab}) {
    out.add(
        fmt::format("model \"{}\" on the device: top_ids shape {} is not [batch {}, K <= "
                    "vocab {}]",
                    model.name, shape_text(ids->shape), info.batch, info.vocab));
    return;
  }
  const calbin::Model* declared = s.manifest.find_model(model.name);
  const bool declared_ranked = std::any_of(
      declared->outputs.begin(), declared->outputs.end(),
      [](const calbin::TensorDesc& t) { return t.role == calbin::TensorRole::kTopIds; });
  if (!declared_ranked) {
    out.add(
        fmt::format("{}: model \"{}\" gives full logits rows but the device reports an "
                    "on-device top-{} output",
                    s.manifest_file, model.name, k));
  }
  if (s.service.decode_top_k != static_cast<uint32_t>(k)) {
    out.add(
        fmt::format("{}: decode_top_k is {} but the device's model \"{}\" gives its {} best "
                    "ids",
                    s.service_file,
                    s.service.decode_top_k ? std::to_string(*s.service.decode_top_k)
                                           : std::string("not set (full rows)"),
                    model.name, k));
  }
  b.top_k = static_cast<uint32_t>(k);
  b.top_ids_output = ids->index;
  b.top_logits_output = values->index;
}

// The CSR a service reference names, by exact name on the device.
uint32_t bind_csr(const calrt::ModelDesc& model, const ContractSources& s, const char* key,
                  const calbin::CsrRef& ref, Mismatches& out) {
  if (const calrt::CsrDesc* csr = model.find_csr(ref.name)) return csr->index;
  std::vector<std::string> names;
  for (const calrt::CsrDesc& csr : model.csrs) names.push_back(csr.name);
  out.add(fmt::format("{}: csr.{} \"{}\" is not a CSR of model \"{}\" on the device (CSRs: {})",
                      s.service_file, key, ref.name, model.name, fmt::join(names, ", ")));
  return 0;
}

// One model by its exact service name: type, token/position/logits tensors, CSRs, layout.
ModelBinding bind_model(const calrt::Calbin& calbin, const calrt::CalbinInfo& info,
                        const ContractSources& s, const std::string& name, calrt::ModelType type,
                        Mismatches& out) {
  ModelBinding b;
  const std::vector<calrt::ModelDesc> models = calbin.models();
  const auto found = std::find_if(models.begin(), models.end(),
                                  [&](const calrt::ModelDesc& m) { return m.name == name; });
  if (found == models.end() || s.manifest.find_model(name) == nullptr) {
    std::vector<std::string> names;
    for (const calrt::ModelDesc& m : models) names.push_back(m.name);
    out.add(
        fmt::format("{}: models.{} \"{}\" is not a model the device reports (models: {}); "
                    "names match exactly",
                    s.service_file, calrt::to_string(type), name, fmt::join(names, ", ")));
    return b;
  }
  b.desc = *found;
  if (b.desc.type != type) {
    out.add(fmt::format("{}: models.{} \"{}\" is a {} model on the device", s.service_file,
                        calrt::to_string(type), name, calrt::to_string(b.desc.type)));
    return b;
  }
  const bool decode = type == calrt::ModelType::decode;
  const int64_t rows = decode ? info.batch : 1;
  const int64_t tokens = decode ? 1 : info.prefill_chunk;
  if (const auto* t = bind_tensor(b.desc, s, "token", s.service.token, {calrt::TensorRole::token},
                                  calrt::Dtype::int32, {rows, tokens}, out)) {
    b.token_input = t->index;
  }
  if (const auto* t =
          bind_tensor(b.desc, s, "position", s.service.position, {calrt::TensorRole::position},
                      calrt::Dtype::int32, {rows, tokens}, out)) {
    b.position_input = t->index;
  }
  const bool ranked =
      decode && b.desc.find_tensor(calrt::Direction::output, calrt::TensorRole::top_ids);
  if (decode && s.service.decode_top_k && !ranked) {
    out.add(
        fmt::format("{}: decode_top_k is {} but the device's model \"{}\" gives full "
                    "logits rows",
                    s.service_file, *s.service.decode_top_k, b.desc.name));
  }
  if (ranked) {
    bind_ranked(b.desc, info, s, b, out);
  } else {
    const calrt::Dtype dtype =
        s.service.logits_dtype == calbin::Dtype::kF32 ? calrt::Dtype::f32 : calrt::Dtype::bf16;
    if (const auto* t = bind_tensor(b.desc, s, "logits", s.service.logits,
                                    {calrt::TensorRole::logits}, dtype, {rows, info.vocab}, out)) {
      b.logits_output = t->index;
      check_layout(b.desc, *t, s, out);
    }
  }
  b.cur_seq_len_csr = bind_csr(b.desc, s, "current", s.service.current, out);
  b.past_kv_csr = bind_csr(b.desc, s, "past_current", s.service.past_current, out);
  return b;
}

}  // namespace

Result<Contract> check_contract(const calrt::Calbin& calbin, const ContractSources& sources) {
  Mismatches out;
  Contract contract;
  try {
    check_files(sources, out);
    const calrt::CalbinInfo info = calbin.info();
    check_info(info, sources, out);
    contract.prefill = bind_model(calbin, info, sources, sources.service.prefill_model,
                                  calrt::ModelType::prefill, out);
    contract.decode = bind_model(calbin, info, sources, sources.service.decode_model,
                                 calrt::ModelType::decode, out);
    contract.caps.vocab = info.vocab;
    contract.caps.n_batch = info.batch;
    contract.caps.prefill_chunk = info.prefill_chunk;
    contract.caps.calbin_context = info.context;
    contract.caps.decode_top_k = contract.decode.top_k;
  } catch (const calrt::Error& error) {
    return tl::unexpected(from_runtime(error, "start-up contract check"));
  }
  if (auto checked = out.result(); !checked) return tl::unexpected(checked.error());
  return contract;
}

Result<Capabilities> capabilities(const calrt::Calbin& calbin, const calbin::Manifest& manifest) {
  Capabilities caps;
  try {
    const calrt::CalbinInfo info = calbin.info();
    const calrt::KvCapacity kv = calbin.kv_capacity();
    caps.vocab = info.vocab;
    caps.n_batch = info.batch;
    caps.prefill_chunk = info.prefill_chunk;
    caps.calbin_context = info.context;
    caps.kv_tokens_per_sequence =
        static_cast<uint32_t>(std::min<uint64_t>(kv.largest_free_tokens, info.context));
    caps.tokenizer_context = manifest.llm.tokenizer_context;
  } catch (const calrt::Error& error) {
    return tl::unexpected(from_runtime(error, "capabilities"));
  }
  caps.n_ctx = std::min(caps.calbin_context, caps.kv_tokens_per_sequence);
  if (caps.tokenizer_context > 0) caps.n_ctx = std::min(caps.n_ctx, caps.tokenizer_context);
  if (caps.n_ctx == 0) {
    return tl::unexpected(
        model_error(ErrorCode::model_unavailable,
                    fmt::format("n_ctx is 0: calbin context {}, KV tokens one sequence can hold {}",
                                caps.calbin_context, caps.kv_tokens_per_sequence)));
  }
  return caps;
}

}  // namespace calrt::llm
