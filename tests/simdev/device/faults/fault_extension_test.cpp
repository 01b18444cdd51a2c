// The fault extension's ABI entries (Fault_SetPlan, Fault_GetHits) through the C ABI and the
// C++ wrapper: argument checks, the hit list's shape and sizes, and a counted injection.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/simdev/device/sim_session.hpp"

namespace simdev::test {
namespace {

const CalrtFaultExtension& faults() {
  static const auto* ext = reinterpret_cast<const CalrtFaultExtension*>(calrt::find_extension(
      calrt::Api(&api()), CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE));
  EXPECT_NE(ext, nullptr) << "the simulator offers no fault extension";
  return *ext;
}

// Every (kind, site) pair at which FAULTS.md's table says the kind can be injected.
std::set<std::pair<std::string, std::string>> documented_pairs() {
  const std::vector<std::string> jobs = {"prefill", "decode", "kv_update"};
  const std::vector<std::string> every = {"configure", "prefill", "decode", "kv_update", "kv"};
  const std::vector<std::string> configure_and_jobs = {"configure", "prefill", "decode",
                                                       "kv_update"};
  const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"dma_h2d", configure_and_jobs},
      {"dma_d2h", jobs},
      {"job_hang", configure_and_jobs},
      {"chip_hang", jobs},
      {"ecc_correctable", every},
      {"ecc_uncorrectable", every},
      {"device_lost", every},
      {"firmware_crash", every},
      {"d2d_link_down", jobs},
      {"thermal_throttle", jobs},
      {"kv_exhaustion", {"kv"}},
      {"corrupted_output", jobs},
      {"slow_completion", configure_and_jobs},
  };
  std::set<std::pair<std::string, std::string>> pairs;
  for (const auto& [kind, sites] : table) {
    for (const std::string& site : sites) {
      pairs.insert({kind, site});
    }
  }
  return pairs;
}

calrt::Device open_device() {
  return calrt::Device::create(calrt::Api(calrt_sim_get_api(CALRT_ABI_MAJOR)),
                               calrt::DeviceKind::sim, 0, "");
}

Calrt_Fault_GetHits_Args hits_args(CalrtDevice* device, CalrtFaultHit* hits, size_t capacity) {
  auto args = calrt::detail::make_args<Calrt_Fault_GetHits_Args>();
  args.device = device;
  args.hits = hits;
  args.hit_struct_size = sizeof(CalrtFaultHit);
  args.capacity = capacity;
  return args;
}

TEST(FaultExtension, IsChainedBetweenTraceAndDiag) {
  const calrt::Api sim(calrt_sim_get_api(CALRT_ABI_MAJOR));
  std::vector<CalrtExtensionType> types;
  const auto* ext = static_cast<const CalrtExtensionBase*>(sim.table()->extension);
  for (int hops = 0; ext != nullptr && hops < 16; ++hops, ext = ext->next) {
    types.push_back(ext->type);
  }
  // The probe extension, which only the simulator offers, follows the common four.
  EXPECT_EQ(types,
            (std::vector<CalrtExtensionType>{CALRT_EXT_CLOCK, CALRT_EXT_TRACE, CALRT_EXT_FAULT,
                                             CALRT_EXT_DIAG, CALRT_EXT_PROBE}));
  EXPECT_NE(calrt::find_extension(sim, CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE),
            nullptr);
  EXPECT_NE(calrt::find_extension(sim, CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE), nullptr);
}

TEST(FaultExtension, HitsListEveryDocumentedPairOnceAtZero) {
  const calrt::Device device = open_device();
  const std::vector<calrt::FaultHit> hits = calrt::DeviceFaults::of(device).hits();
  std::set<std::pair<std::string, std::string>> listed;
  for (const calrt::FaultHit& hit : hits) {
    EXPECT_TRUE(listed.insert({hit.kind, hit.site}).second)
        << hit.kind << "/" << hit.site << " listed twice";
    EXPECT_EQ(hit.count, 0u) << hit.kind << "/" << hit.site;
  }
  EXPECT_EQ(listed, documented_pairs());
}

TEST(FaultExtension, HitsTellTheCountWhenTheArrayIsShort) {
  const calrt::Device device = open_device();
  const size_t pairs = documented_pairs().size();
  auto args = hits_args(device.get(), nullptr, 0);
  SIM_OK(faults().Fault_GetHits(&args));
  EXPECT_EQ(args.count, pairs);
  const char* sentinel = "untouched";
  CalrtFaultHit hits[5];
  for (CalrtFaultHit& hit : hits) {
    hit = {sentinel, sentinel, 77};
  }
  args = hits_args(device.get(), hits, 3);
  SIM_OK(faults().Fault_GetHits(&args));
  EXPECT_EQ(args.count, pairs);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NE(hits[i].kind, sentinel) << i;
    EXPECT_EQ(hits[i].count, 0u) << i;
  }
  EXPECT_EQ(hits[3].kind, sentinel) << "written past capacity";
  EXPECT_EQ(hits[3].count, 77u);
}

// A newer caller's larger element: entries land at its stride, its extra bytes zeroed.
TEST(FaultExtension, HitsHonourALargerElementSize) {
  const calrt::Device device = open_device();
  const std::vector<calrt::FaultHit> expected = calrt::DeviceFaults::of(device).hits();
  struct WideHit {
    CalrtFaultHit hit;
    uint64_t extra;
  };
  std::vector<WideHit> wide(expected.size(), WideHit{{nullptr, nullptr, 9}, 0xfeedfacecafebeefull});
  auto args = hits_args(device.get(), &wide[0].hit, wide.size());
  args.hit_struct_size = sizeof(WideHit);
  SIM_OK(faults().Fault_GetHits(&args));
  ASSERT_EQ(args.count, expected.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    ASSERT_NE(wide[i].hit.kind, nullptr) << i;
    EXPECT_EQ(std::string(wide[i].hit.kind), expected[i].kind) << i;
    EXPECT_EQ(std::string(wide[i].hit.site), expected[i].site) << i;
    EXPECT_EQ(wide[i].extra, 0u) << i;
  }
}

TEST(FaultExtension, HitsRejectANullArrayASmallElementAndASmallStruct) {
  const calrt::Device device = open_device();
  auto args = hits_args(device.get(), nullptr, 4);
  ApiError error = take(faults().Fault_GetHits(&args));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("hits is NULL"), std::string::npos) << error.message;
  CalrtFaultHit hits[4];
  args = hits_args(device.get(), hits, 4);
  args.hit_struct_size = sizeof(CalrtFaultHit) - 1;
  error = take(faults().Fault_GetHits(&args));
  EXPECT_EQ(error.code, CALRT_STRUCT_TOO_SMALL);
  EXPECT_NE(error.message.find("hit_struct_size"), std::string::npos) << error.message;
  args = hits_args(device.get(), hits, 4);
  args.struct_size = CALRT_FAULT_GET_HITS_ARGS_STRUCT_SIZE - 1;
  error = take(faults().Fault_GetHits(&args));
  EXPECT_EQ(error.code, CALRT_STRUCT_TOO_SMALL);
  EXPECT_NE(error.message.find("Calrt_Fault_GetHits_Args"), std::string::npos) << error.message;
}

TEST(FaultExtension, SetPlanRejectsANullPlanAndASmallStruct) {
  const calrt::Device device = open_device();
  auto args = calrt::detail::make_args<Calrt_Fault_SetPlan_Args>();
  args.device = device.get();
  args.plan = nullptr;
  args.plan_size = 12;
  ApiError error = take(faults().Fault_SetPlan(&args));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("plan is NULL"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("12"), std::string::npos) << error.message;
  args.plan_size = 0;  // NULL and empty: the empty plan
  SIM_OK(faults().Fault_SetPlan(&args));
  args.struct_size = CALRT_FAULT_SET_PLAN_ARGS_STRUCT_SIZE - 1;
  error = take(faults().Fault_SetPlan(&args));
  EXPECT_EQ(error.code, CALRT_STRUCT_TOO_SMALL);
  EXPECT_NE(error.message.find("Calrt_Fault_SetPlan_Args"), std::string::npos) << error.message;
}

TEST(FaultExtension, APlanThatDoesNotParseNamesTheField) {
  const calrt::Device device = open_device();
  const std::string plan = "seed: 1\nfaults:\n  - kind: meteor_strike\n    at_op: 1\n";
  auto args = calrt::detail::make_args<Calrt_Fault_SetPlan_Args>();
  args.device = device.get();
  args.plan = plan.data();
  args.plan_size = plan.size();
  const ApiError error = take(faults().Fault_SetPlan(&args));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("faults[0].kind"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("meteor_strike"), std::string::npos) << error.message;
  try {
    calrt::DeviceFaults::of(device).set_plan(plan);
    FAIL() << "the wrapper accepted a plan with an unknown kind";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("faults[0].kind"), std::string::npos) << e.what();
  }
  // plan_size bounds the text: a valid prefix of a longer buffer is what counts.
  const std::string padded = "seed: 2\nfaults: []\n!!!garbage";
  args.plan = padded.data();
  args.plan_size = padded.find("!!!");
  SIM_OK(faults().Fault_SetPlan(&args));
}

TEST(FaultExtension, AnInjectedFaultIsCountedAndSurvivesAPlanChange) {
  Session s;
  calrt::Device device(s.device, {calrt::Api(&api())});  // borrowed: released below
  const calrt::DeviceFaults wrapper = calrt::DeviceFaults::of(device);
  wrapper.set_plan("seed: 1\nfaults:\n  - kind: dma_h2d\n    during: decode\n    at_op: 1\n");
  auto submit = calrt::detail::make_args<Calrt_Job_Submit_Args>();
  submit.calbin = s.calbin;
  submit.model_name = s.decode_name.c_str();
  submit.input = s.decode_in;
  submit.output = s.decode_out;
  auto csr = calrt::detail::make_args<Calrt_Buffer_SetCsr_Args>();
  csr.buffer = s.decode_in;
  csr.value = 1;
  SIM_OK(api().Buffer_SetCsr(&csr));
  SIM_OK(api().Job_Submit(&submit));
  auto wait = calrt::detail::make_args<Calrt_Job_Wait_Args>();
  wait.job = submit.job;
  EXPECT_EQ(take(api().Job_Wait(&wait)).code, CALRT_DMA_ERROR);
  wrapper.set_plan("");  // replacing the plan keeps the counters (calrt_ext.h)
  for (const calrt::FaultHit& hit : wrapper.hits()) {
    const bool fired = hit.kind == "dma_h2d" && hit.site == "decode";
    EXPECT_EQ(hit.count, fired ? 1u : 0u) << hit.kind << "/" << hit.site;
  }
  (void)device.release();  // the Session owns the device
}

// FAULTS.md: a corrected ECC error changes no data, is counted, and leaves its chip DEGRADED
// until the next reset; Device_ChipStatus reports both.
TEST(FaultExtension, ChipStatusReportsACorrectedEccError) {
  Session s;
  calrt::Device device(s.device, {calrt::Api(&api())});  // borrowed: released below
  calrt::DeviceFaults::of(device).set_plan(
      "seed: 1\nfaults:\n  - kind: ecc_correctable\n    during: decode\n    at_op: 1\n"
      "    chip: 1\n");
  EXPECT_EQ(s.step(false, {3}, {0}, 0).state, CALRT_JOB_COMPLETED);
  const calrt::ChipStatus chip0 = device.chip_status(0);
  const calrt::ChipStatus chip1 = device.chip_status(1);
  EXPECT_EQ(chip0.ecc_corrected, 0u);
  EXPECT_EQ(chip0.health, calrt::ChipHealth::ok);
  EXPECT_EQ(chip1.ecc_corrected, 1u);
  EXPECT_EQ(chip1.ecc_uncorrected, 0u);
  EXPECT_EQ(chip1.health, calrt::ChipHealth::degraded);
  device.reset(calrt::ResetLevel::job_abort);
  EXPECT_EQ(device.chip_status(1).health, calrt::ChipHealth::ok);
  EXPECT_EQ(device.chip_status(1).ecc_corrected, 1u);  // counted since the device was created
  (void)device.release();                              // the Session owns the device
}

TEST(FaultExtension, AStaleDeviceHandleIsRejected) {
  CalrtDevice* stale = nullptr;
  {
    calrt::Device device = open_device();
    stale = device.get();
  }
  auto plan = calrt::detail::make_args<Calrt_Fault_SetPlan_Args>();
  plan.device = stale;
  EXPECT_EQ(take(faults().Fault_SetPlan(&plan)).code, CALRT_INVALID_HANDLE);
  auto hits = hits_args(stale, nullptr, 0);
  EXPECT_EQ(take(faults().Fault_GetHits(&hits)).code, CALRT_INVALID_HANDLE);
}

}  // namespace
}  // namespace simdev::test
