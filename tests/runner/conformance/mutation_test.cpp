// The forwarding runtime, checked without the conformance suite: the unmutated table
// ("none") behaves as the simulator, and each mutation observably changes, through the C
// ABI, what it says it changes. Every check compares the mutant with the simulator on the
// same call sequence, so a mutation that stopped misbehaving fails here.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "abi/calrt_loader.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/runner/conformance/mutant_runtime.hpp"

namespace {

using calrt::mutant::mutant_api;

const CalrtApi* sim_table() { return calrt_sim_get_api(CALRT_ABI_MAJOR); }

const CalrtApi* mutant(std::string_view name) {
  const CalrtApi* table = mutant_api(name);
  if (table == nullptr) {
    ADD_FAILURE() << "no mutation named " << name;
  }
  return table;
}

std::filesystem::path calbin_path() {
  const char* env = std::getenv("CALRT_TEST_CALBIN");
  return env != nullptr ? std::filesystem::path(env) : std::filesystem::path(CALRT_TEST_CALBIN);
}

// The code a call through the wrapper failed with; CALRT_OK when it did not fail.
CalrtCode code_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const calrt::Error& error) {
    return error.code();
  }
  return CALRT_OK;
}

constexpr uint32_t kJobTokens = 16;

// A device with the tiny calbin configured, the prefill model's buffers, a KV handle of the
// context applied and a valid job's inputs written: what a mutation needs to show itself.
struct Rig {
  explicit Rig(const CalrtApi* table)
      : api(table),
        device(calrt::Device::create(api, calrt::DeviceKind::sim)),
        calbin(calrt::Calbin::create(device, calbin_path())),
        info(calbin.info()) {
    calbin.configure();
    for (auto& model : calbin.models()) {
      if (model.type == calrt::ModelType::prefill) {
        prefill = model;
      }
    }
    input = calrt::Buffer::create(calbin, prefill.name, calrt::Direction::input);
    output = calrt::Buffer::create(calbin, prefill.name, calrt::Direction::output);
    kv = calrt::Kv::allocate(calbin, info.context);
    kv.apply(input);
    if (const auto* positions =
            prefill.find_tensor(calrt::Direction::input, calrt::TensorRole::position)) {
      auto mapping = input.map(positions->index);
      auto values = mapping.as<int32_t>();
      for (size_t i = 0; i < values.size(); ++i) {
        values[i] = static_cast<int32_t>(i);
      }
    }
    if (const auto* cur = prefill.find_csr("cur_seq_len")) {
      input.set_csr(cur->index, kJobTokens);
    }
  }

  calrt::Job submit() { return calrt::Job::submit(calbin, prefill.name, input, output); }
  void plan(const std::string& yaml) { calrt::DeviceFaults::of(device).set_plan(yaml); }
  int64_t device_time_ns() const { return device.status().device_time.count(); }

  calrt::Api api;
  calrt::Device device;
  calrt::Calbin calbin;
  calrt::CalbinInfo info;
  calrt::ModelDesc prefill;
  calrt::Buffer input;
  calrt::Buffer output;
  calrt::Kv kv;
};

constexpr char kHangPlan[] =
    "seed: 1\nfaults:\n  - kind: job_hang\n    during: prefill\n"
    "    at_op: 1\n";
constexpr char kDmaPlan[] =
    "seed: 1\nfaults:\n  - kind: dma_h2d\n    during: prefill\n"
    "    at_op: 1\n";

TEST(MutantRuntime, EveryMutationHasATableAndUnknownNamesHaveNone) {
  std::set<std::string_view> names;
  for (const auto& mutation : calrt::mutant::mutations()) {
    EXPECT_TRUE(names.insert(mutation.name).second) << "twice: " << mutation.name;
    EXPECT_FALSE(mutation.breaks.empty()) << mutation.name;
    EXPECT_NE(mutant_api(mutation.name), nullptr) << mutation.name;
    EXPECT_EQ(mutant_api(mutation.name), mutant_api(mutation.name)) << "built once";
  }
  EXPECT_EQ(mutant_api("no-such-mutation"), nullptr);
  EXPECT_EQ(mutant_api("none", CALRT_ABI_MAJOR + 1), nullptr);
  EXPECT_NE(mutant_api("any-major", CALRT_ABI_MAJOR + 1), nullptr);
}

TEST(MutantRuntime, NoneForwardsEveryEntryAndCopiesTheExtensionChain) {
  const CalrtApi* none = mutant("none");
  ASSERT_NE(none, nullptr);
  const CalrtApi* sim = sim_table();
  EXPECT_NE(none, sim);
  // Everything after the extension pointer is the simulator's: version and entries.
  const size_t after = offsetof(CalrtApi, abi_major);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const char*>(none) + after,
                        reinterpret_cast<const char*>(sim) + after, sizeof(CalrtApi) - after),
            0);
  const auto* mine = static_cast<const CalrtExtensionBase*>(none->extension);
  const auto* theirs = static_cast<const CalrtExtensionBase*>(sim->extension);
  int count = 0;
  for (; mine != nullptr && theirs != nullptr; mine = mine->next, theirs = theirs->next) {
    ++count;
    EXPECT_NE(mine, theirs) << "extension " << theirs->type << " is shared, not copied";
    EXPECT_EQ(mine->type, theirs->type);
    ASSERT_EQ(mine->struct_size, theirs->struct_size);
    const size_t entries = offsetof(CalrtClockExtension, Clock_Get);
    EXPECT_EQ(
        std::memcmp(reinterpret_cast<const char*>(mine) + entries,
                    reinterpret_cast<const char*>(theirs) + entries, mine->struct_size - entries),
        0);
  }
  EXPECT_EQ(mine, nullptr);
  EXPECT_EQ(theirs, nullptr);
  EXPECT_GT(count, 0);
}

TEST(MutantRuntime, NoneRunsAJobLikeTheSimulator) {
  Rig rig(mutant("none"));
  auto job = rig.submit();
  EXPECT_EQ(job.wait(), calrt::WaitResult::ready);
  EXPECT_EQ(job.status().state, calrt::JobState::completed) << job.status().message;
}

TEST(MutantRuntime, SubstringModelNameIsTakenForTheRealOne) {
  for (const CalrtApi* table : {sim_table(), mutant("substring-model-name")}) {
    Rig rig(table);
    const std::string prefix = rig.prefill.name.substr(0, rig.prefill.name.size() - 1);
    const CalrtCode code =
        code_of([&] { calrt::Buffer::create(rig.calbin, prefix, calrt::Direction::input); });
    EXPECT_EQ(code, table == sim_table() ? CALRT_NOT_FOUND : CALRT_OK) << prefix;
  }
}

TEST(MutantRuntime, KvOverflowSucceeds) {
  for (const CalrtApi* table : {sim_table(), mutant("kv-overflow-success")}) {
    const bool mutated = table != sim_table();
    Rig rig(table);
    EXPECT_EQ(code_of([&] { calrt::Kv::allocate(rig.calbin, rig.info.context + 1); }),
              mutated ? CALRT_OK : CALRT_OUT_OF_RANGE);
    std::vector<calrt::Kv> held;
    CalrtCode refused = CALRT_OK;
    for (int i = 0; i < 64 && refused == CALRT_OK; ++i) {
      refused = code_of([&] { held.push_back(calrt::Kv::allocate(rig.calbin, rig.info.context)); });
    }
    EXPECT_EQ(refused, mutated ? CALRT_OK : CALRT_KV_EXHAUSTED);
    if (mutated) {
      // The dummy handles answer as if they held KV, and free cleanly.
      EXPECT_EQ(held.back().info().capacity_tokens, rig.info.context);
    }
  }
}

TEST(MutantRuntime, IgnoreWaitTimeoutWaitsFarLonger) {
  for (const CalrtApi* table : {sim_table(), mutant("ignore-wait-timeout")}) {
    const bool mutated = table != sim_table();
    Rig rig(table);
    rig.plan(kHangPlan);
    auto job = rig.submit();
    const int64_t before = rig.device_time_ns();
    const CalrtCode code = code_of([&] { job.wait(std::chrono::milliseconds(10)); });
    const int64_t waited = rig.device_time_ns() - before;
    if (mutated) {
      EXPECT_GT(waited, 1'000'000'000) << "device ns a 10 ms wait took";
    } else {
      EXPECT_EQ(code, CALRT_OK);
      EXPECT_LT(waited, 11'000'000) << "device ns a 10 ms wait took";
    }
  }
}

TEST(MutantRuntime, MapWhileInFlightHandsOutAShadow) {
  for (const CalrtApi* table : {sim_table(), mutant("map-while-in-flight")}) {
    const bool mutated = table != sim_table();
    Rig rig(table);
    auto job = rig.submit();
    ASSERT_FALSE(job.status().is_final()) << "virtual time: in flight until waited on";
    std::optional<calrt::Mapping> mapping;
    EXPECT_EQ(code_of([&] { mapping.emplace(rig.input.map(0)); }), mutated ? CALRT_OK : CALRT_BUSY);
    if (mutated) {
      EXPECT_EQ(mapping->bytes().size(), rig.prefill.inputs[0].bytes);
      mapping->unmap();
      // The real tensor was never mapped: the job completes untouched.
      EXPECT_EQ(job.wait(), calrt::WaitResult::ready);
      EXPECT_EQ(job.status().state, calrt::JobState::completed);
    }
  }
}

TEST(MutantRuntime, DeviceFaultComesOutAsRequestFault) {
  for (const CalrtApi* table : {sim_table(), mutant("device-fault-as-request")}) {
    const bool mutated = table != sim_table();
    Rig rig(table);
    rig.plan(kDmaPlan);
    auto job = rig.submit();
    const CalrtCode wait_code = code_of([&] { job.wait(); });
    const auto status = job.status();
    EXPECT_EQ(status.state, calrt::JobState::failed);
    EXPECT_EQ(status.code, mutated ? CALRT_INVALID_ARGUMENT : CALRT_DMA_ERROR);
    if (wait_code != CALRT_OK) {
      EXPECT_EQ(CALRT_CODE_FAULT_CLASS(wait_code) == CALRT_FAULT_DEVICE, !mutated) << wait_code;
    }
    // The device itself is faulted either way: only the reported class changed.
    EXPECT_EQ(rig.device.status().state, calrt::DeviceState::faulted);
  }
}

TEST(MutantRuntime, WrongStructSizeAcceptsASmallerStruct) {
  for (const CalrtApi* table : {sim_table(), mutant("wrong-struct-size")}) {
    const bool mutated = table != sim_table();
    Rig rig(table);
    Calrt_Device_Status_Args args;
    std::memset(&args, 0xA5, sizeof(args));
    args.struct_size = offsetof(Calrt_Device_Status_Args, abi_major);
    args.extension = nullptr;
    args.device = rig.device.get();
    const CalrtCode code = code_of([&] { rig.api.check(table->Device_Status(&args), "status"); });
    EXPECT_EQ(code, mutated ? CALRT_OK : CALRT_STRUCT_TOO_SMALL);
    // Never a byte past the caller's struct_size.
    EXPECT_EQ(args.abi_major, 0xA5A5A5A5u);
    EXPECT_EQ(args.struct_size, offsetof(Calrt_Device_Status_Args, abi_major));
  }
}

TEST(MutantRuntime, DoubleFreeSucceeds) {
  for (const CalrtApi* table : {sim_table(), mutant("double-free-ok")}) {
    Rig rig(table);
    CalrtKv* raw = rig.kv.get();
    rig.kv.free();
    EXPECT_EQ(code_of([&] { rig.api.kv_free_raw(raw); }),
              table == sim_table() ? CALRT_INVALID_HANDLE : CALRT_OK);
  }
}

TEST(MutantRuntime, ResetKeepsAFaultedDeviceFaulted) {
  for (const CalrtApi* table : {sim_table(), mutant("reset-keeps-faulted")}) {
    Rig rig(table);
    rig.plan(kDmaPlan);
    auto job = rig.submit();
    code_of([&] { job.wait(); });
    ASSERT_EQ(rig.device.status().state, calrt::DeviceState::faulted);
    EXPECT_EQ(rig.device.reset(calrt::ResetLevel::job_abort), calrt::DeviceState::configured);
    EXPECT_EQ(rig.device.status().state,
              table == sim_table() ? calrt::DeviceState::configured : calrt::DeviceState::faulted);
  }
}

TEST(MutantRuntime, CancelIsIgnored) {
  for (const CalrtApi* table : {sim_table(), mutant("cancel-ignored")}) {
    Rig rig(table);
    auto job = rig.submit();
    job.cancel();
    EXPECT_EQ(job.status().state,
              table == sim_table() ? calrt::JobState::cancelled : calrt::JobState::submitted);
  }
}

// The negative-control libraries load through the real loader and serve their mutation:
// any-major answers every major, the others only the current one.
TEST(NegativeControlLibraries, LoadAndServeTheirTable) {
  const std::vector<std::pair<std::string, std::string>> libraries = {
      {CALRT_NEG_substring_model_name, "substring-model-name"},
      {CALRT_NEG_kv_overflow_success, "kv-overflow-success"},
      {CALRT_NEG_ignore_wait_timeout, "ignore-wait-timeout"},
      {CALRT_NEG_map_while_in_flight, "map-while-in-flight"},
      {CALRT_NEG_device_fault_as_request, "device-fault-as-request"},
      {CALRT_NEG_wrong_struct_size, "wrong-struct-size"},
      {CALRT_NEG_any_major, "any-major"},
  };
  for (const auto& [path, mutation] : libraries) {
    SCOPED_TRACE(path);
    const calrt::Api api = calrt::load_runtime(path);
    EXPECT_EQ(api.table()->abi_major, CALRT_ABI_MAJOR);
    // Its own copy of the runtime, not the one linked into this test.
    EXPECT_NE(api.table(), mutant_api(mutation));
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    ASSERT_NE(library, nullptr) << dlerror();
    auto* get_api = reinterpret_cast<CalrtGetApiFn*>(dlsym(library, CALRT_GET_API_SYMBOL));
    ASSERT_NE(get_api, nullptr);
    EXPECT_EQ(get_api(CALRT_ABI_MAJOR + 1) != nullptr, mutation == "any-major");
    dlclose(library);
  }
}

}  // namespace
