#include "sim_session.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "simdev/gen/generate.hpp"

namespace simdev::test {

const CalrtApi& api() {
  static const CalrtApi* table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  return *table;
}

ApiError take(CalrtError* error) {
  if (error == nullptr) {
    return {};
  }
  auto code = make_args<Calrt_Error_GetCode_Args>(CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE);
  code.error = error;
  api().Error_GetCode(&code);
  auto message = make_args<Calrt_Error_Message_Args>(CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE);
  message.error = error;
  api().Error_Message(&message);
  ApiError result{code.code, std::string(message.message, message.message_size)};
  auto destroy = make_args<Calrt_Error_Destroy_Args>(CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE);
  destroy.error = error;
  api().Error_Destroy(&destroy);
  return result;
}

std::filesystem::path tiny_calbin() {
  static std::once_flag once;
  static std::filesystem::path path;
  std::call_once(once, [] {
    if (const char* env = std::getenv("CALRT_TEST_CALBIN"); env && std::filesystem::exists(env)) {
      path = env;
      return;
    }
    path = std::filesystem::path(SIMDEV_TEST_BUILD_DIR) / "device-test-calbins" / "tiny";
    if (std::filesystem::exists(path / "manifest.json")) {
      return;
    }
    gen::GenOptions options;
    options.out_dir = path;
    options.seed = 1;
    options.long_cases = false;
    options.force = true;
    auto made = gen::generate(options);
    if (!made) {
      ADD_FAILURE() << "generating the tiny calbin failed: " << made.error().to_string();
    }
  });
  return path;
}

uint64_t state_hash(CalrtDevice* device) {
  static const auto* diag = reinterpret_cast<const CalrtDiagExtension*>(
      calrt::find_extension(calrt::Api(&api()), CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE));
  EXPECT_NE(diag, nullptr) << "the simulator offers no diag extension";
  if (diag == nullptr) return 0;
  auto args = make_args<Calrt_Diag_StateHash_Args>(CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE);
  args.device = device;
  const ApiError error = take(diag->Diag_StateHash(&args));
  EXPECT_EQ(error.code, CALRT_OK) << error.message;
  return args.hash;
}

void set_csr(CalrtBuffer* buffer, uint32_t index, uint64_t value) {
  auto args = make_args<Calrt_Buffer_SetCsr_Args>(CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE);
  args.buffer = buffer;
  args.csr_index = index;
  args.value = value;
  SIM_OK(api().Buffer_SetCsr(&args));
}

namespace {

void write_int32(CalrtBuffer* buffer, uint32_t index, const std::vector<int32_t>& values) {
  auto map = make_args<Calrt_Buffer_Map_Args>(CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE);
  map.buffer = buffer;
  map.tensor_index = index;
  SIM_OK(api().Buffer_Map(&map));
  std::memset(map.data, 0, map.size_bytes);
  std::memcpy(map.data, values.data(),
              std::min<size_t>(map.size_bytes, values.size() * sizeof(int32_t)));
  auto unmap = make_args<Calrt_Buffer_Unmap_Args>(CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE);
  unmap.buffer = buffer;
  unmap.tensor_index = index;
  SIM_OK(api().Buffer_Unmap(&unmap));
}

CalrtBuffer* make_buffer(CalrtCalbin* calbin, const std::string& model, CalrtDirection dir) {
  auto args = make_args<Calrt_Buffer_Create_Args>(CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE);
  args.calbin = calbin;
  args.model_name = model.c_str();
  args.direction = dir;
  EXPECT_EQ(take(api().Buffer_Create(&args)).code, CALRT_OK);
  return args.buffer;
}

void apply_kv(CalrtKv* kv, CalrtBuffer* buffer) {
  auto apply = make_args<Calrt_Kv_Apply_Args>(CALRT_KV_APPLY_ARGS_STRUCT_SIZE);
  apply.kv = kv;
  apply.input = buffer;
  SIM_OK(api().Kv_Apply(&apply));
}

}  // namespace

Session::Session(const std::string& config, uint32_t kv_tokens,
                 const std::filesystem::path& calbin_dir) {
  auto create = make_args<Calrt_Device_Create_Args>(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE);
  create.kind = CALRT_DEVICE_SIM;
  create.config = config.c_str();
  EXPECT_EQ(take(api().Device_Create(&create)).code, CALRT_OK);
  device = create.device;
  const std::string path = (calbin_dir.empty() ? tiny_calbin() : calbin_dir).string();
  auto load = make_args<Calrt_Calbin_Create_Args>(CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE);
  load.device = device;
  load.path = path.c_str();
  const ApiError loaded = take(api().Calbin_Create(&load));
  EXPECT_EQ(loaded.code, CALRT_OK) << loaded.message;
  calbin = load.calbin;
  auto configure = make_args<Calrt_Calbin_Configure_Args>(CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE);
  configure.calbin = calbin;
  const ApiError configured = take(api().Calbin_Configure(&configure));
  EXPECT_EQ(configured.code, CALRT_OK) << configured.message;
  configure_ns = configure.configure_time_ns;
  auto info = make_args<Calrt_Calbin_GetInfo_Args>(CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE);
  info.calbin = calbin;
  EXPECT_EQ(take(api().Calbin_GetInfo(&info)).code, CALRT_OK);
  vocab = info.vocab;
  for (uint32_t i = 0; i < info.model_count; ++i) {
    auto model = make_args<Calrt_Calbin_GetModel_Args>(CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE);
    model.calbin = calbin;
    model.model_index = i;
    EXPECT_EQ(take(api().Calbin_GetModel(&model)).code, CALRT_OK);
    (model.type == CALRT_MODEL_PREFILL ? prefill_name : decode_name) = model.name;
  }
  auto tensor = make_args<Calrt_Calbin_GetTensor_Args>(CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE);
  tensor.calbin = calbin;
  tensor.model_name = decode_name.c_str();
  tensor.direction = CALRT_OUTPUT;
  EXPECT_EQ(take(api().Calbin_GetTensor(&tensor)).code, CALRT_OK);
  tile_d0 = tensor.tile_d0;
  prefill_in = make_buffer(calbin, prefill_name, CALRT_INPUT);
  prefill_out = make_buffer(calbin, prefill_name, CALRT_OUTPUT);
  decode_in = make_buffer(calbin, decode_name, CALRT_INPUT);
  decode_out = make_buffer(calbin, decode_name, CALRT_OUTPUT);
  auto alloc = make_args<Calrt_Kv_Allocate_Args>(CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE);
  alloc.calbin = calbin;
  alloc.capacity_tokens = kv_tokens;
  EXPECT_EQ(take(api().Kv_Allocate(&alloc)).code, CALRT_OK);
  kv = alloc.kv;
  apply_kv(kv, prefill_in);
  apply_kv(kv, decode_in);
}

Session::~Session() {
  auto destroy = make_args<Calrt_Device_Destroy_Args>(CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE);
  destroy.device = device;
  take(api().Device_Destroy(&destroy));
}

StepResult Session::step(bool prefill, const std::vector<int32_t>& tokens,
                         const std::vector<int32_t>& positions, uint64_t past,
                         uint64_t cur_override) {
  CalrtBuffer* in = prefill ? prefill_in : decode_in;
  CalrtBuffer* out = prefill ? prefill_out : decode_out;
  write_int32(in, 0, tokens);
  write_int32(in, 1, positions);
  set_csr(in, 0, cur_override != 0 ? cur_override : tokens.size());
  set_csr(in, 1, past);
  StepResult result;
  auto submit = make_args<Calrt_Job_Submit_Args>(CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE);
  submit.calbin = calbin;
  const std::string& name = prefill ? prefill_name : decode_name;
  submit.model_name = name.c_str();
  submit.input = in;
  submit.output = out;
  result.submit = take(api().Job_Submit(&submit));
  if (result.submit.code != CALRT_OK) {
    return result;
  }
  auto wait = make_args<Calrt_Job_Wait_Args>(CALRT_JOB_WAIT_ARGS_STRUCT_SIZE);
  wait.job = submit.job;
  EXPECT_EQ(take(api().Job_Wait(&wait)).code, CALRT_OK);
  EXPECT_EQ(wait.result, CALRT_WAIT_READY);
  auto status = make_args<Calrt_Job_Status_Args>(CALRT_JOB_STATUS_ARGS_STRUCT_SIZE);
  status.job = submit.job;
  EXPECT_EQ(take(api().Job_Status(&status)).code, CALRT_OK);
  result.state = status.state;
  result.code = status.code;
  result.message = status.message;
  result.start_ns = status.start_time_ns;
  result.end_ns = status.end_time_ns;
  auto destroy = make_args<Calrt_Job_Destroy_Args>(CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE);
  destroy.job = submit.job;
  EXPECT_EQ(take(api().Job_Destroy(&destroy)).code, CALRT_OK);
  auto map = make_args<Calrt_Buffer_Map_Args>(CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE);
  map.buffer = out;
  EXPECT_EQ(take(api().Buffer_Map(&map)).code, CALRT_OK);
  const auto* raw = static_cast<const uint16_t*>(map.data);
  result.logits_raw.assign(raw, raw + map.size_bytes / 2);
  std::vector<uint16_t> logical(vocab);
  calbin::to_logical(raw, logical.data(), 1, vocab, tile_d0);
  for (uint16_t bits : logical) {
    result.logits.push_back(calbin::bf16_to_f32(bits));
  }
  auto unmap = make_args<Calrt_Buffer_Unmap_Args>(CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE);
  unmap.buffer = out;
  EXPECT_EQ(take(api().Buffer_Unmap(&unmap)).code, CALRT_OK);
  return result;
}

StepResult Session::prefill(const std::vector<int32_t>& prompt, size_t chunk) {
  StepResult last;
  for (size_t done = 0; done < prompt.size(); done += chunk) {
    const size_t count = std::min(chunk, prompt.size() - done);
    std::vector<int32_t> tokens(prompt.begin() + static_cast<std::ptrdiff_t>(done),
                                prompt.begin() + static_cast<std::ptrdiff_t>(done + count));
    std::vector<int32_t> positions(count);
    for (size_t i = 0; i < count; ++i) {
      positions[i] = static_cast<int32_t>(done + i);
    }
    last = step(true, tokens, positions, done);
    if (last.state != CALRT_JOB_COMPLETED) {
      break;
    }
  }
  return last;
}

}  // namespace simdev::test
