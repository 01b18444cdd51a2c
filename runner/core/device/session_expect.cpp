// Step 2's exact checks of a model's I/O against the LLM info: token and position inputs
// int32 [batch, tokens per submission] (prefill_chunk for prefill, 1 for decode), logits
// output bf16 [batch, vocab] (or a decode's ranked top_ids and top_logits), and the CSRs
// cur_seq_len and past_kv_cur_seq_len by name.
#include <spdlog/fmt/fmt.h>

#include "runner/core/session.hpp"
#include "runner/core/tensor_io.hpp"

namespace runner {
namespace {

struct Expected {
  calrt::Direction direction;
  calrt::TensorRole role;
  calrt::Dtype dtype;
  std::vector<int64_t> shape;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

// Finds the unique tensor with the expected role and checks its dtype and shape exactly;
// returns its index, or -1 after adding a failure.
int64_t check_tensor(const calrt::ModelDesc& model, const Expected& want, StepResult& step) {
  const auto& tensors = want.direction == calrt::Direction::input ? model.inputs : model.outputs;
  const char* side = want.direction == calrt::Direction::input ? "input" : "output";
  int64_t found = -1;
  for (const auto& tensor : tensors) {
    if (tensor.role != want.role) {
      continue;
    }
    if (found >= 0) {
      step.fail(fmt::format("model {}: two {} tensors with role {}", model.name, side,
                            calrt::to_string(want.role)));
      return -1;
    }
    found = tensor.index;
  }
  if (found < 0) {
    step.fail(fmt::format("model {}: no {} tensor with role {}", model.name, side,
                          calrt::to_string(want.role)));
    return -1;
  }
  const calrt::TensorDesc& tensor = tensors[static_cast<size_t>(found)];
  bool ok = true;
  if (tensor.dtype != want.dtype) {
    step.fail(fmt::format("model {}: tensor {}: dtype: expected {}, actual {}", model.name,
                          tensor.name, calrt::to_string(want.dtype),
                          calrt::to_string(tensor.dtype)));
    ok = false;
  }
  if (tensor.shape != want.shape) {
    step.fail(fmt::format("model {}: tensor {}: shape: expected {}, actual {}", model.name,
                          tensor.name, shape_text(want.shape), shape_text(tensor.shape)));
    ok = false;
  }
  if (ok) {
    try {
      physical_shape(tensor);  // layout, tile_d0 and bytes agree with the shape
    } catch (const std::exception& error) {
      step.fail(fmt::format("model {}: {}", model.name, error.what()));
      ok = false;
    }
  }
  return ok ? found : -1;
}

// The index of the CSR named exactly `name`, or -1 after adding a failure.
int64_t check_csr(const calrt::ModelDesc& model, const char* name, StepResult& step) {
  if (const calrt::CsrDesc* csr = model.find_csr(name)) {
    return csr->index;
  }
  std::vector<std::string> names;
  for (const auto& csr : model.csrs) {
    names.push_back(csr.name);
  }
  step.fail(fmt::format("model {}: no CSR named {} (CSRs: {})", model.name, name,
                        fmt::join(names, ", ")));
  return -1;
}

// A decode that ranks on the device: top_ids int32 and top_logits bf16, both [batch, K].
// Returns whether the model has such an output (checked or not).
bool check_ranked_outputs(const calrt::CalbinInfo& info, ModelIo& io, int64_t batch,
                          StepResult& step) {
  const calrt::ModelDesc& model = io.desc;
  const calrt::TensorDesc* ids = nullptr;
  for (const auto& tensor : model.outputs) {
    if (tensor.role == calrt::TensorRole::top_ids) ids = &tensor;
  }
  if (ids == nullptr) {
    return false;
  }
  const int64_t k = ids->shape.size() == 2 ? ids->shape[1] : 0;
  if (k < 1 || k > int64_t{info.vocab}) {
    step.fail(
        fmt::format("model {}: tensor {}: shape: expected [{}, K] with 1 <= K <= vocab {}, "
                    "actual {}",
                    model.name, ids->name, batch, info.vocab, shape_text(ids->shape)));
    return true;
  }
  const int64_t id_index = check_tensor(
      model,
      {calrt::Direction::output, calrt::TensorRole::top_ids, calrt::Dtype::int32, {batch, k}},
      step);
  const int64_t value_index = check_tensor(
      model,
      {calrt::Direction::output, calrt::TensorRole::top_logits, calrt::Dtype::bf16, {batch, k}},
      step);
  for (const int64_t index : {id_index, value_index}) {
    if (index >= 0 && model.outputs[static_cast<size_t>(index)].tile_d0 != 0) {
      step.fail(fmt::format("model {}: tensor {}: layout: expected row_major, actual tiled",
                            model.name, model.outputs[static_cast<size_t>(index)].name));
      return true;
    }
  }
  if (id_index >= 0 && value_index >= 0) {
    io.top_k = static_cast<uint32_t>(k);
    io.top_ids_output = static_cast<uint32_t>(id_index);
    io.top_logits_output = static_cast<uint32_t>(value_index);
  }
  return true;
}

}  // namespace

void check_model_io(const calrt::CalbinInfo& info, ModelIo& io, calrt::ModelType type,
                    StepResult& step) {
  const calrt::ModelDesc& model = io.desc;
  if (model.type != type) {
    step.fail(fmt::format("model {}: type: expected {}, actual {}", model.name,
                          calrt::to_string(type), calrt::to_string(model.type)));
  }
  // A decode takes one token per batch row; a prefill one sequence (calrt.h, Kv_Apply).
  const int64_t batch = type == calrt::ModelType::decode ? int64_t{info.batch} : 1;
  const int64_t tokens = type == calrt::ModelType::prefill ? int64_t{info.prefill_chunk} : 1;
  const int64_t token = check_tensor(
      model,
      {calrt::Direction::input, calrt::TensorRole::token, calrt::Dtype::int32, {batch, tokens}},
      step);
  const int64_t position = check_tensor(
      model,
      {calrt::Direction::input, calrt::TensorRole::position, calrt::Dtype::int32, {batch, tokens}},
      step);
  io.top_k = 0;
  const bool has_ranked =
      type == calrt::ModelType::decode && check_ranked_outputs(info, io, batch, step);
  const int64_t logits = has_ranked ? 0
                                    : check_tensor(model,
                                                   {calrt::Direction::output,
                                                    calrt::TensorRole::logits,
                                                    calrt::Dtype::bf16,
                                                    {batch, int64_t{info.vocab}}},
                                                   step);
  const int64_t cur = check_csr(model, "cur_seq_len", step);
  const int64_t past = check_csr(model, "past_kv_cur_seq_len", step);
  if (token < 0 || position < 0 || logits < 0 || cur < 0 || past < 0 ||
      (has_ranked && io.top_k == 0)) {
    io.top_k = 0;
    return;
  }
  io.token_input = static_cast<uint32_t>(token);
  io.position_input = static_cast<uint32_t>(position);
  io.logits_output = static_cast<uint32_t>(logits);
  io.cur_seq_len_csr = static_cast<uint32_t>(cur);
  io.past_kv_csr = static_cast<uint32_t>(past);
}

}  // namespace runner
