// The diag extension: the state hash (equal for equal call sequences, different for any one
// difference in the device's state) and the hang report (what it lists after a run and
// after a hang), through the C ABI and the C++ wrapper; and the probe extension, whose layer
// boundaries the smoke uses to name the first divergent layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/simdev/device/sim_session.hpp"

namespace simdev::test {
namespace {

using Json = nlohmann::json;

const CalrtDiagExtension& diag() {
  static const auto* ext = reinterpret_cast<const CalrtDiagExtension*>(
      calrt::find_extension(calrt::Api(&api()), CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE));
  EXPECT_NE(ext, nullptr) << "the simulator offers no diag extension";
  return *ext;
}

Json report(CalrtDevice* device) {
  auto args = calrt::detail::make_args<Calrt_Diag_Report_Args>();
  args.device = device;
  ApiError error = take(diag().Diag_Report(&args));
  EXPECT_EQ(error.code, CALRT_OK) << error.message;
  std::string text(args.size, '\0');
  args.buffer = text.data();
  args.capacity = text.size();
  error = take(diag().Diag_Report(&args));
  EXPECT_EQ(error.code, CALRT_OK) << error.message;
  return Json::parse(text);
}

void host_spend(CalrtDevice* device, uint64_t ns) {
  const auto* clock = reinterpret_cast<const CalrtClockExtension*>(calrt::find_extension(
      calrt::Api(&api()), CALRT_EXT_CLOCK, CALRT_CLOCK_EXTENSION_STRUCT_SIZE));
  ASSERT_NE(clock, nullptr);
  auto args = calrt::detail::make_args<Calrt_Clock_HostSpend_Args>();
  args.device = device;
  args.duration_ns = ns;
  SIM_OK(clock->Clock_HostSpend(&args));
}

// Maps one tensor, lets `edit` change its bytes, unmaps it.
template <class Edit>
void edit_tensor(CalrtBuffer* buffer, uint32_t index, Edit&& edit) {
  auto map = calrt::detail::make_args<Calrt_Buffer_Map_Args>();
  map.buffer = buffer;
  map.tensor_index = index;
  SIM_OK(api().Buffer_Map(&map));
  edit(static_cast<uint8_t*>(map.data), map.size_bytes);
  auto unmap = calrt::detail::make_args<Calrt_Buffer_Unmap_Args>();
  unmap.buffer = buffer;
  unmap.tensor_index = index;
  SIM_OK(api().Buffer_Unmap(&unmap));
}

void write_tokens(CalrtBuffer* buffer, const std::vector<int32_t>& tokens) {
  edit_tensor(buffer, 0, [&](uint8_t* data, uint64_t size) {
    std::memset(data, 0, size);
    std::memcpy(data, tokens.data(), std::min<size_t>(size, tokens.size() * sizeof(int32_t)));
  });
}

CalrtJob* submit_decode(Session& s) {
  auto args = calrt::detail::make_args<Calrt_Job_Submit_Args>();
  args.calbin = s.calbin;
  args.model_name = s.decode_name.c_str();
  args.input = s.decode_in;
  args.output = s.decode_out;
  const ApiError error = take(api().Job_Submit(&args));
  EXPECT_EQ(error.code, CALRT_OK) << error.message;
  return args.job;
}

ApiError wait(CalrtJob* job, uint64_t timeout_ns, CalrtWaitResult* result = nullptr) {
  auto args = calrt::detail::make_args<Calrt_Job_Wait_Args>();
  args.job = job;
  args.timeout_ns = timeout_ns;
  const ApiError error = take(api().Job_Wait(&args));
  if (result != nullptr) {
    *result = args.result;
  }
  return error;
}

// Two devices fed the same calls: a prefill and a decode step.
struct Twins {
  Twins() {
    for (Session* s : {&a, &b}) {
      EXPECT_EQ(s->prefill({5, 6, 7}).state, CALRT_JOB_COMPLETED);
      EXPECT_EQ(s->step(false, {8}, {3}, 3).state, CALRT_JOB_COMPLETED);
    }
  }
  bool same() { return state_hash(a.device) == state_hash(b.device); }
  Session a;
  Session b;
};

TEST(StateHash, SameCallsOnTwoDevicesGiveTheSameHash) {
  Twins twins;
  // Each device's object ids come from a process-wide counter, so these differ: the hash
  // must not depend on them.
  EXPECT_TRUE(twins.same());
  const uint64_t before = state_hash(twins.a.device);
  EXPECT_EQ(state_hash(twins.a.device), before) << "hashing changed the state";
}

TEST(StateHash, OneBufferByteChangesIt) {
  Twins twins;
  ASSERT_TRUE(twins.same());
  edit_tensor(twins.a.decode_in, 0, [](uint8_t* data, uint64_t) { data[1] ^= 0x10; });
  EXPECT_FALSE(twins.same());
  edit_tensor(twins.a.decode_in, 0, [](uint8_t* data, uint64_t) { data[1] ^= 0x10; });
  EXPECT_TRUE(twins.same());
}

TEST(StateHash, OneCsrChangesIt) {
  Twins twins;
  set_csr(twins.a.decode_in, 1, 5);
  set_csr(twins.b.decode_in, 1, 6);
  EXPECT_FALSE(twins.same());
  set_csr(twins.b.decode_in, 1, 5);
  EXPECT_TRUE(twins.same());
}

TEST(StateHash, TheClockChangesIt) {
  Twins twins;
  host_spend(twins.a.device, 1);
  EXPECT_FALSE(twins.same());
  host_spend(twins.b.device, 1);
  EXPECT_TRUE(twins.same());
}

// Prefills of the same length whose last token differs leave equal fill levels, timings and
// (once the buffers are made equal) equal buffers: only the KV contents differ.
TEST(StateHash, OneKvValueChangesIt) {
  Session a;
  Session b;
  ASSERT_EQ(a.step(true, {1, 2, 3}, {0, 1, 2}, 0).state, CALRT_JOB_COMPLETED);
  ASSERT_EQ(b.step(true, {1, 2, 4}, {0, 1, 2}, 0).state, CALRT_JOB_COMPLETED);
  for (Session* s : {&a, &b}) {
    write_tokens(s->prefill_in, {1, 2, 3});
    edit_tensor(s->prefill_out, 0,
                [](uint8_t* data, uint64_t size) { std::memset(data, 0, size); });
  }
  EXPECT_NE(state_hash(a.device), state_hash(b.device));
  for (Session* s : {&a, &b}) {
    auto clear = calrt::detail::make_args<Calrt_Kv_Clear_Args>();
    clear.kv = s->kv;
    SIM_OK(api().Kv_Clear(&clear));
  }
  EXPECT_EQ(state_hash(a.device), state_hash(b.device)) << "something besides the KV differed";
}

TEST(HangReport, ListsBuffersKvAndTheLastEightSubmissions) {
  Session s;
  set_csr(s.decode_in, 0, 1);
  std::vector<CalrtJob*> jobs;
  for (uint64_t step = 0; step < 10; ++step) {
    set_csr(s.decode_in, 1, step);
    jobs.push_back(submit_decode(s));
    ASSERT_EQ(wait(jobs.back(), CALRT_TIMEOUT_DEFAULT).code, CALRT_OK);
  }
  set_csr(s.prefill_in, 0, 17);
  const Json r = report(s.device);
  EXPECT_EQ(r["device"]["state"], "CONFIGURED");
  EXPECT_EQ(r["device"]["needs_reset"], "none");
  EXPECT_EQ(r["device"]["stuck"], false);
  EXPECT_EQ(r["device"]["reset_count"], 0);
  ASSERT_EQ(r["chips"].size(), 2u);  // the default device has two chiplets
  for (const Json& chip : r["chips"]) {
    EXPECT_EQ(chip["health"], "OK");
    EXPECT_GT(chip["busy_ns"].get<uint64_t>(), 0u) << "ten jobs computed on every chip";
  }

  ASSERT_EQ(r["kv"].size(), 1u);
  const Json& kv = r["kv"][0];
  EXPECT_EQ(kv["tokens"], 4608);  // Session's KV handle
  EXPECT_EQ(kv["first_token"], 0);
  EXPECT_EQ(kv["filled"], 10);  // ten decode steps at positions 0..9
  EXPECT_TRUE(kv["user_job"].is_null());

  ASSERT_EQ(r["buffers"].size(), 4u);
  int inputs = 0;
  for (const Json& buffer : r["buffers"]) {
    EXPECT_TRUE(buffer["owner_job"].is_null());
    EXPECT_TRUE(buffer["mapped"].empty());
    EXPECT_EQ(buffer["slot"], 0);
    if (buffer["direction"] == "input") {
      ++inputs;
      EXPECT_EQ(buffer["kv"], kv["serial"]);
      ASSERT_EQ(buffer["csrs"].size(), 2u);
      EXPECT_EQ(buffer["csrs"][0]["name"], "cur_seq_len");
      EXPECT_EQ(buffer["csrs"][1]["name"], "past_kv_cur_seq_len");
      const bool decode = buffer["model"] == s.decode_name;
      EXPECT_EQ(buffer["csrs"][0]["value"], decode ? 1 : 17);
      EXPECT_EQ(buffer["csrs"][1]["value"], decode ? 9 : 0);
    } else {
      EXPECT_TRUE(buffer["csrs"].empty());
    }
  }
  EXPECT_EQ(inputs, 2);

  // Jobs are numbered 1, 2, ... per device in submission order (calrt_ext.h).
  ASSERT_EQ(r["submissions"].size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const Json& job = r["submissions"][i];
    EXPECT_EQ(job["serial"], i + 3);
    EXPECT_EQ(job["model"], s.decode_name);
    EXPECT_EQ(job["state"], "COMPLETED");
    EXPECT_EQ(job["code"], "OK");
    EXPECT_TRUE(job["stage"].is_null());
    EXPECT_EQ(job["csrs"], Json::array({1, i + 2}));
    EXPECT_LE(job["submit_ns"].get<uint64_t>(), job["start_ns"].get<uint64_t>());
    EXPECT_LT(job["start_ns"].get<uint64_t>(), job["end_ns"].get<uint64_t>());
  }
  EXPECT_EQ(r["live"], Json({{"calbins", 1}, {"buffers", 4}, {"jobs", 10}, {"kv", 1}}));
  EXPECT_TRUE(r["injections"].empty());
  EXPECT_EQ(r["state_machine_violations"], 0);

  // The wrapper starts with 4 KiB and asks again with the size the runtime reported.
  calrt::Device device(s.device, {calrt::Api(&api())});  // borrowed: released below
  const std::string text = calrt::DeviceDiag::of(device).report();
  EXPECT_GT(text.size(), 4096u) << "the wrapper's second round went unexercised";
  EXPECT_EQ(Json::parse(text), r);
  (void)device.release();  // the Session owns the device
}

TEST(HangReport, ShowsAnInFlightJobsOwnership) {
  Session s;
  set_csr(s.decode_in, 0, 1);
  CalrtJob* job = submit_decode(s);
  const Json r = report(s.device);
  EXPECT_EQ(r["device"]["state"], "RUNNING");
  ASSERT_EQ(r["submissions"].size(), 1u);
  EXPECT_EQ(r["submissions"][0]["state"], "SUBMITTED");  // the virtual clock stood still
  EXPECT_TRUE(r["submissions"][0]["end_ns"].is_null());
  for (const Json& buffer : r["buffers"]) {
    const bool owned = buffer["model"] == s.decode_name;
    EXPECT_EQ(buffer["owner_job"], owned ? Json(1) : Json(nullptr)) << buffer.dump();
  }
  EXPECT_EQ(r["kv"][0]["user_job"], 1);
  ASSERT_EQ(wait(job, CALRT_TIMEOUT_DEFAULT).code, CALRT_OK);
}

// A job_hang fault (FAULTS.md): the job never completes; the report taken while the caller
// waits shows where it stopped, and after the watchdog what clears the fault.
TEST(HangReport, ShowsAHungJobAndWhatClearsIt) {
  Session s;
  calrt::Device device(s.device, {calrt::Api(&api())});  // borrowed: released below
  calrt::DeviceFaults::of(device).set_plan(
      "seed: 3\nfaults:\n  - kind: job_hang\n    during: decode\n    at_op: 1\n");
  set_csr(s.decode_in, 0, 1);
  CalrtJob* job = submit_decode(s);
  CalrtWaitResult result = CALRT_WAIT_READY;
  EXPECT_EQ(wait(job, 10'000'000, &result).code, CALRT_OK);
  EXPECT_EQ(result, CALRT_WAIT_NOT_READY);
  Json r = report(s.device);
  EXPECT_EQ(r["device"]["state"], "RUNNING");
  ASSERT_EQ(r["submissions"].size(), 1u);
  EXPECT_EQ(r["submissions"][0]["state"], "RUNNING");
  EXPECT_EQ(r["submissions"][0]["stage"], "compute");
  ASSERT_EQ(r["injections"].size(), 1u);
  EXPECT_EQ(r["injections"][0]["kind"], "job_hang");
  EXPECT_EQ(r["injections"][0]["site"], "decode");
  EXPECT_EQ(r["injections"][0]["job"], 1);

  // The watchdog ends it (calrt.h: Job_Wait then reports DEVICE_HUNG, the job TIMED_OUT).
  EXPECT_EQ(wait(job, CALRT_TIMEOUT_INFINITE).code, CALRT_DEVICE_HUNG);
  r = report(s.device);
  EXPECT_EQ(r["device"]["state"], "FAULTED");
  EXPECT_EQ(r["device"]["needs_reset"], "job_abort");
  EXPECT_EQ(r["submissions"][0]["state"], "TIMED_OUT");
  EXPECT_EQ(r["submissions"][0]["code"], "DEVICE_HUNG");
  EXPECT_TRUE(r["buffers"][0]["owner_job"].is_null());
  EXPECT_EQ(r["state_machine_violations"], 0);

  device.reset(calrt::ResetLevel::job_abort);
  r = report(s.device);
  EXPECT_EQ(r["device"]["state"], "CONFIGURED");
  EXPECT_EQ(r["device"]["needs_reset"], "none");
  (void)device.release();  // the Session owns the device
}

// ---------------------------------------------------------------------------------------
// The ABI entries themselves.
// ---------------------------------------------------------------------------------------

TEST(DiagExtension, ReportFollowsTheTwoCallSizePattern) {
  Session s;
  auto args = calrt::detail::make_args<Calrt_Diag_Report_Args>();
  args.device = s.device;
  SIM_OK(diag().Diag_Report(&args));  // capacity 0: the size only
  const size_t size = args.size;
  ASSERT_GT(size, 2u);
  std::string text(size - 1, '#');
  args.buffer = text.data();
  args.capacity = text.size();
  SIM_OK(diag().Diag_Report(&args));
  EXPECT_EQ(args.size, size);
  EXPECT_EQ(text, std::string(size - 1, '#')) << "a too small buffer was written";
  text.assign(size + 8, '#');
  args.buffer = text.data();
  args.capacity = text.size();
  SIM_OK(diag().Diag_Report(&args));
  EXPECT_EQ(args.size, size);
  EXPECT_EQ(text.substr(size), std::string(8, '#')) << "written past the report";
  text.resize(size);
  EXPECT_TRUE(Json::accept(text)) << text;
}

TEST(DiagExtension, ReportRejectsANullBufferAndASmallStruct) {
  Session s;
  auto args = calrt::detail::make_args<Calrt_Diag_Report_Args>();
  args.device = s.device;
  args.capacity = 16;
  ApiError error = take(diag().Diag_Report(&args));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("buffer is NULL"), std::string::npos) << error.message;
  args.struct_size = CALRT_DIAG_REPORT_ARGS_STRUCT_SIZE - 1;
  error = take(diag().Diag_Report(&args));
  EXPECT_EQ(error.code, CALRT_STRUCT_TOO_SMALL);
  EXPECT_NE(error.message.find("Calrt_Diag_Report_Args"), std::string::npos) << error.message;
}

TEST(DiagExtension, StateHashRejectsASmallStructAndAStaleDevice) {
  auto args = calrt::detail::make_args<Calrt_Diag_StateHash_Args>();
  {
    Session s;
    args.device = s.device;
    args.struct_size = CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE - 1;
    const ApiError error = take(diag().Diag_StateHash(&args));
    EXPECT_EQ(error.code, CALRT_STRUCT_TOO_SMALL);
    EXPECT_NE(error.message.find("Calrt_Diag_StateHash_Args"), std::string::npos) << error.message;
  }
  args.struct_size = CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE;
  EXPECT_EQ(take(diag().Diag_StateHash(&args)).code, CALRT_INVALID_HANDLE);  // destroyed
  auto report_args = calrt::detail::make_args<Calrt_Diag_Report_Args>();
  report_args.device = args.device;
  EXPECT_EQ(take(diag().Diag_Report(&report_args)).code, CALRT_INVALID_HANDLE);
}

TEST(DiagExtension, TheWrapperReturnsWhatTheCAbiDoes) {
  const calrt::Api sim(calrt_sim_get_api(CALRT_ABI_MAJOR));
  calrt::Device device = calrt::Device::create(sim, calrt::DeviceKind::sim, 0, "");
  const calrt::DeviceDiag wrapper = calrt::DeviceDiag::of(device);
  ASSERT_TRUE(wrapper);
  EXPECT_EQ(wrapper.state_hash(), state_hash(device.get()));
  const std::string text = wrapper.report();
  EXPECT_EQ(Json::parse(text), report(device.get()));
  EXPECT_EQ(Json::parse(text)["device"]["state"], "OPEN");
}

const CalrtProbeExtension& probe() {
  static const auto* ext = reinterpret_cast<const CalrtProbeExtension*>(calrt::find_extension(
      calrt::Api(&api()), CALRT_EXT_PROBE, CALRT_PROBE_EXTENSION_STRUCT_SIZE));
  EXPECT_NE(ext, nullptr) << "the simulator offers no probe extension";
  return *ext;
}

ApiError probe_read(CalrtJob* job, uint32_t point, float* values, size_t capacity,
                    Calrt_Probe_Read_Args* out = nullptr) {
  auto args = calrt::detail::make_args<Calrt_Probe_Read_Args>();
  args.job = job;
  args.point = point;
  args.values = values;
  args.capacity = capacity;
  const ApiError error = take(probe().Probe_Read(&args));
  if (out != nullptr) *out = args;
  return error;
}

// A decode job of token 8 at position 3 after a three-token prefill, not yet waited for.
CalrtJob* decode_after_prefill(Session& s) {
  EXPECT_EQ(s.prefill({5, 6, 7}).state, CALRT_JOB_COMPLETED);
  write_tokens(s.decode_in, {8});
  edit_tensor(s.decode_in, 1, [](uint8_t* data, uint64_t size) {
    const int32_t position = 3;
    std::memset(data, 0, size);
    std::memcpy(data, &position, sizeof position);
  });
  set_csr(s.decode_in, 0, 1);
  set_csr(s.decode_in, 1, 3);
  return submit_decode(s);
}

TEST(Probes, ACompletedJobGivesTheResidualStreamAtEveryLayerBoundary) {
  Session s;
  CalrtJob* job = decode_after_prefill(s);
  ASSERT_EQ(wait(job, CALRT_TIMEOUT_DEFAULT).code, CALRT_OK);
  Calrt_Probe_Read_Args shape{};
  ASSERT_EQ(probe_read(job, 0, nullptr, 0, &shape).code, CALRT_OK);
  EXPECT_EQ(shape.points, 5u);  // the tiny model: embedding + 2 layers x (attention, MLP)
  EXPECT_EQ(shape.count, 128u);
  std::vector<std::vector<float>> points;
  for (uint32_t p = 0; p < shape.points; ++p) {
    points.emplace_back(shape.count, 0.0f);
    ASSERT_EQ(probe_read(job, p, points.back().data(), points.back().size()).code, CALRT_OK);
    for (const float v : points.back()) ASSERT_TRUE(std::isfinite(v)) << "point " << p;
    if (p > 0) EXPECT_NE(points[p], points[p - 1]) << "point " << p << " changed nothing";
  }
  // The C++ wrapper reads the same.
  const calrt::Job wrapped(job, {calrt::Api(&api())});
  EXPECT_EQ(calrt::JobProbes::of(wrapped).read_all(), points);
}

TEST(Probes, TheSameTokenGivesTheSameEmbeddingRow) {
  Session s;
  CalrtJob* first = decode_after_prefill(s);
  ASSERT_EQ(wait(first, CALRT_TIMEOUT_DEFAULT).code, CALRT_OK);
  std::vector<float> a(128), b(128);
  ASSERT_EQ(probe_read(first, 0, a.data(), a.size()).code, CALRT_OK);
  set_csr(s.decode_in, 1, 4);  // the same token one position later
  CalrtJob* second = submit_decode(s);
  ASSERT_EQ(wait(second, CALRT_TIMEOUT_DEFAULT).code, CALRT_OK);
  ASSERT_EQ(probe_read(second, 0, b.data(), b.size()).code, CALRT_OK);
  EXPECT_EQ(a, b) << "the embedding does not depend on the position";
  std::vector<float> a_last(128), b_last(128);
  ASSERT_EQ(probe_read(first, 4, a_last.data(), a_last.size()).code, CALRT_OK);
  ASSERT_EQ(probe_read(second, 4, b_last.data(), b_last.size()).code, CALRT_OK);
  EXPECT_NE(a_last, b_last) << "the last layer sees the position through RoPE and the KV";
}

TEST(Probes, RefusedBeforeTheJobCompletes) {
  Session s;
  CalrtJob* job = decode_after_prefill(s);
  float value = 0.0f;
  const ApiError error = probe_read(job, 0, &value, 1);
  EXPECT_EQ(error.code, CALRT_WRONG_STATE);
  EXPECT_NE(error.message.find("has not completed"), std::string::npos) << error.message;
  ASSERT_EQ(wait(job, CALRT_TIMEOUT_DEFAULT).code, CALRT_OK);
}

TEST(Probes, BadArgumentsAreNamedAndAShortBufferIsLeftAlone) {
  Session s;
  CalrtJob* job = decode_after_prefill(s);
  ASSERT_EQ(wait(job, CALRT_TIMEOUT_DEFAULT).code, CALRT_OK);
  ApiError error = probe_read(job, 5, nullptr, 0);
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("point 5 of 5"), std::string::npos) << error.message;
  error = probe_read(job, 0, nullptr, 16);
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("values is NULL with capacity 16"), std::string::npos);
  std::vector<float> short_buffer(16, -7.0f);
  Calrt_Probe_Read_Args args{};
  ASSERT_EQ(probe_read(job, 1, short_buffer.data(), short_buffer.size(), &args).code, CALRT_OK);
  EXPECT_EQ(args.count, 128u);
  EXPECT_EQ(short_buffer, std::vector<float>(16, -7.0f)) << "all or nothing";
}

}  // namespace
}  // namespace simdev::test
