// Clauses CAL (calbin create and info), CFG (configure and memory), BUF (buffers), MAP
// (map/unmap) and CSR of abi/CONFORMANCE.md.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "runner/conformance_clauses.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

// calbin's enums count from 0 in the ABI's order; the ABI's from 1 (role from 0).
int abi_value(calbin::Dtype dtype) { return static_cast<int>(dtype) + 1; }
int abi_value(calbin::ModelType type) { return static_cast<int>(type) + 1; }
int abi_value(calbin::Layout::Kind kind) { return static_cast<int>(kind) + 1; }

// A copy of the calbin in a fresh temporary directory, removed with this object.
class CalbinCopy {
 public:
  explicit CalbinCopy(const fs::path& source, const std::string& tag) {
    static int serial = 0;
    dir_ = fs::temp_directory_path() /
           fmt::format("calrt-conformance-{}-{}-{}", ::getpid(), tag, ++serial);
    fs::remove_all(dir_);
    fs::copy(source, dir_, fs::copy_options::recursive);
  }
  ~CalbinCopy() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  CalbinCopy(const CalbinCopy&) = delete;
  CalbinCopy& operator=(const CalbinCopy&) = delete;
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

Outcome create_calbin(ClauseContext& ctx, const calrt::Device& device, const std::string& path,
                      CalrtCalbin** out) {
  auto args = args_of<Calrt_Calbin_Create_Args>();
  args.device = device.get();
  args.path = path.c_str();
  args.timeout_ns = kClauseWaitNs;
  const Outcome outcome = CONF_CALL(ctx, Calbin_Create, args);
  *out = args.calbin;
  return outcome;
}

void expect_calbin_invalid(ClauseContext& ctx, const calrt::Device& device, const fs::path& path,
                           const std::string& names, const std::string& what) {
  CalrtCalbin* calbin = nullptr;
  const Outcome outcome = create_calbin(ctx, device, path.string(), &calbin);
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
    const CalbinCopy copy(ctx.options.calbin, "manifest");
    const fs::path manifest = copy.dir() / "manifest.json";
    fs::resize_file(manifest, fs::file_size(manifest) / 2);
    expect_calbin_invalid(ctx, device, copy.dir(), "manifest.json", "a truncated manifest.json");
  }
  require(!ctx.manifest.files.empty(), "the calbin lists no files to corrupt");
  const std::string victim = ctx.manifest.files.front().path;
  const CalbinCopy copy(ctx.options.calbin, "hash");
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

template <class A, class B>
void expect_equal(const A& actual, const B& expected, const std::string& what) {
  require(actual == expected,
          fmt::format("{}: runtime says {}, the calbin {}", what, actual, expected));
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

std::vector<uint64_t> dram_used(const calrt::Device& device, uint32_t chips) {
  std::vector<uint64_t> used;
  for (uint32_t chip = 0; chip < chips; ++chip) {
    const calrt::ChipStatus status = device.chip_status(chip);
    require(status.dram_used_bytes <= status.dram_total_bytes,
            fmt::format("chip {}: dram_used_bytes {} exceeds dram_total_bytes {}", chip,
                        status.dram_used_bytes, status.dram_total_bytes));
    used.push_back(status.dram_used_bytes);
  }
  return used;
}

void cfg_configure(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::calbin);
  const calrt::ConfigureResult result = f.calbin.configure(kClauseWait);
  const calrt::DeviceStatus status = f.device.status();
  expect_equal(result.memory_used_bytes.size(), status.chip_count, "configure chip_count");
  for (uint32_t chip = 0; chip < result.memory_used_bytes.size(); ++chip) {
    if ((ctx.manifest.chip_mask >> chip) & 1u) {
      require(result.memory_used_bytes[chip] > 0,
              fmt::format("configure reports no memory used on chip {} of the chip mask", chip));
    }
  }
  require(f.calbin.info().configured, "Calbin_GetInfo says not configured after configure");
  require(status.state == calrt::DeviceState::configured,
          fmt::format("device is {} after configure, expected CONFIGURED",
                      calrt::to_string(status.state)));
}

void cfg_memory(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::calbin);
  const uint32_t chips = f.device.status().chip_count;
  const std::vector<uint64_t> before = dram_used(f.device, chips);
  const calrt::ConfigureResult result = f.calbin.configure(kClauseWait);
  const std::vector<uint64_t> after = dram_used(f.device, chips);
  for (uint32_t chip = 0; chip < chips && chip < result.memory_used_bytes.size(); ++chip) {
    require(after[chip] - before[chip] == result.memory_used_bytes[chip],
            fmt::format("chip {}: dram_used_bytes grew by {}, configure reported {}", chip,
                        after[chip] - before[chip], result.memory_used_bytes[chip]));
  }
  f.calbin.destroy();
  const std::vector<uint64_t> released = dram_used(f.device, chips);
  require(released == before, "dram_used_bytes did not fall back after Calbin_Destroy");
  const calrt::DeviceState state = f.device.status().state;
  require(state == calrt::DeviceState::open,
          fmt::format("device is {} after destroying its only calbin, expected OPEN",
                      calrt::to_string(state)));
}

void cfg_twice(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  const uint32_t chips = f.device.status().chip_count;
  const std::vector<uint64_t> before = dram_used(f.device, chips);
  auto args = args_of<Calrt_Calbin_Configure_Args>();
  args.calbin = f.calbin.get();
  args.timeout_ns = kClauseWaitNs;
  expect_code(CONF_CALL(ctx, Calbin_Configure, args), CALRT_WRONG_STATE,
              "Calbin_Configure of a configured calbin");
  require(dram_used(f.device, chips) == before, "a refused configure changed dram_used_bytes");
}

void cfg_not_configured(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::calbin);
  const std::string name = ctx.manifest.models.front().name;
  auto buffer = args_of<Calrt_Buffer_Create_Args>();
  buffer.calbin = f.calbin.get();
  buffer.model_name = name.c_str();
  buffer.direction = CALRT_INPUT;
  expect_code(CONF_CALL(ctx, Buffer_Create, buffer), CALRT_NOT_CONFIGURED,
              "Buffer_Create before configure");
  auto kv = args_of<Calrt_Kv_Allocate_Args>();
  kv.calbin = f.calbin.get();
  kv.capacity_tokens = 1;
  expect_code(CONF_CALL(ctx, Kv_Allocate, kv), CALRT_NOT_CONFIGURED,
              "Kv_Allocate before configure");
  auto capacity = args_of<Calrt_Kv_Capacity_Args>();
  capacity.calbin = f.calbin.get();
  expect_code(CONF_CALL(ctx, Kv_Capacity, capacity), CALRT_NOT_CONFIGURED,
              "Kv_Capacity before configure");
}

void buf_exact_name(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const std::string name = ctx.manifest.models.front().name;
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  expect_code(ctx.create_buffer(f, name, CALRT_INPUT, 0), CALRT_OK, "Buffer_Create(" + name + ")");
  for (const std::string& wrong : {name.substr(0, name.size() - 1), name + "_x", upper}) {
    const Outcome outcome = ctx.create_buffer(f, wrong, CALRT_INPUT, 0);
    expect_code(outcome, CALRT_NOT_FOUND, "Buffer_Create('" + wrong + "')");
    require(outcome.message.find(name) != std::string::npos, "Buffer_Create('" + wrong +
                                                                 "'): message '" + outcome.message +
                                                                 "' does not list the models");
  }
}

void buf_tensors(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  for (int side = 0; side < 2; ++side) {
    calrt::Buffer& buffer = side == 0 ? f.prefill.input : f.prefill.output;
    for (const calrt::TensorDesc& tensor :
         side == 0 ? f.prefill.desc.inputs : f.prefill.desc.outputs) {
      const calrt::Mapping mapping = buffer.map(tensor.index, kClauseWait);
      expect_equal(mapping.size(), tensor.bytes, "mapped size of " + tensor.name);
      const auto bytes = mapping.bytes();
      require(
          std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; }),
          "tensor " + tensor.name + " of a new buffer is not zero");
    }
  }
  for (const calrt::CsrDesc& csr : f.prefill.desc.csrs) {
    expect_equal(f.prefill.input.csr(csr.index), 0u, "CSR " + csr.name + " of a new buffer");
  }
}

void buf_direction_slot(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const std::string name = ctx.manifest.models.front().name;
  for (const int direction : {0, int{CALRT_DIRECTION_COUNT_}}) {
    expect_code(ctx.create_buffer(f, name, direction, 0), CALRT_INVALID_ARGUMENT,
                fmt::format("Buffer_Create with direction {}", direction));
  }
  expect_code(ctx.create_buffer(f, name, CALRT_INPUT, 1), CALRT_INVALID_ARGUMENT,
              "Buffer_Create with slot 1 in sync mode");
}

Outcome map_tensor(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index, void** data = nullptr) {
  auto args = args_of<Calrt_Buffer_Map_Args>();
  args.buffer = buffer;
  args.tensor_index = index;
  args.timeout_ns = kClauseWaitNs;
  const Outcome outcome = CONF_CALL(ctx, Buffer_Map, args);
  if (data != nullptr) {
    *data = args.data;
  }
  return outcome;
}

Outcome unmap_tensor(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index) {
  auto args = args_of<Calrt_Buffer_Unmap_Args>();
  args.buffer = buffer;
  args.tensor_index = index;
  return CONF_CALL(ctx, Buffer_Unmap, args);
}

void map_persists(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  const uint32_t index = f.prefill.token_input;
  {
    const calrt::Mapping mapping = f.prefill.input.map(index, kClauseWait);
    auto bytes = mapping.bytes();
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<std::byte>((i * 7 + 3) & 0x7f);
    }
  }
  const calrt::Mapping mapping = f.prefill.input.map(index, kClauseWait);
  const auto bytes = mapping.bytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    require(bytes[i] == static_cast<std::byte>((i * 7 + 3) & 0x7f),
            fmt::format("byte {} of the token tensor changed between unmap and map", i));
  }
}

void map_twice(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  const calrt::Mapping first = f.prefill.input.map(0, kClauseWait);
  expect_code(map_tensor(ctx, f.prefill.input.get(), 0), CALRT_BUSY, "a second Buffer_Map");
}

void map_unmap_rules(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  CalrtBuffer* buffer = f.prefill.input.get();
  expect_code(unmap_tensor(ctx, buffer, 0), CALRT_WRONG_STATE,
              "Buffer_Unmap of an unmapped tensor");
  expect_code(map_tensor(ctx, buffer, 0), CALRT_OK, "Buffer_Map");
  expect_code(unmap_tensor(ctx, buffer, 0), CALRT_OK, "Buffer_Unmap");
  expect_code(unmap_tensor(ctx, buffer, 0), CALRT_WRONG_STATE, "a second Buffer_Unmap");
  const auto count = static_cast<uint32_t>(f.prefill.desc.inputs.size());
  expect_code(map_tensor(ctx, buffer, count), CALRT_OUT_OF_RANGE, "Buffer_Map(tensor count)");
  expect_code(unmap_tensor(ctx, buffer, count), CALRT_OUT_OF_RANGE, "Buffer_Unmap(tensor count)");
}

Outcome set_csr(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index, uint64_t value) {
  auto args = args_of<Calrt_Buffer_SetCsr_Args>();
  args.buffer = buffer;
  args.csr_index = index;
  args.value = value;
  return CONF_CALL(ctx, Buffer_SetCsr, args);
}

Outcome get_csr(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index, uint64_t* value) {
  auto args = args_of<Calrt_Buffer_GetCsr_Args>();
  args.buffer = buffer;
  args.csr_index = index;
  const Outcome outcome = CONF_CALL(ctx, Buffer_GetCsr, args);
  *value = args.value;
  return outcome;
}

Outcome destroy_buffer(ClauseContext& ctx, CalrtBuffer* buffer) {
  auto args = args_of<Calrt_Buffer_Destroy_Args>();
  args.buffer = buffer;
  return CONF_CALL(ctx, Buffer_Destroy, args);
}

void map_in_flight(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit_held(f, f.prefill);
  CalrtBuffer* input = f.prefill.input.get();
  CalrtBuffer* output = f.prefill.output.get();
  const Outcome mapped = map_tensor(ctx, input, 0);
  expect_code(mapped, CALRT_BUSY, "Buffer_Map of an in-flight job's input");
  require(mapped.message.find("job") != std::string::npos,
          "Buffer_Map BUSY message '" + mapped.message + "' does not name the job");
  expect_code(map_tensor(ctx, output, 0), CALRT_BUSY, "Buffer_Map of an in-flight job's output");
  expect_code(set_csr(ctx, input, 0, 1), CALRT_BUSY, "Buffer_SetCsr of an in-flight job's input");
  uint64_t value = 0;
  expect_code(get_csr(ctx, input, f.prefill.cur_seq_len_csr, &value), CALRT_OK,
              "Buffer_GetCsr of an in-flight job's input");
  expect_equal(value, kJobTokens, "cur_seq_len read while in flight");
  expect_code(destroy_buffer(ctx, input), CALRT_BUSY, "Buffer_Destroy of an in-flight job's input");
  expect_code(destroy_buffer(ctx, output), CALRT_BUSY,
              "Buffer_Destroy of an in-flight job's output");
  require(!job.status().is_final(), "the held job became final during the checks");
  job.cancel();
  job.wait(kClauseWait);
  expect_code(map_tensor(ctx, input, 0), CALRT_OK, "Buffer_Map after the job is final");
  expect_code(unmap_tensor(ctx, input, 0), CALRT_OK, "Buffer_Unmap");
  expect_code(set_csr(ctx, input, 0, 1), CALRT_OK, "Buffer_SetCsr after the job is final");
}

void map_then_submit(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  for (int side = 0; side < 2; ++side) {
    calrt::Buffer& buffer = side == 0 ? f.prefill.input : f.prefill.output;
    const calrt::Mapping mapping = buffer.map(0, kClauseWait);
    expect_code(ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get()),
                CALRT_BUSY,
                std::string("Job_Submit with a mapped ") + (side == 0 ? "input" : "output"));
  }
}

void csr_roundtrip(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  calrt::Buffer other = calrt::Buffer::create(f.calbin, f.prefill.name(), calrt::Direction::input);
  for (const calrt::CsrDesc& csr : f.prefill.desc.csrs) {
    for (const uint64_t value : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40, ~uint64_t{0}}) {
      f.prefill.input.set_csr(csr.index, value);
      expect_equal(f.prefill.input.csr(csr.index), value, "CSR " + csr.name + " read back");
      expect_equal(other.csr(csr.index), 0u, "CSR " + csr.name + " of another buffer");
    }
  }
}

void csr_range(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::buffers);
  const auto count = static_cast<uint32_t>(f.prefill.desc.csrs.size());
  expect_code(set_csr(ctx, f.prefill.input.get(), count, 1), CALRT_OUT_OF_RANGE,
              "Buffer_SetCsr(csr_count)");
  uint64_t value = 0;
  expect_code(get_csr(ctx, f.prefill.input.get(), count, &value), CALRT_OUT_OF_RANGE,
              "Buffer_GetCsr(csr_count)");
}

void csr_output(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::buffers);
  expect_code(set_csr(ctx, f.prefill.output.get(), 0, 1), CALRT_INVALID_ARGUMENT,
              "Buffer_SetCsr of an output buffer");
  uint64_t value = 0;
  expect_code(get_csr(ctx, f.prefill.output.get(), 0, &value), CALRT_INVALID_ARGUMENT,
              "Buffer_GetCsr of an output buffer");
}

}  // namespace

std::vector<Clause> conformance_clauses_calbin() {
  return {
      {"CAL.1", "CAL", "missing calbin rejected", cal_missing},
      {"CAL.2", "CAL", "malformed calbin rejected", cal_malformed},
      {"CAL.3", "CAL", "LLM info matches the calbin", cal_info},
      {"CAL.4", "CAL", "model list", cal_models},
      {"CAL.5", "CAL", "tensor and CSR descriptors", cal_descriptors},
      {"CFG.1", "CFG", "configure reports time and memory", cfg_configure},
      {"CFG.2", "CFG", "memory accounting", cfg_memory},
      {"CFG.3", "CFG", "configure twice", cfg_twice},
      {"CFG.4", "CFG", "not configured", cfg_not_configured},
      {"BUF.1", "BUF", "buffers by exact model name", buf_exact_name},
      {"BUF.2", "BUF", "tensors as described", buf_tensors},
      {"BUF.3", "BUF", "direction and slot checked", buf_direction_slot},
      {"MAP.1", "MAP", "mapped data persists", map_persists},
      {"MAP.2", "MAP", "one mapping at a time", map_twice},
      {"MAP.3", "MAP", "unmap and index rules", map_unmap_rules},
      {"MAP.4", "MAP", "no map while a job owns the buffer", map_in_flight},
      {"MAP.5", "MAP", "no submit with a mapped tensor", map_then_submit},
      {"CSR.1", "CSR", "set and get exactly", csr_roundtrip},
      {"CSR.2", "CSR", "CSR index out of range", csr_range},
      {"CSR.3", "CSR", "output buffers have no CSRs", csr_output},
  };
}

}  // namespace runner
