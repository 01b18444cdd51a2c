// The validation layer over the in-process simulator: each invariant provoked (and the same
// sequence without the bug passing clean), refuse and report modes, the leak report at
// close, and the recording's format.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "abi/validate/codec.hpp"
#include "abi/validate/validate_layer.hpp"
#include "runner/core/session.hpp"
#include "runner/core/submission_inputs.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/runner/scratch_dir_test.hpp"

namespace {

namespace v = calrt::validate;
using json = nlohmann::json;

constexpr calrt::Timeout kWait = std::chrono::seconds(30);
constexpr uint32_t kTokens = 16;

// A slow job stays in flight (not a device fault) until it is waited out or cancelled.
constexpr const char* kSlowPlan =
    "seed: 1\nfaults:\n  - kind: slow_completion\n    during: prefill\n    at_op: 1\n"
    "    factor: 1000000\n";

std::vector<json> read_lines(const std::filesystem::path& path) {
  std::ifstream stream(path);
  std::vector<json> lines;
  std::string text;
  while (std::getline(stream, text)) {
    lines.push_back(json::parse(text));
  }
  return lines;
}

class LayerTest : public ScratchDirTest {
 protected:
  // Wraps the simulator; `record` names a file in the scratch directory or is empty.
  void open(bool refuse = true, const std::string& record = {}) {
    v::Options options;
    options.refuse = refuse;
    options.inner_name = "sim (in-process)";
    if (!record.empty()) {
      record_ = dir_ / record;
      options.record_path = record_.string();
    }
    layer_ = v::wrap(inner_ != nullptr ? inner_ : calrt_sim_get_api(CALRT_ABI_MAJOR), options);
    api_ = calrt::Api(layer_->api());
    device_ = calrt::Device::create(api_, calrt::DeviceKind::sim, 0, "seed=1");
    calbin_ = calrt::Calbin::create(device_, CALRT_TEST_CALBIN, kWait);
    calbin_.configure(kWait);
    info_ = calbin_.info();
    io_ = make_io();
  }

  runner::ModelIo make_io() {
    runner::ModelIo io;
    for (const calrt::ModelDesc& model : calbin_.models()) {
      if (model.type == calrt::ModelType::prefill) {
        io.desc = model;
        break;
      }
    }
    runner::StepResult step;
    runner::check_model_io(info_, io, calrt::ModelType::prefill, step);
    EXPECT_TRUE(step.passed());
    io.input = calrt::Buffer::create(calbin_, io.name(), calrt::Direction::input);
    io.output = calrt::Buffer::create(calbin_, io.name(), calrt::Direction::output);
    return io;
  }

  // Prefill inputs: kTokens zero tokens at positions past.., cur = kTokens.
  void write(uint64_t past) {
    const std::vector<int32_t> tokens(kTokens, 0);
    runner::write_submission(io_, tokens, static_cast<int32_t>(past), past, kWait);
  }
  calrt::Job submit() { return calrt::Job::submit(calbin_, io_.name(), io_.input, io_.output); }
  calrt::Job submit_held() {
    calrt::DeviceFaults::of(device_).set_plan(kSlowPlan);
    return submit();
  }
  void complete(calrt::Job& job) {
    ASSERT_EQ(job.wait(kWait), calrt::WaitResult::ready);
    ASSERT_EQ(job.status().state, calrt::JobState::completed);
  }

  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    for (const v::Violation& violation : layer_->violations()) {
      out.push_back(violation.id);
    }
    return out;
  }

  // Runs `call`, which must fail with `code` and a message starting "validate: <id>:".
  template <class Fn>
  void expect_refused(Fn&& call, CalrtCode code, const std::string& id) {
    try {
      call();
      ADD_FAILURE() << "expected " << id << " to be refused";
    } catch (const calrt::Error& error) {
      EXPECT_EQ(error.code(), code) << error.what();
      EXPECT_EQ(error.message().rfind("validate: " + id + ": ", 0), 0u) << error.message();
    }
  }

  const CalrtApi* inner_ = nullptr;  // the wrapped runtime; the simulator when null

  void TearDown() override {
    io_ = {};
    calbin_ = {};
    device_ = {};
    api_ = {};
    layer_.reset();
    ScratchDirTest::TearDown();
  }

  std::filesystem::path record_;
  std::unique_ptr<v::Layer> layer_;
  calrt::Api api_;
  calrt::Device device_;
  calrt::Calbin calbin_;
  calrt::CalbinInfo info_;
  runner::ModelIo io_;
};

TEST_F(LayerTest, CorrectUsageHasNoViolation) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  calrt::Job first = submit();
  complete(first);
  write(kTokens);  // the sequence continues where it ended
  calrt::Job second = submit();
  complete(second);
  EXPECT_EQ(kv.info().filled_tokens, 2 * kTokens);
  kv.clear();
  write(0);  // after a clear it restarts at 0
  calrt::Job third = submit();
  complete(third);
  kv.free();
  EXPECT_TRUE(layer_->violations().empty());
}

TEST_F(LayerTest, ApplyAfterFreeIsRefused) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  CalrtKv* raw = kv.get();
  kv.free();
  expect_refused([&] { api_.kv_free_raw(raw); }, CALRT_INVALID_HANDLE, "KV.free-twice");
  expect_refused(
      [&] {
        calrt::Kv stale(raw, {api_});
        try {
          stale.apply(io_.input);
        } catch (...) {
          stale.release();
          throw;
        }
        stale.release();
      },
      CALRT_INVALID_HANDLE, "KV.apply-after-free");
  EXPECT_EQ(ids(), (std::vector<std::string>{"KV.free-twice", "KV.apply-after-free"}));
  EXPECT_NE(layer_->violations()[1].message.find("kv#1"), std::string::npos);
}

TEST_F(LayerTest, ApplyBeforeAllocateIsRefused) {
  open();
  auto* forged = reinterpret_cast<CalrtKv*>(uintptr_t{0x7e57'0000'0000'0100});
  calrt::Kv never(forged, {api_});
  expect_refused([&] { never.apply(io_.input); }, CALRT_INVALID_HANDLE, "KV.apply-unknown");
  expect_refused([&] { never.free(); }, CALRT_INVALID_HANDLE, "KV.free-unknown");
  never.release();
  EXPECT_EQ(ids(), (std::vector<std::string>{"KV.apply-unknown", "KV.free-unknown"}));
}

TEST_F(LayerTest, ClearOrFreeWhileInFlightIsRefused) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  calrt::Job job = submit_held();
  expect_refused([&] { kv.clear(); }, CALRT_BUSY, "KV.in-flight");
  expect_refused([&] { api_.kv_free_raw(kv.get()); }, CALRT_BUSY, "KV.in-flight");
  job.cancel();
  EXPECT_EQ(job.wait(kWait), calrt::WaitResult::ready);
  kv.clear();  // the job is final: allowed again
  kv.free();
  EXPECT_EQ(ids(), (std::vector<std::string>{"KV.in-flight", "KV.in-flight"}));
}

TEST_F(LayerTest, SequenceMustContinue) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  calrt::Job first = submit();
  complete(first);
  write(0);  // rewrites positions 0..15 without a clear
  expect_refused([&] { submit(); }, CALRT_OUT_OF_RANGE, "SEQ.continuity");
  write(kTokens + 1);  // skips position 16
  expect_refused([&] { submit(); }, CALRT_OUT_OF_RANGE, "SEQ.continuity");
  write(kTokens);
  calrt::Job second = submit();
  complete(second);
  EXPECT_EQ(ids(), (std::vector<std::string>{"SEQ.continuity", "SEQ.continuity"}));
  EXPECT_NE(layer_->violations()[0].message.find("past_kv_cur_seq_len 0 but 16"), std::string::npos)
      << layer_->violations()[0].message;
}

TEST_F(LayerTest, SequenceMustFitTheKv) {
  open();
  calrt::Kv small = calrt::Kv::allocate(calbin_, kTokens / 2);
  small.apply(io_.input);
  write(0);
  expect_refused([&] { submit(); }, CALRT_OUT_OF_RANGE, "SEQ.capacity");
  calrt::Kv fits = calrt::Kv::allocate(calbin_, kTokens);
  fits.apply(io_.input);
  calrt::Job job = submit();
  complete(job);
  EXPECT_EQ(ids(), std::vector<std::string>{"SEQ.capacity"});
  EXPECT_NE(layer_->violations()[0].message.find("exceeds the capacity 8"), std::string::npos)
      << layer_->violations()[0].message;
}

TEST_F(LayerTest, MapSetCsrOrApplyWhileInFlightIsRefused) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  calrt::Job job = submit_held();
  expect_refused([&] { io_.input.map(io_.token_input); }, CALRT_BUSY, "MAP.in-flight");
  expect_refused([&] { io_.output.map(io_.logits_output); }, CALRT_BUSY, "MAP.in-flight");
  expect_refused([&] { io_.input.set_csr(io_.cur_seq_len_csr, 1); }, CALRT_BUSY, "MAP.in-flight");
  expect_refused([&] { kv.apply(io_.input); }, CALRT_BUSY, "MAP.in-flight");
  EXPECT_NE(layer_->violations()[0].message.find("job#1"), std::string::npos);
  job.cancel();
  ASSERT_EQ(job.wait(kWait), calrt::WaitResult::ready);
  io_.input.map(io_.token_input).unmap();  // the job is final: allowed again
  EXPECT_EQ(layer_->violations().size(), 4u);
}

TEST_F(LayerTest, WriteThroughStaleMappingIsReported) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  {  // the control: a kept pointer that is not written to is no violation
    calrt::Mapping mapping = io_.input.map(io_.token_input);
    mapping.unmap();
    calrt::Job job = submit();
    complete(job);
    EXPECT_TRUE(layer_->violations().empty());
  }
  kv.clear();
  calrt::Mapping mapping = io_.input.map(io_.token_input);
  auto* kept = static_cast<unsigned char*>(static_cast<void*>(mapping.bytes().data()));
  mapping.unmap();
  calrt::Job job = submit_held();
  kept[0] ^= 1;  // the bug: a write after unmap, while the job owns the buffer
  job.cancel();
  ASSERT_EQ(job.wait(kWait), calrt::WaitResult::ready);
  ASSERT_EQ(ids(), std::vector<std::string>{"WRITE.after-unmap"});
  EXPECT_FALSE(layer_->violations()[0].refused);
  EXPECT_NE(layer_->violations()[0].message.find("offset 0"), std::string::npos);
}

// The simulator's table with a Buffer_Destroy that frees the buffer and then, before the
// layer sees the call return, runs a hook: what another thread may do in that window.
const CalrtApi* g_sim = nullptr;
std::function<void()> g_after_inner_destroy;

CalrtError* destroy_then_hook(Calrt_Buffer_Destroy_Args* args) {
  CalrtError* error = g_sim->Buffer_Destroy(args);
  if (auto hook = std::exchange(g_after_inner_destroy, nullptr)) {
    hook();
  }
  return error;
}

const CalrtApi* hooked_sim() {
  static CalrtApi table;
  g_sim = calrt_sim_get_api(CALRT_ABI_MAJOR);
  table = *g_sim;
  table.Buffer_Destroy = destroy_then_hook;
  return &table;
}

// Completes `job` on the runtime without the layer seeing it, so the layer still holds the
// job's snapshots of stale mappings.
void complete_behind_layer(const calrt::Job& job) {
  Calrt_Job_Wait_Args args{};
  args.struct_size = CALRT_JOB_WAIT_ARGS_STRUCT_SIZE;
  args.job = job.get();
  args.timeout_ns = 30'000'000'000ull;
  CalrtError* error = g_sim->Job_Wait(&args);
  ASSERT_EQ(error, nullptr);
  ASSERT_EQ(args.result, CALRT_WAIT_READY);
}

// Job_Wait observing a job while another thread's Buffer_Destroy has freed the job's input:
// the layer must not read the freed storage through the snapshot it took at submit (under
// AddressSanitizer that read is a heap use-after-free) nor report a write that never
// happened.
TEST_F(LayerTest, WaitInsideAnotherThreadsBufferDestroyReadsNoFreedStorage) {
  inner_ = hooked_sim();
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  io_.input.map(io_.token_input).unmap();  // a stale mapping, snapshotted at submit
  calrt::Job job = submit();
  complete_behind_layer(job);
  bool waited = false;
  g_after_inner_destroy = [&] {
    EXPECT_EQ(job.wait(kWait), calrt::WaitResult::ready);
    waited = true;
  };
  io_.input.destroy();
  EXPECT_TRUE(waited);
  EXPECT_TRUE(layer_->violations().empty()) << layer_->violations()[0].message;
}

// The same window with real threads, many times over (ThreadSanitizer's view of it).
TEST_F(LayerTest, WaitRacingBufferDestroyOnThreads) {
  g_sim = calrt_sim_get_api(CALRT_ABI_MAJOR);  // what complete_behind_layer waits through
  open();
  for (int round = 0; round < 20; ++round) {
    io_ = make_io();
    calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
    kv.apply(io_.input);
    write(0);
    io_.input.map(io_.token_input).unmap();
    calrt::Job job = submit();
    complete_behind_layer(job);
    calrt::Buffer input = std::move(io_.input);
    std::thread destroyer([&] { input.destroy(); });
    EXPECT_EQ(job.wait(kWait), calrt::WaitResult::ready);
    destroyer.join();
  }
  EXPECT_TRUE(layer_->violations().empty()) << layer_->violations()[0].message;
}

TEST_F(LayerTest, LeaksAreReportedAtDeviceDestroy) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  io_ = {};
  io_.input = calrt::Buffer::create(calbin_, make_io().name(), calrt::Direction::input);
  // make_io() created two more buffers and released them: only io_.input stays live.
  EXPECT_NO_THROW(device_.destroy());  // never refused
  kv.release();
  io_.input.release();
  calbin_.release();
  EXPECT_EQ(ids(), (std::vector<std::string>{"LEAK.kv", "LEAK.buffer", "LEAK.calbin"}));
  for (const v::Violation& violation : layer_->violations()) {
    EXPECT_FALSE(violation.refused);
  }
  EXPECT_NE(layer_->violations()[0].message.find("kv#1"), std::string::npos);
}

TEST_F(LayerTest, NoLeakWhenEverythingIsReleased) {
  open();
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.free();
  io_ = {};
  calbin_.destroy();
  device_.destroy();
  EXPECT_TRUE(layer_->violations().empty());
}

TEST_F(LayerTest, ReportModeForwardsTheViolatingCall) {
  open(/*refuse=*/false);
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  calrt::Job first = submit();
  complete(first);
  write(0);
  calrt::Job again = submit();  // reported, not refused: the runtime runs it
  complete(again);
  ASSERT_EQ(ids(), std::vector<std::string>{"SEQ.continuity"});
  EXPECT_FALSE(layer_->violations()[0].refused);
  CalrtKv* raw = kv.get();
  kv.free();
  // Forwarded: the runtime's own answer, not the layer's.
  try {
    api_.kv_free_raw(raw);
    ADD_FAILURE() << "double free succeeded";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_INVALID_HANDLE);
    EXPECT_NE(error.message().rfind("validate: ", 0), 0u) << error.message();
  }
  EXPECT_EQ(ids(), (std::vector<std::string>{"SEQ.continuity", "KV.free-twice"}));
}

TEST_F(LayerTest, InnerErrorsBecomeTheLayersOwn) {
  open();
  try {
    calrt::Buffer::create(calbin_, io_.name() + "_no_such_model", calrt::Direction::input);
    ADD_FAILURE() << "an unknown model was found";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_NOT_FOUND);
    EXPECT_NE(error.message().find("_no_such_model"), std::string::npos) << error.message();
  }
  // The extensions the simulator offers are still reachable through the layer.
  EXPECT_TRUE(calrt::DeviceFaults::of(device_));
  EXPECT_NE(calrt::find_extension(api_, CALRT_EXT_CLOCK, CALRT_CLOCK_EXTENSION_STRUCT_SIZE),
            nullptr);
  EXPECT_NE(calrt::find_extension(api_, CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE), nullptr);
}

TEST_F(LayerTest, RecordingFormat) {
  open(true, "calls.jsonl");
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  kv.apply(io_.input);
  write(0);
  std::vector<unsigned char> written;
  {
    calrt::Mapping tokens = io_.input.map(io_.token_input);
    tokens.bytes()[0] = std::byte{7};
    const auto bytes = tokens.bytes();
    written.assign(reinterpret_cast<const unsigned char*>(bytes.data()),
                   reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size());
  }
  calrt::Job job = submit();
  complete(job);
  { calrt::Mapping logits = io_.output.map(io_.logits_output); }
  // Flushed per line: everything so far is in the file while the layer is still open.
  std::vector<json> lines = read_lines(record_);
  ASSERT_GT(lines.size(), 10u);
  EXPECT_EQ(lines[0]["schema"], "calrt-calls/1");
  EXPECT_EQ(lines[0]["abi"]["major"], CALRT_ABI_MAJOR);
  EXPECT_EQ(lines[0]["runtime"], "sim (in-process)");
  EXPECT_EQ(lines.back()["call"], "Buffer_Unmap");
  EXPECT_TRUE(lines.back()["in"].contains("sha256"));
  uint64_t seq = 0;
  bool round_trip = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["seq"], seq++);
    EXPECT_TRUE(lines[i].contains("call") && lines[i].contains("code"));
    if (lines[i]["call"] == "Buffer_Unmap" && lines[i]["in"].contains("data") &&
        lines[i]["in"]["tensor_index"] == io_.token_input) {
      const auto decoded = v::base64_decode(lines[i]["in"]["data"].get<std::string>());
      ASSERT_TRUE(decoded);
      round_trip = *decoded == written;
    }
  }
  EXPECT_TRUE(round_trip) << "the last token tensor written is not in the recording";
  EXPECT_EQ(lines[1]["call"], "Device_Create");
  EXPECT_EQ(lines[1]["out"]["device"], "device#1");
  EXPECT_EQ(lines[1]["in"]["config"], "seed=1");
  // Handles are symbolic: no pointer value is ever written.
  std::ifstream stream(record_);
  const std::string text((std::istreambuf_iterator<char>(stream)), {});
  EXPECT_EQ(text.find("0x"), std::string::npos);
  EXPECT_NE(text.find("\"buffer#2\""), std::string::npos);
  EXPECT_NE(text.find("\"kv\":\"kv#1\""), std::string::npos);
  EXPECT_NE(text.find("\"job\":\"job#1\""), std::string::npos);
  EXPECT_EQ(layer_->recorded_calls(), lines.size() - 1);
}

TEST_F(LayerTest, RefusedCallsAreRecordedWithTheirViolation) {
  open(true, "calls.jsonl");
  calrt::Kv kv = calrt::Kv::allocate(calbin_, 64);
  CalrtKv* raw = kv.get();
  kv.free();
  EXPECT_THROW(api_.kv_free_raw(raw), calrt::Error);
  const std::vector<json> lines = read_lines(record_);
  const json& last = lines.back();
  EXPECT_EQ(last["call"], "Kv_Free");
  EXPECT_EQ(last["in"]["kv"], "kv#1");
  EXPECT_EQ(last["code"], CALRT_INVALID_HANDLE);
  EXPECT_EQ(last["violations"][0]["id"], "KV.free-twice");
  EXPECT_EQ(last["violations"][0]["refused"], true);
}

TEST(LayerSlots, WrapRejectsNullAndFreesItsSlot) {
  EXPECT_THROW(v::wrap(nullptr, {}), std::invalid_argument);
  for (int i = 0; i < 3 * v::kMaxLayers; ++i) {  // slots are reused once a layer is gone
    auto layer = v::wrap(calrt_sim_get_api(CALRT_ABI_MAJOR), {});
    ASSERT_NE(layer->api(), nullptr);
  }
  v::Options bad;
  bad.record_path = "/nonexistent-dir/calls.jsonl";
  try {
    v::wrap(calrt_sim_get_api(CALRT_ABI_MAJOR), bad);
    ADD_FAILURE() << "an unwritable recording was accepted";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent-dir/calls.jsonl"), std::string::npos);
  }
}

}  // namespace
