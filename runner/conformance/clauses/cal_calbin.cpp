// CAL: calbin create and info. abi/CONFORMANCE.md#cal-calbin-create-and-info
#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include <utility>
#include <vector>
#include "runner/conformance/clauses/clauses.hpp"
#include "runner/conformance/scratch_dir.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

// calbin's enums count from 0 in the ABI's order; the ABI's from 1 (role from 0).
int abi_value(calbin::Dtype dtype) { return static_cast<int>(dtype) + 1; }
int abi_value(calbin::ModelType type) { return static_cast<int>(type) + 1; }
int abi_value(calbin::Layout::Kind kind) { return static_cast<int>(kind) + 1; }

// A copy of the calbin in a fresh directory of the suite's scratch directory, removed with
// this object (or with the scratch directory, when the clause's process dies first).
class CalbinCopy {
 public:
  CalbinCopy(const ClauseContext& ctx, const std::string& tag) : dir_(ctx.scratch, tag) {
    fs::copy(ctx.options.calbin, dir_.path(), fs::copy_options::recursive);
  }
  const fs::path& dir() const { return dir_.path(); }

 private:
  ScratchDir dir_;
};

CallOutcome create_calbin(ClauseContext& ctx, const calrt::Device& device, const std::string& path,
                          CalrtCalbin** out) {
  auto args = args_of<Calrt_Calbin_Create_Args>();
  args.device = device.get();
  args.path = path.c_str();
  args.timeout_ns = kClauseWaitNs;
  const CallOutcome outcome = CONF_CALL(ctx, Calbin_Create, args);
  *out = args.calbin;
  return outcome;
}

void expect_calbin_invalid(ClauseContext& ctx, const calrt::Device& device, const fs::path& path,
                           const std::string& names, const std::string& what) {
  CalrtCalbin* calbin = nullptr;
  const CallOutcome outcome = create_calbin(ctx, device, path.string(), &calbin);
  if (calbin != nullptr) {
    const calrt::Calbin adopted(calbin, {ctx.api});
    throw ClauseFailure("Calbin_Create of " + what + " created a calbin");
  }
  expect_code(outcome, CALRT_CALBIN_INVALID, "Calbin_Create of " + what);
  require(
      outcome.message.find(names) != std::string::npos,
      "Calbin_Create of " + what + ": message '" + outcome.message + "' does not name " + names);
}

void cal_missing(ClauseContext& ctx) {
  const calrt::Device device = ctx.open_device();
  const fs::path missing = ctx.options.calbin.parent_path() / "conformance-no-such-calbin";
  expect_calbin_invalid(ctx, device, missing, "conformance-no-such-calbin", "a missing path");
}

void cal_malformed(ClauseContext& ctx) {
  const calrt::Device device = ctx.open_device();
  {
    const CalbinCopy copy(ctx, "manifest");
    const fs::path manifest = copy.dir() / "manifest.json";
    fs::resize_file(manifest, fs::file_size(manifest) / 2);
    expect_calbin_invalid(ctx, device, copy.dir(), "manifest.json", "a truncated manifest.json");
  }
  require(!ctx.manifest.files.empty(), "the calbin lists no files to corrupt");
  const std::string victim = ctx.manifest.files.front().path;
  const CalbinCopy copy(ctx, "hash");
  {
    std::fstream file(copy.dir() / victim, std::ios::in | std::ios::out | std::ios::binary);
    char byte = 0;
    file.seekg(0);
    file.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x40);
    file.seekp(0);
    file.write(&byte, 1);
    require(static_cast<bool>(file), "could not corrupt the copy's " + victim);
  }
  expect_calbin_invalid(ctx, device, copy.dir(), fs::path(victim).filename().string(),
                        "a calbin with one byte of " + victim + " flipped");
}

void cal_info(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::calbin);
  const calrt::CalbinInfo& info = f.info;
  const calbin::Manifest& m = ctx.manifest;
  expect_equal(info.calbin_version, m.calbin_version, "calbin_version");
  expect_equal(info.architecture, m.architecture, "architecture");
  expect_equal(info.runtime_abi, m.runtime_abi, "runtime_abi");
  expect_equal(info.chip_count, m.chips, "chip_count");
  expect_equal(info.model_count, m.models.size(), "model_count");
  expect_equal(info.vocab, m.llm.vocab, "vocab");
  expect_equal(info.context, m.llm.context, "context");
  expect_equal(info.batch, m.llm.batch, "batch");
  expect_equal(info.layers, m.llm.layers, "layers");
  expect_equal(info.hidden, m.llm.hidden, "hidden");
  expect_equal(info.q_heads, m.llm.q_heads, "q_heads");
  expect_equal(info.kv_heads, m.llm.kv_heads, "kv_heads");
  expect_equal(info.head_dim, m.llm.head_dim, "head_dim");
  expect_equal(info.prefill_chunk, m.llm.prefill_chunk, "prefill_chunk");
  require(!info.configured, "Calbin_GetInfo says configured before Calbin_Configure");
}

void cal_models(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::calbin);
  const std::vector<calrt::ModelDesc> models = f.calbin.models();
  expect_equal(models.size(), ctx.manifest.models.size(), "number of models");
  for (const calbin::Model& want : ctx.manifest.models) {
    const auto found = std::find_if(models.begin(), models.end(),
                                    [&](const calrt::ModelDesc& m) { return m.name == want.name; });
    require(found != models.end(), "model " + want.name + " of the manifest is not listed");
    expect_equal(static_cast<int>(found->type), abi_value(want.type), want.name + ": type");
    expect_equal(found->inputs.size(), want.inputs.size(), want.name + ": inputs");
    expect_equal(found->outputs.size(), want.outputs.size(), want.name + ": outputs");
    expect_equal(found->csrs.size(), want.csrs.size(), want.name + ": CSRs");
  }
  auto args = args_of<Calrt_Calbin_GetModel_Args>();
  args.calbin = f.calbin.get();
  args.model_index = f.info.model_count;
  expect_code(CONF_CALL(ctx, Calbin_GetModel, args), CALRT_OUT_OF_RANGE,
              "Calbin_GetModel(model_count)");
}

void check_tensor(const calrt::TensorDesc& got, const calbin::TensorDesc& want,
                  const std::string& where) {
  expect_equal(got.name, want.name, where + ": name");
  expect_equal(got.shape.size(), want.shape.size(), where + ": rank");
  require(got.shape == want.shape, where + ": dims differ from the calbin's");
  expect_equal(static_cast<int>(got.dtype), abi_value(want.dtype), where + ": dtype");
  expect_equal(static_cast<int>(got.layout), abi_value(want.layout.kind), where + ": layout");
  expect_equal(got.tile_d0, want.layout.tile_d0, where + ": tile_d0");
  expect_equal(got.bytes, want.bytes, where + ": size_bytes");
  const std::optional<uint64_t> bytes = calbin::tensor_bytes(want.shape, want.dtype, want.layout);
  require(bytes.has_value() && *bytes == got.bytes,
          fmt::format("{}: size_bytes {} does not follow from its shape, dtype and layout ({})",
                      where, got.bytes, bytes.value_or(0)));
}

void cal_descriptors(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::calbin);
  for (const calrt::ModelDesc& model : f.calbin.models()) {
    const calbin::Model* want = ctx.manifest.find_model(model.name);
    require(want != nullptr, "model " + model.name + " is not in the manifest");
    for (size_t i = 0; i < model.inputs.size() && i < want->inputs.size(); ++i) {
      check_tensor(model.inputs[i], want->inputs[i], model.name + " input " + std::to_string(i));
    }
    for (size_t i = 0; i < model.outputs.size() && i < want->outputs.size(); ++i) {
      check_tensor(model.outputs[i], want->outputs[i], model.name + " output " + std::to_string(i));
    }
    for (size_t i = 0; i < model.csrs.size() && i < want->csrs.size(); ++i) {
      expect_equal(model.csrs[i].name, want->csrs[i].name,
                   model.name + " CSR " + std::to_string(i));
    }
    auto tensor = args_of<Calrt_Calbin_GetTensor_Args>();
    tensor.calbin = f.calbin.get();
    tensor.model_name = model.name.c_str();
    tensor.direction = CALRT_INPUT;
    tensor.index = static_cast<uint32_t>(model.inputs.size());
    expect_code(CONF_CALL(ctx, Calbin_GetTensor, tensor), CALRT_OUT_OF_RANGE,
                model.name + ": Calbin_GetTensor(input_count)");
    auto csr = args_of<Calrt_Calbin_GetCsr_Args>();
    csr.calbin = f.calbin.get();
    csr.model_name = model.name.c_str();
    csr.index = static_cast<uint32_t>(model.csrs.size());
    expect_code(CONF_CALL(ctx, Calbin_GetCsr, csr), CALRT_OUT_OF_RANGE,
                model.name + ": Calbin_GetCsr(csr_count)");
    const std::string prefix = model.name.substr(0, model.name.size() - 1);
    csr.model_name = prefix.c_str();
    csr.index = 0;
    expect_code(CONF_CALL(ctx, Calbin_GetCsr, csr), CALRT_NOT_FOUND,
                "Calbin_GetCsr of model '" + prefix + "' (a prefix)");
  }
}

// Model names are compared exactly by every call that takes one: a prefix, an extension and
// a case-changed spelling of a real name are NOT_FOUND (and Job_Submit creates no job). A
// runtime that folds case or matches prefixes runs a model the caller did not name.
void cal_exact_names(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  const std::string real = f.prefill.name();
  std::string upper = real;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::string lower = real;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::vector<std::pair<std::string, const char*>> variants = {
      {real.substr(0, real.size() - 1), "a prefix"}, {real + "_", "an extension"}};
  if (upper != real) {
    variants.emplace_back(upper, "upper case");
  }
  if (lower != real) {
    variants.emplace_back(lower, "lower case");
  }
  for (const auto& [name, what] : variants) {
    const std::string quoted = "'" + name + "' (" + what + " of '" + real + "')";
    auto tensor = args_of<Calrt_Calbin_GetTensor_Args>();
    tensor.calbin = f.calbin.get();
    tensor.model_name = name.c_str();
    tensor.direction = CALRT_INPUT;
    tensor.index = 0;
    expect_code(CONF_CALL(ctx, Calbin_GetTensor, tensor), CALRT_NOT_FOUND,
                "Calbin_GetTensor of model " + quoted);
    auto csr = args_of<Calrt_Calbin_GetCsr_Args>();
    csr.calbin = f.calbin.get();
    csr.model_name = name.c_str();
    csr.index = 0;
    expect_code(CONF_CALL(ctx, Calbin_GetCsr, csr), CALRT_NOT_FOUND,
                "Calbin_GetCsr of model " + quoted);
    expect_code(ctx.submit_raw(f, name, f.prefill.input.get(), f.prefill.output.get()),
                CALRT_NOT_FOUND, "Job_Submit of model " + quoted);
  }
}

}  // namespace

std::vector<Clause> clauses_cal() {
  return {
      {"CAL.1", "CAL", "missing calbin rejected", cal_missing},
      {"CAL.2", "CAL", "malformed calbin rejected", cal_malformed},
      {"CAL.3", "CAL", "LLM info matches the calbin", cal_info},
      {"CAL.4", "CAL", "model list", cal_models},
      {"CAL.5", "CAL", "tensor and CSR descriptors", cal_descriptors},
      {"CAL.6", "CAL", "model names are exact", cal_exact_names},
  };
}

}  // namespace runner
