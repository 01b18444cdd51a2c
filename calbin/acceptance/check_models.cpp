// Checks on the models of a calbin and their I/O tensors.
#include <bit>

#include "calbin/acceptance/check_context.hpp"

namespace calbin::acceptance {
namespace {

std::string model_at(size_t index, const Model& model) {
  return "models[" + std::to_string(index) + "] \"" + model.name + "\"";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

// The metadata label each model type must carry; vendor calbins have been seen labelling
// prefill as llm_decode, which sends the service down the wrong path.
std::string_view expected_metadata(ModelType type) {
  switch (type) {
    case ModelType::kPrefill:
      return "llm_prefill";
    case ModelType::kDecode:
      return "llm_decode";
    case ModelType::kKvUpdate:
      return "llm_kv_update";
  }
  return "";
}

void expect_shape(const CheckContext& c, CheckResult& result, const std::string& where,
                  const TensorDesc& tensor, const std::vector<int64_t>& expected) {
  if (tensor.shape != expected) {
    fail_check(result, c.manifest_file + ": " + where + " \"" + tensor.name + "\".shape is " +
                           shape_text(tensor.shape) + " but the LLM info implies " +
                           shape_text(expected));
  }
}

// A decode that ranks on the device (calrt.h, CALRT_ROLE_TOP_IDS): K of the vocabulary per
// row, ids int32 and logits bf16.
void check_ranked_output(const CheckContext& c, CheckResult& result, const Model& model,
                         const std::string& where, const TensorDesc& t, int64_t batch) {
  const LlmInfo& llm = c.manifest.llm;
  const std::string named =
      where + " \"" + t.name + "\" (role " + std::string(to_string(t.role)) + ")";
  if (model.type != ModelType::kDecode) {
    fail_check(result, c.manifest_file + ": " + named + ": only a decode model ranks on the " +
                           "device; this is a " + std::string(to_string(model.type)) + " model");
    return;
  }
  const int64_t k = t.shape.size() == 2 ? t.shape[1] : 0;
  if (k < 1 || k > static_cast<int64_t>(llm.vocab)) {
    fail_check(result, c.manifest_file + ": " + named + ".shape is " + shape_text(t.shape) +
                           "; a decode's ranked output is [batch, K] with 1 <= K <= vocab " +
                           std::to_string(llm.vocab));
  } else {
    expect_shape(c, result, where, t, {batch, k});
  }
  const Dtype wanted = t.role == TensorRole::kTopIds ? Dtype::kInt32 : Dtype::kBf16;
  if (t.dtype != wanted) {
    fail_check(result,
               c.manifest_file + ": " + named + ".dtype is " + std::string(to_string(t.dtype)) +
                   " but " +
                   (wanted == Dtype::kInt32 ? "token ids are int32" : "ranked logits are bf16"));
  }
}

// A decode gives either its full rows or its ranked ids and their logits, both of them.
void check_decode_outputs(const CheckContext& c, CheckResult& result, size_t index) {
  const Model& model = c.manifest.models[index];
  size_t logits = 0, ids = 0, values = 0;
  for (const TensorDesc& t : model.outputs) {
    logits += t.role == TensorRole::kLogits ? 1 : 0;
    ids += t.role == TensorRole::kTopIds ? 1 : 0;
    values += t.role == TensorRole::kTopLogits ? 1 : 0;
  }
  if (ids + values == 0) return;
  if (ids != 1 || values != 1 || logits != 0) {
    fail_check(result, c.manifest_file + ": " + model_at(index, model) +
                           ".outputs: " + std::to_string(logits) + " logits, " +
                           std::to_string(ids) + " top_ids and " + std::to_string(values) +
                           " top_logits; a decode gives its full rows (one logits) or its ranked " +
                           "output (one top_ids and one top_logits), not both");
  }
}

void check_model_io(const CheckContext& c, CheckResult& result, size_t index) {
  const Model& model = c.manifest.models[index];
  const LlmInfo& llm = c.manifest.llm;
  // A decode takes one token per batch row; a prefill one sequence (calrt.h, Kv_Apply).
  const int64_t batch = model.type == ModelType::kDecode ? int64_t{llm.batch} : 1;
  const int64_t tokens = model.type == ModelType::kPrefill ? llm.prefill_chunk : 1;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const TensorDesc& t = model.inputs[i];
    const std::string where = model_at(index, model) + ".inputs[" + std::to_string(i) + "]";
    if (t.role == TensorRole::kToken || t.role == TensorRole::kPosition) {
      expect_shape(c, result, where, t, {batch, tokens});
    }
  }
  for (size_t i = 0; i < model.outputs.size(); ++i) {
    const TensorDesc& t = model.outputs[i];
    const std::string where = model_at(index, model) + ".outputs[" + std::to_string(i) + "]";
    if (t.role == TensorRole::kLogits) {
      expect_shape(c, result, where, t, {batch, static_cast<int64_t>(llm.vocab)});
    }
    if (t.role == TensorRole::kTopIds || t.role == TensorRole::kTopLogits) {
      check_ranked_output(c, result, model, where, t, batch);
    }
  }
  check_decode_outputs(c, result, index);
}

}  // namespace

void check_model_types(const CheckContext& c, CheckResult& result) {
  // Unknown type strings are rejected by the reader and attributed here by run_checks; what
  // remains is a calbin without the two models a service needs.
  bool prefill = false;
  bool decode = false;
  for (const Model& model : c.manifest.models) {
    prefill |= model.type == ModelType::kPrefill;
    decode |= model.type == ModelType::kDecode;
  }
  if (!prefill || !decode) {
    fail_check(result, c.manifest_file + ": models: needs a prefill and a decode model; has " +
                           std::string(prefill ? "" : "no prefill") +
                           (!prefill && !decode ? " and " : "") +
                           std::string(decode ? "" : "no decode"));
  }
}

void check_model_metadata(const CheckContext& c, CheckResult& result) {
  for (size_t i = 0; i < c.manifest.models.size(); ++i) {
    const Model& model = c.manifest.models[i];
    const std::string_view expected = expected_metadata(model.type);
    if (model.metadata_type != expected) {
      fail_check(result, c.manifest_file + ": " + model_at(i, model) + ".metadata_type is \"" +
                             model.metadata_type + "\" but the model is of type " +
                             std::string(to_string(model.type)) + " (expected \"" +
                             std::string(expected) + "\")");
    }
  }
}

void check_model_names(const CheckContext& c, CheckResult& result) {
  const auto& models = c.manifest.models;
  for (size_t i = 0; i < models.size(); ++i) {
    if (models[i].name.empty()) {
      fail_check(result, c.manifest_file + ": models[" + std::to_string(i) + "].name is empty");
    }
    for (size_t j = 0; j < models.size(); ++j) {
      if (i != j && !models[i].name.empty() &&
          models[j].name.find(models[i].name) != std::string::npos) {
        fail_check(result, c.manifest_file + ": " + model_at(i, models[i]) + " is a substring of " +
                               model_at(j, models[j]) +
                               ": a substring lookup would pick the wrong model");
      }
    }
  }
}

void check_llm_shapes(const CheckContext& c, CheckResult& result) {
  const LlmInfo& llm = c.manifest.llm;
  if (llm.prefill_chunk == 0 || llm.prefill_chunk > llm.context) {
    fail_check(result, c.manifest_file + ": llm.prefill_chunk " +
                           std::to_string(llm.prefill_chunk) + " must be in 1.." +
                           std::to_string(llm.context) + " (llm.context)");
  }
  if (llm.kv_heads == 0 || llm.q_heads % llm.kv_heads != 0) {
    fail_check(result, c.manifest_file + ": llm.q_heads " + std::to_string(llm.q_heads) +
                           " is not a multiple of llm.kv_heads " + std::to_string(llm.kv_heads));
  }
  for (size_t i = 0; i < c.manifest.models.size(); ++i) {
    check_model_io(c, result, i);
  }
}

void check_chip_mask(const CheckContext& c, CheckResult& result) {
  const Manifest& m = c.manifest;
  const uint32_t all = m.chips >= 32 ? ~0u : (1u << m.chips) - 1;
  if (static_cast<uint32_t>(std::popcount(m.chip_mask)) != m.chips || (m.chip_mask & ~all)) {
    fail_check(result, c.manifest_file + ": chip_mask " + std::to_string(m.chip_mask) +
                           " does not name exactly chips 0.." + std::to_string(m.chips - 1));
  }
  // Every piece of the calbin that lives on chips names at least one, and only chips the
  // device has: a weight shard on chip 4 of a two-chip calbin would otherwise pass here and
  // fail only when a smoke loads it.
  const auto check_mask = [&](const std::string& what, uint32_t mask) {
    if (mask == 0 || (mask & ~m.chip_mask) != 0) {
      fail_check(result, c.manifest_file + ": " + what + ".chip_mask " + std::to_string(mask) +
                             " is empty or names a chip outside chip_mask " +
                             std::to_string(m.chip_mask));
    }
  };
  for (size_t i = 0; i < m.param_blocks.size(); ++i) {
    check_mask("param_blocks[" + std::to_string(i) + "] \"" + m.param_blocks[i].name + "\"",
               m.param_blocks[i].chip_mask);
  }
  for (size_t i = 0; i < m.weights.size(); ++i) {
    check_mask("weights[" + std::to_string(i) + "] \"" + m.weights[i].name + "\".shard",
               m.weights[i].shard.chip_mask);
  }
  for (const Model& model : m.models) {
    for (const auto* list : {&model.inputs, &model.outputs}) {
      const char* side = list == &model.inputs ? "inputs" : "outputs";
      for (size_t i = 0; i < list->size(); ++i) {
        check_mask("models \"" + model.name + "\"." + side + "[" + std::to_string(i) + "] \"" +
                       (*list)[i].name + "\"",
                   (*list)[i].chip_mask);
      }
    }
  }
}

}  // namespace calbin::acceptance
