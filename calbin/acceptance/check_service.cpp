// Checks that a calbin agrees with the service manifest the LLM service will start from.
#include <algorithm>
#include <optional>

#include "calbin/acceptance/check_context.hpp"

namespace calbin::acceptance {
namespace {

std::string mismatch(const CheckContext& c, const std::string& key, const std::string& service,
                     const std::string& calbin_field, const std::string& calbin) {
  return c.service_file + ": " + key + " is " + service + " but " + c.manifest_file + " " +
         calbin_field + " is " + calbin;
}

const Model* model_for(const CheckContext& c, const std::string& name) {
  return c.manifest.find_model(name);
}

void check_one_model(const CheckContext& c, CheckResult& result, const std::string& key,
                     const std::string& name, ModelType type) {
  const Model* model = model_for(c, name);
  if (model == nullptr) {
    std::string near;
    for (const Model& m : c.manifest.models) {
      if (!name.empty() && m.name.find(name) != std::string::npos) {
        near = "; \"" + m.name + "\" contains it, but names must match exactly";
      }
    }
    fail_check(result, c.service_file + ": " + key + " \"" + name +
                           "\" is not a model of the calbin" + near);
  } else if (model->type != type) {
    fail_check(result, c.service_file + ": " + key + " \"" + name + "\" is of type " +
                           std::string(to_string(model->type)) + ", not " +
                           std::string(to_string(type)));
  }
}

const TensorDesc* tensor_for(const Model& model, const TensorRef& ref) {
  const auto& list = ref.output ? model.outputs : model.inputs;
  return ref.index < list.size() ? &list[ref.index] : nullptr;
}

std::string ref_text(const TensorRef& ref) {
  return std::string(ref.output ? "outputs[" : "inputs[") + std::to_string(ref.index) + "]";
}

void check_tensor_ref(const CheckContext& c, CheckResult& result, const Model& model,
                      const char* key, const TensorRef& ref, TensorRole role) {
  const TensorDesc* t = tensor_for(model, ref);
  if (t == nullptr) {
    fail_check(result, c.service_file + ": tensors." + key + " " + ref_text(ref) +
                           " does not exist in model \"" + model.name + "\"");
  } else if (t->role != role) {
    fail_check(result, c.service_file + ": tensors." + key + " " + ref_text(ref) + " of model \"" +
                           model.name + "\" is \"" + t->name + "\" with role " +
                           std::string(to_string(t->role)) + ", not " +
                           std::string(to_string(role)));
  }
}

void check_csr_ref(const CheckContext& c, CheckResult& result, const Model& model, const char* key,
                   const CsrRef& ref) {
  const std::string named =
      c.service_file + ": csr." + key + " " + ref.name + "[" + std::to_string(ref.index) + "]";
  const bool exists = std::any_of(model.csrs.begin(), model.csrs.end(),
                                  [&](const Csr& csr) { return csr.name == ref.name; });
  if (!exists) {
    fail_check(result,
               named + ": \"" + ref.name + "\" is not a CSR of model \"" + model.name + "\"");
  } else if (ref.index >= c.manifest.llm.batch) {
    // A CSR holds one value per sequence of the batch; an element past it is another
    // register's address or nothing.
    fail_check(result, named + ": element " + std::to_string(ref.index) + " is past the batch of " +
                           std::to_string(c.manifest.llm.batch) + " (model \"" + model.name +
                           "\")");
  }
}

// Full rows against a decode that ranks on the device: the service's decode_top_k and the
// model's top_ids output must agree. True when the decode is ranked (its logits binding does
// not apply then).
bool ranked_outputs(const CheckContext& c, CheckResult& result, const Model& model) {
  const auto ids = std::find_if(model.outputs.begin(), model.outputs.end(),
                                [](const TensorDesc& t) { return t.role == TensorRole::kTopIds; });
  const std::optional<uint32_t>& declared = c.service->decode_top_k;
  if (ids == model.outputs.end()) {
    if (declared) {
      fail_check(result, c.service_file + ": decode_top_k is " + std::to_string(*declared) +
                             " but model \"" + model.name + "\" in " + c.manifest_file +
                             " gives full logits rows (no top_ids output)");
    }
    return false;
  }
  const int64_t k = ids->shape.size() == 2 ? ids->shape[1] : 0;
  const TensorDesc* bound = tensor_for(model, c.service->logits);
  if (!declared && bound != nullptr && bound->role == TensorRole::kLogits) {
    return false;  // full rows are there as well: the service reads those
  }
  if (!declared) {
    fail_check(result, c.service_file +
                           ": decode_top_k is not set (full logits rows) but model \"" +
                           model.name + "\" in " + c.manifest_file + " ranks on the device: \"" +
                           ids->name + "\" gives its " + std::to_string(k) + " best ids");
  } else if (k != int64_t{*declared}) {
    fail_check(result, c.service_file + ": decode_top_k is " + std::to_string(*declared) +
                           " but model \"" + model.name + "\" in " + c.manifest_file +
                           " tensor \"" + ids->name + "\" gives " + std::to_string(k) + " ids");
  }
  const bool values =
      std::any_of(model.outputs.begin(), model.outputs.end(),
                  [](const TensorDesc& t) { return t.role == TensorRole::kTopLogits; });
  if (!values) {
    fail_check(result, c.manifest_file + ": model \"" + model.name +
                           "\" has a top_ids output but no top_logits output");
  }
  return true;
}

}  // namespace

void check_service_models(const CheckContext& c, CheckResult& result) {
  check_one_model(c, result, "models.prefill", c.service->prefill_model, ModelType::kPrefill);
  check_one_model(c, result, "models.decode", c.service->decode_model, ModelType::kDecode);
}

void check_service_dimensions(const CheckContext& c, CheckResult& result) {
  const ServiceManifest& s = *c.service;
  const LlmInfo& llm = c.manifest.llm;
  const std::pair<const char*, std::pair<uint32_t, uint32_t>> pairs[] = {
      {"batch", {s.batch, llm.batch}},
      {"context", {s.context, llm.context}},
      {"vocab", {s.vocab, llm.vocab}},
  };
  for (const auto& [key, values] : pairs) {
    if (values.first != values.second) {
      fail_check(result, mismatch(c, key, std::to_string(values.first), std::string("llm.") + key,
                                  std::to_string(values.second)));
    }
  }
}

void check_service_chip_mask(const CheckContext& c, CheckResult& result) {
  if (c.service->chip_mask && *c.service->chip_mask != c.manifest.chip_mask) {
    fail_check(result, mismatch(c, "chip_mask", std::to_string(*c.service->chip_mask), "chip_mask",
                                std::to_string(c.manifest.chip_mask)));
  }
}

void check_service_dtypes(const CheckContext& c, CheckResult& result) {
  const ServiceManifest& s = *c.service;
  if (s.kv_dtype && (*s.kv_dtype != c.manifest.llm.k_dtype)) {
    fail_check(result, mismatch(c, "kv_dtype", std::string(to_string(*s.kv_dtype)), "llm.k_dtype",
                                std::string(to_string(c.manifest.llm.k_dtype))));
  }
  if (!s.logits_dtype) {
    return;
  }
  for (const std::string* name : {&s.prefill_model, &s.decode_model}) {
    if (name == &s.decode_model && s.decode_top_k) {
      continue;  // a ranked decode has no logits row; check_service_tensors checks its outputs
    }
    const Model* model = model_for(c, *name);
    const TensorDesc* t = model ? tensor_for(*model, s.logits) : nullptr;
    if (t != nullptr && t->dtype != *s.logits_dtype) {
      fail_check(result, mismatch(c, "logits_dtype", std::string(to_string(*s.logits_dtype)),
                                  "model \"" + *name + "\" tensor \"" + t->name + "\".dtype",
                                  std::string(to_string(t->dtype))));
    }
  }
}

void check_service_tensors(const CheckContext& c, CheckResult& result) {
  const ServiceManifest& s = *c.service;
  for (const std::string* name : {&s.prefill_model, &s.decode_model}) {
    const Model* model = model_for(c, *name);
    if (model == nullptr) {
      skip_check(result, "model \"" + *name + "\" not found (see service.models)");
      continue;
    }
    check_tensor_ref(c, result, *model, "token", s.token, TensorRole::kToken);
    check_tensor_ref(c, result, *model, "position", s.position, TensorRole::kPosition);
    if (name == &s.decode_model && ranked_outputs(c, result, *model)) {
      continue;
    }
    check_tensor_ref(c, result, *model, "logits", s.logits, TensorRole::kLogits);
    check_csr_ref(c, result, *model, "current", s.current);
    check_csr_ref(c, result, *model, "past_current", s.past_current);
  }
}

void check_service_versions(const CheckContext& c, CheckResult& result) {
  const ServiceManifest& s = *c.service;
  const Manifest& m = c.manifest;
  const std::pair<const char*, std::pair<const std::string*, const std::string*>> pairs[] = {
      {"architecture", {&s.architecture, &m.architecture}},
      {"calbin_version", {&s.calbin_version, &m.calbin_version}},
      {"runtime_abi", {&s.runtime_abi, &m.runtime_abi}},
  };
  for (const auto& [key, values] : pairs) {
    if (*values.first != *values.second) {
      fail_check(result,
                 mismatch(c, key, "\"" + *values.first + "\"", key, "\"" + *values.second + "\""));
    }
  }
}

}  // namespace calbin::acceptance
