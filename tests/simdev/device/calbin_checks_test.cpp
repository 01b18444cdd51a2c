// What Calbin_Create and Calbin_Configure refuse, and how timing-only calbins run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/generate.hpp"
#include "tests/simdev/device/sim_session.hpp"

namespace simdev::test {
namespace {

namespace fs = std::filesystem;

// A private copy of the tiny calbin with its manifest edited by `edit`.
fs::path edited_copy(const std::string& name, const std::function<void(calbin::Manifest&)>& edit) {
  const fs::path dir = fs::path(SIMDEV_TEST_BUILD_DIR) / "device-test-calbins" / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  fs::copy(tiny_calbin(), dir, fs::copy_options::recursive);
  auto manifest = calbin::read_manifest(dir);
  EXPECT_TRUE(manifest);
  edit(*manifest);
  EXPECT_TRUE(calbin::write_manifest(dir, *manifest));
  return dir;
}

struct Loaded {
  CalrtDevice* device = nullptr;
  CalrtCalbin* calbin = nullptr;
  ApiError create;
  ApiError configure;
};

Loaded load(const fs::path& dir, const char* config = nullptr) {
  Loaded loaded;
  auto create = make_args<Calrt_Device_Create_Args>(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE);
  create.kind = CALRT_DEVICE_SIM;
  create.config = config;
  EXPECT_EQ(take(api().Device_Create(&create)).code, CALRT_OK);
  loaded.device = create.device;
  const std::string path = dir.string();
  auto calbin = make_args<Calrt_Calbin_Create_Args>(CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE);
  calbin.device = loaded.device;
  calbin.path = path.c_str();
  loaded.create = take(api().Calbin_Create(&calbin));
  loaded.calbin = calbin.calbin;
  if (loaded.create.code == CALRT_OK) {
    auto configure =
        make_args<Calrt_Calbin_Configure_Args>(CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE);
    configure.calbin = loaded.calbin;
    loaded.configure = take(api().Calbin_Configure(&configure));
  }
  return loaded;
}

void close(Loaded& loaded) {
  auto destroy = make_args<Calrt_Device_Destroy_Args>(CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE);
  destroy.device = loaded.device;
  EXPECT_EQ(take(api().Device_Destroy(&destroy)).code, CALRT_OK);
}

TEST(CalbinChecks, WeightOutsideItsFileIsInvalid) {
  const fs::path dir = edited_copy("weight-outside", [](calbin::Manifest& m) {
    for (auto& w : m.weights) {
      if (w.name == "layers.1.attn.o_proj") {
        w.offset += uint64_t{1} << 30;
      }
    }
  });
  Loaded loaded = load(dir);
  ASSERT_EQ(loaded.create.code, CALRT_OK) << loaded.create.message;
  EXPECT_EQ(loaded.configure.code, CALRT_CALBIN_INVALID);
  EXPECT_NE(loaded.configure.message.find("layers.1.attn.o_proj"), std::string::npos)
      << loaded.configure.message;
  EXPECT_NE(loaded.configure.message.find("param_blk"), std::string::npos)
      << loaded.configure.message;
  close(loaded);
}

// A w4af16 shard whose group size does not divide its columns, or whose byte and scale
// counts disagree with its shape, is refused naming the weight and the values.
TEST(CalbinChecks, Int4ShardsWithAnImpossibleLayoutAreInvalid) {
  const fs::path dir = edited_copy("int4-bad-group", [](calbin::Manifest& m) {
    for (auto& w : m.weights) {
      if (w.name == "layers.1.mlp.down_proj") {
        w.dtype = calbin::Dtype::kInt4;
        w.quant.scheme = "w4af16";
        w.quant.group_size = 3;
        w.bytes /= 2;
      }
    }
  });
  Loaded loaded = load(dir);
  ASSERT_EQ(loaded.create.code, CALRT_OK) << loaded.create.message;
  EXPECT_EQ(loaded.configure.code, CALRT_CALBIN_INVALID);
  for (const char* word : {"layers.1.mlp.down_proj", "group_size 3", "w4af16"}) {
    EXPECT_NE(loaded.configure.message.find(word), std::string::npos)
        << word << " not in: " << loaded.configure.message;
  }
  close(loaded);
}

// The device's loader applies the memory-plan checks itself, as hardware must: a calbin that
// nobody ran `calrt check` on is still refused before it can overwrite the device's memory.
void expect_plan_refused(const char* name, void (*edit)(calbin::Manifest&),
                         const std::vector<std::string>& mentions) {
  Loaded loaded = load(edited_copy(name, edit));
  EXPECT_EQ(loaded.create.code, CALRT_CALBIN_INVALID) << name << ": " << loaded.create.message;
  for (const std::string& word : mentions) {
    EXPECT_NE(loaded.create.message.find(word), std::string::npos)
        << name << ": '" << word << "' not in: " << loaded.create.message;
  }
  close(loaded);
}

calbin::Model& decode_model(calbin::Manifest& m) {
  for (calbin::Model& model : m.models) {
    if (model.type == calbin::ModelType::kDecode) return model;
  }
  ADD_FAILURE() << "the tiny calbin has no decode model";
  return m.models.front();
}

TEST(CalbinChecks, ATensorLeavingItsReservationIsRefusedAtCreate) {
  expect_plan_refused("tensor-outside",
                      [](calbin::Manifest& m) {
                        calbin::TensorDesc& logits = decode_model(m).outputs.at(0);
                        ASSERT_EQ(logits.reservation, "io");
                        const calbin::Reservation* io = m.find_reservation("io", 0);
                        ASSERT_NE(io, nullptr);
                        logits.address =
                            io->base + *io->size.bytes() - 16;  // starts inside, ends outside
                      },
                      {"logits", "\"io\""});
}

TEST(CalbinChecks, OverlappingReservationsAreRefusedAtCreate) {
  expect_plan_refused("reservations-overlap",
                      [](calbin::Manifest& m) {
                        for (calbin::Reservation& r : m.reservations) {
                          if (r.name == "kv_cache" && r.chip == 1)
                            r.base = 4096;  // inside the params
                        }
                      },
                      {"kv_cache", "params", "chip 1"});
}

TEST(CalbinChecks, AliasingPingAndPongAreRefusedAtCreate) {
  expect_plan_refused("ping-pong-alias",
                      [](calbin::Manifest& m) {
                        calbin::Model& decode = decode_model(m);
                        ASSERT_EQ(decode.ping_pong.size(), 2u);
                        decode.ping_pong[1].output_addresses = decode.ping_pong[0].output_addresses;
                      },
                      {"ping", "pong", "alias"});
}

// A KV-cache type the device does not implement is refused, naming the field and the type;
// run as BF16, it would pass other numerics off as the calbin's.
void expect_kv_type_refused(const char* name, void (*edit)(calbin::Manifest&),
                            const std::string& mentions) {
  Loaded loaded = load(edited_copy(name, edit));
  const ApiError& refusal = loaded.create.code != CALRT_OK ? loaded.create : loaded.configure;
  EXPECT_EQ(refusal.code, CALRT_CALBIN_INVALID) << name << ": " << refusal.message;
  EXPECT_NE(refusal.message.find(mentions), std::string::npos) << refusal.message;
  close(loaded);
}

TEST(CalbinChecks, KvCacheTypesTheDeviceLacksAreRefused) {
  expect_kv_type_refused(
      "k-int8", [](calbin::Manifest& m) { m.llm.k_dtype = calbin::Dtype::kInt8; },
      "k_dtype = int8 is not supported");
  expect_kv_type_refused(
      "v-int4", [](calbin::Manifest& m) { m.llm.v_dtype = calbin::Dtype::kInt4; },
      "v_dtype = int4 is not supported");
}

TEST(CalbinChecks, TheUneditedCopyLoads) {
  // The positive control for the three above: the same copy and load path, no edit.
  Loaded loaded = load(edited_copy("unedited", [](calbin::Manifest&) {}));
  EXPECT_EQ(loaded.create.code, CALRT_OK) << loaded.create.message;
  EXPECT_EQ(loaded.configure.code, CALRT_OK) << loaded.configure.message;
  close(loaded);
}

// A calbin runs on a runtime of its ABI major whose minor is at least its own (minor versions
// only add); anything newer, of another major, or not a version is a mismatch naming it.
TEST(CalbinChecks, OtherRuntimeAbiIsAMismatch) {
  int index = 0;
  for (const std::string abi : {"0.10.0", "1.8.0", "0.8.0.1", "0.8.x", "0..8", "0.", "v0.8"}) {
    const fs::path dir = edited_copy("abi-" + std::to_string(index++),
                                     [&](calbin::Manifest& m) { m.runtime_abi = abi; });
    Loaded loaded = load(dir);
    EXPECT_EQ(loaded.create.code, CALRT_CALBIN_MISMATCH) << abi;
    EXPECT_NE(loaded.create.message.find("\"" + abi + "\""), std::string::npos)
        << loaded.create.message;
    close(loaded);
  }
  for (const std::string abi : {"0.7", "0.7.6", "0.8", "0.8.0", "0.9.0"}) {
    const fs::path dir = edited_copy("abi-ok-" + std::to_string(index++),
                                     [&](calbin::Manifest& m) { m.runtime_abi = abi; });
    Loaded loaded = load(dir);
    EXPECT_EQ(loaded.create.code, CALRT_OK) << abi << ": " << loaded.create.message;
    close(loaded);
  }
  Loaded one_chip = load(tiny_calbin(), "chips=1");
  EXPECT_EQ(one_chip.create.code, CALRT_CALBIN_MISMATCH);
  close(one_chip);
}

TEST(CalbinChecks, TimingOnlyCalbinRunsWithZeroOutputs) {
  const fs::path dir = fs::path(SIMDEV_TEST_BUILD_DIR) / "device-test-calbins" / "qwen3-30b";
  if (!fs::exists(dir / "manifest.json")) {
    gen::GenOptions options;
    options.preset = "qwen3-30b-a3b";
    options.out_dir = dir;
    options.force = true;
    auto made = gen::generate(options);
    ASSERT_TRUE(made) << made.error().to_string();
  }
  Loaded loaded = load(dir);
  ASSERT_EQ(loaded.create.code, CALRT_OK) << loaded.create.message;
  ASSERT_EQ(loaded.configure.code, CALRT_OK) << loaded.configure.message;
  auto model = make_args<Calrt_Calbin_GetModel_Args>(CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE);
  model.calbin = loaded.calbin;
  SIM_OK(api().Calbin_GetModel(&model));
  const std::string name = model.name;
  auto in = make_args<Calrt_Buffer_Create_Args>(CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE);
  in.calbin = loaded.calbin;
  in.model_name = name.c_str();
  in.direction = CALRT_INPUT;
  SIM_OK(api().Buffer_Create(&in));
  auto out = in;
  out.direction = CALRT_OUTPUT;
  SIM_OK(api().Buffer_Create(&out));
  auto alloc = make_args<Calrt_Kv_Allocate_Args>(CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE);
  alloc.calbin = loaded.calbin;
  alloc.capacity_tokens = 4096;
  SIM_OK(api().Kv_Allocate(&alloc));
  auto apply = make_args<Calrt_Kv_Apply_Args>(CALRT_KV_APPLY_ARGS_STRUCT_SIZE);
  apply.kv = alloc.kv;
  apply.input = in.buffer;
  SIM_OK(api().Kv_Apply(&apply));
  auto csr = make_args<Calrt_Buffer_SetCsr_Args>(CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE);
  csr.buffer = in.buffer;
  csr.value = 1;
  SIM_OK(api().Buffer_SetCsr(&csr));
  auto submit = make_args<Calrt_Job_Submit_Args>(CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE);
  submit.calbin = loaded.calbin;
  submit.model_name = name.c_str();
  submit.input = in.buffer;
  submit.output = out.buffer;
  SIM_OK(api().Job_Submit(&submit));
  auto wait = make_args<Calrt_Job_Wait_Args>(CALRT_JOB_WAIT_ARGS_STRUCT_SIZE);
  wait.job = submit.job;
  SIM_OK(api().Job_Wait(&wait));
  EXPECT_EQ(wait.state, CALRT_JOB_COMPLETED);
  auto status = make_args<Calrt_Job_Status_Args>(CALRT_JOB_STATUS_ARGS_STRUCT_SIZE);
  status.job = submit.job;
  SIM_OK(api().Job_Status(&status));
  std::printf("qwen3-30b-a3b %s, 1 token: %llu ns device time\n", name.c_str(),
              static_cast<unsigned long long>(status.end_time_ns - status.start_time_ns));
  auto info = make_args<Calrt_Kv_Info_Args>(CALRT_KV_INFO_ARGS_STRUCT_SIZE);
  info.kv = alloc.kv;
  SIM_OK(api().Kv_Info(&info));
  EXPECT_EQ(info.filled_tokens, 1u);
  auto map = make_args<Calrt_Buffer_Map_Args>(CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE);
  map.buffer = out.buffer;
  SIM_OK(api().Buffer_Map(&map));
  const auto* bytes = static_cast<const unsigned char*>(map.data);
  EXPECT_TRUE(std::all_of(bytes, bytes + map.size_bytes, [](unsigned char b) { return b == 0; }));
  close(loaded);
}

}  // namespace
}  // namespace simdev::test
