// Injected faults through the Device (simdev/device/FAULTS.md): every kind at the sites the
// tiny calbin has (configure, prefill, decode, kv; it has no kv_update model) gives the
// documented code, job state, device state, chip health and reset level; a reset below the
// level leaves the device FAULTED, one at it makes it healthy and the fault-free logits come
// back; persistent faults are never cleared; timing faults scale device time by their
// factor; the job watchdog; and the same plan twice gives the same run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "simdev/device/device.hpp"
#include "simdev/device/timing/cost_model.hpp"
#include "tests/simdev/device/sim_session.hpp"
#include "tests/simdev/device/text_match.hpp"

namespace simdev {
namespace {

constexpr uint64_t kDefault = CALRT_TIMEOUT_DEFAULT;
constexpr uint64_t kInfinite = CALRT_TIMEOUT_INFINITE;
constexpr TimePs kWatchdogPs = 10000 * kPsPerMs;  // the default job_watchdog_ms
const std::vector<int32_t> kPrompt = {11, 22, 33, 44, 55, 66, 77};
constexpr int32_t kNextToken = 88;

struct Step {
  std::optional<Error> submit_error;
  std::optional<Error> wait_error;
  CalrtWaitResult wait_result = CALRT_WAIT_NOT_READY;
  CalrtJobState state = CALRT_JOB_SUBMITTED;
  CalrtCode code = CALRT_OK;
  std::string message;
  TimePs compute_start_ps = 0;
  TimePs compute_end_ps = 0;
  TimePs end_ps = 0;
  std::vector<uint16_t> logits;  // the logits tensor as stored (tiled), when COMPLETED

  TimePs compute_ps() const { return compute_end_ps - compute_start_ps; }
};

// One device with the tiny calbin loaded (not yet configured), and the helpers to run the
// fixed prompt and one decode step on it.
class Rig {
 public:
  explicit Rig(const std::string& config = "", const std::string& plan = "") {
    auto made = Device::create(config);
    EXPECT_TRUE(made) << made.error().message;
    device = std::move(*made);
    if (!plan.empty()) {
      auto set = device->set_fault_plan(plan);
      EXPECT_TRUE(set) << set.error().message;
    }
    auto id = device->calbin_create(test::tiny_calbin().string(), kDefault);
    EXPECT_TRUE(id) << id.error().message;
    calbin = *id;
    for (const calbin::Model& model : image().manifest.models) {
      (model.type == calbin::ModelType::kPrefill ? prefill_model : decode_model) = &model;
    }
  }

  const CalbinImage& image() const { return **device->calbin(calbin, DeviceCall::kCalbinGetInfo); }

  Expected<ConfigureResult> configure(uint64_t timeout_ns = kDefault) {
    auto result = device->calbin_configure(calbin, timeout_ns);
    if (result && !buffers_made_) {
      buffers_made_ = true;
      prefill_in = buffer(*prefill_model, CALRT_INPUT);
      prefill_out = buffer(*prefill_model, CALRT_OUTPUT);
      decode_in = buffer(*decode_model, CALRT_INPUT);
      decode_out = buffer(*decode_model, CALRT_OUTPUT);
    }
    return result;
  }

  Status allocate_kv(uint64_t tokens = 64) {
    auto id = device->kv_allocate(calbin, tokens);
    if (!id) {
      return tl::unexpected(id.error());
    }
    kv = *id;
    for (ObjectId input : {prefill_in, decode_in}) {
      if (auto applied = device->kv_apply(kv, input); !applied) {
        return applied;
      }
    }
    return {};
  }

  // Configured with a KV handle: the fault-free path, for setup and after a reset.
  void ready() {
    if (!image().configured) {
      auto configured = configure();
      ASSERT_TRUE(configured) << configured.error().message;
      auto allocated = allocate_kv();
      ASSERT_TRUE(allocated) << allocated.error().message;
    } else if (device->kv_info(kv)) {
      auto cleared = device->kv_clear(kv);
      ASSERT_TRUE(cleared) << cleared.error().message;
    } else {
      auto allocated = allocate_kv();
      ASSERT_TRUE(allocated) << allocated.error().message;
    }
  }

  Expected<ObjectId> submit(bool prefill, const std::vector<int32_t>& tokens,
                            const std::vector<int32_t>& positions, uint64_t past) {
    const ObjectId in = prefill ? prefill_in : decode_in;
    const ObjectId out = prefill ? prefill_out : decode_out;
    write(in, 0, tokens);
    write(in, 1, positions);
    EXPECT_TRUE(device->buffer_set_csr(in, 0, tokens.size()));
    EXPECT_TRUE(device->buffer_set_csr(in, 1, past));
    const calbin::Model& model = prefill ? *prefill_model : *decode_model;
    return device->job_submit(calbin, model.name, in, out);
  }

  // Waits for the job (wait_ns of device time), then reads its record and, when it
  // completed, the logits.
  Step collect(ObjectId job, bool prefill, uint64_t wait_ns = kInfinite, bool destroy = true) {
    Step step;
    auto waited = device->job_wait(job, wait_ns);
    if (!waited) {
      step.wait_error = waited.error();
    } else {
      step.wait_result = waited->result;
    }
    const Job& record = **device->job(job);
    step.state = record.state;
    step.code = record.code;
    step.message = record.message;
    step.compute_start_ps = record.compute_start_ps;
    step.compute_end_ps = record.compute_end_ps;
    step.end_ps = record.end_ps;
    if (destroy && record.final()) {
      EXPECT_TRUE(device->job_destroy(job));
    }
    if (step.state == CALRT_JOB_COMPLETED) {
      auto mapping = device->buffer_map(prefill ? prefill_out : decode_out, 0);
      EXPECT_TRUE(mapping) << mapping.error().message;
      const auto* raw = static_cast<const uint16_t*>(mapping->data);
      step.logits.assign(raw, raw + mapping->size_bytes / 2);
      EXPECT_TRUE(device->buffer_unmap(prefill ? prefill_out : decode_out, 0));
    }
    return step;
  }

  Step run(bool prefill, const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
           uint64_t past) {
    auto job = submit(prefill, tokens, positions, past);
    if (!job) {
      Step step;
      step.submit_error = job.error();
      return step;
    }
    return collect(*job, prefill);
  }

  Step prefill() {
    std::vector<int32_t> positions(kPrompt.size());
    for (size_t i = 0; i < positions.size(); ++i) {
      positions[i] = static_cast<int32_t>(i);
    }
    return run(true, kPrompt, positions, 0);
  }
  Step decode() {
    const auto at = static_cast<int32_t>(kPrompt.size());
    return run(false, {kNextToken}, {at}, kPrompt.size());
  }

  CalrtDeviceState state() const { return device->status().state; }
  ChipStatus chip(uint32_t index) const { return *device->chip_status(index); }
  uint64_t hits(FaultKind kind, FaultSite site) const {
    for (const FaultHitCount& hit : device->fault_hits()) {
      if (hit.kind == kind && hit.site == site) {
        return hit.count;
      }
    }
    ADD_FAILURE() << to_string(kind) << " cannot happen at " << to_string(site);
    return 0;
  }
  // The job's compute as the cost model prices it (cost_model.hpp), from the same CSRs.
  JobCost cost(bool prefill) const {
    const calbin::Model& model = prefill ? *prefill_model : *decode_model;
    std::vector<uint64_t> csrs(model.csrs.size(), 0);
    csrs[0] = prefill ? kPrompt.size() : 1;
    csrs[1] = prefill ? 0 : kPrompt.size();
    const auto& manifest = image().manifest;
    return job_cost(manifest, model, job_shape(manifest, model, csrs, {}), device->config());
  }

  std::unique_ptr<Device> device;
  ObjectId calbin;
  const calbin::Model* prefill_model = nullptr;
  const calbin::Model* decode_model = nullptr;
  ObjectId prefill_in, prefill_out, decode_in, decode_out, kv;

 private:
  ObjectId buffer(const calbin::Model& model, CalrtDirection direction) {
    auto id = device->buffer_create(calbin, model.name, direction, 0);
    EXPECT_TRUE(id) << id.error().message;
    return id ? *id : ObjectId{};
  }

  void write(ObjectId buffer_id, uint32_t tensor, const std::vector<int32_t>& values) {
    auto mapping = device->buffer_map(buffer_id, tensor);
    ASSERT_TRUE(mapping) << mapping.error().message;
    std::memset(mapping->data, 0, mapping->size_bytes);
    std::memcpy(mapping->data, values.data(),
                std::min<size_t>(mapping->size_bytes, values.size() * sizeof(int32_t)));
    ASSERT_TRUE(device->buffer_unmap(buffer_id, tensor));
  }

  bool buffers_made_ = false;
};

// The fault-free run every faulted run is compared with.
struct Baseline {
  Step prefill;
  Step decode;
  TimePs configure_ps = 0;
};

const Baseline& baseline() {
  static const Baseline base = [] {
    Baseline b;
    Rig rig;
    auto configured = rig.configure();
    EXPECT_TRUE(configured) << configured.error().message;
    b.configure_ps = configured ? configured->duration_ps : 0;
    EXPECT_TRUE(rig.allocate_kv());
    b.prefill = rig.prefill();
    b.decode = rig.decode();
    EXPECT_EQ(b.prefill.state, CALRT_JOB_COMPLETED) << b.prefill.message;
    EXPECT_EQ(b.decode.state, CALRT_JOB_COMPLETED) << b.decode.message;
    return b;
  }();
  return base;
}

// A configured rig with a KV handle and `plan` set.
std::unique_ptr<Rig> ready_rig(const std::string& plan, const std::string& config = "") {
  auto rig = std::make_unique<Rig>(config, plan);
  rig->ready();
  return rig;
}

// After a healthy reset the fault is gone: a fresh prefill and decode give the fault-free
// logits.
void expect_healthy_again(Rig& rig) {
  for (uint32_t c = 0; c < 2; ++c) {
    EXPECT_EQ(rig.chip(c).health, CALRT_CHIP_OK) << "chip " << c;
  }
  rig.ready();
  const Step prefill = rig.prefill();
  ASSERT_EQ(prefill.state, CALRT_JOB_COMPLETED) << prefill.message;
  EXPECT_EQ(prefill.logits, baseline().prefill.logits);
  const Step decode = rig.decode();
  ASSERT_EQ(decode.state, CALRT_JOB_COMPLETED) << decode.message;
  EXPECT_EQ(decode.logits, baseline().decode.logits);
}

// Every reset below `level` cancels but fails its self-test; the one at `level` passes.
void expect_cleared_at(Rig& rig, CalrtResetLevel level) {
  for (int below = CALRT_RESET_JOB_ABORT; below < level; ++below) {
    auto after = rig.device->reset(static_cast<CalrtResetLevel>(below), kDefault);
    ASSERT_TRUE(after) << after.error().message;
    EXPECT_EQ(*after, CALRT_DEVICE_FAULTED) << "reset level " << below << " cleared it";
  }
  auto after = rig.device->reset(level, kDefault);
  ASSERT_TRUE(after) << after.error().message;
  // From chip up the calbin lost its configuration (ABI: Reset).
  EXPECT_EQ(*after, level >= CALRT_RESET_CHIP ? CALRT_DEVICE_OPEN : CALRT_DEVICE_CONFIGURED);
  expect_healthy_again(rig);
}

std::vector<float> logical(const std::vector<uint16_t>& stored) {
  constexpr size_t kVocab = 1000;  // the tiny calbin's
  std::vector<uint16_t> bits(kVocab);
  calbin::to_logical(stored.data(), bits.data(), 1, kVocab, 16);
  std::vector<float> out;
  for (uint16_t b : bits) {
    out.push_back(calbin::bf16_to_f32(b));
  }
  return out;
}

// ---- failing kinds at the job sites --------------------------------------------------------

struct JobFaultCase {
  const char* kind;
  CalrtCode code;
  CalrtJobState state;
  CalrtResetLevel level;
  // Chip health right after the fault (chip 0, chip 1); the plan names chip 1 where it can.
  CalrtChipHealth chip0;
  CalrtChipHealth chip1;
};

std::string plan_for(const JobFaultCase& c, const std::string& site) {
  const std::string kind = c.kind;
  const bool has_chip = kind == "chip_hang" || kind == "ecc_uncorrectable";
  return "seed: 3\nfaults: [{kind: " + kind + ", during: " + site + ", at_op: 1" +
         (has_chip ? ", chip: 1" : "") + "}]";
}

class JobFaults : public ::testing::TestWithParam<std::tuple<JobFaultCase, bool>> {};

TEST_P(JobFaults, CodeStateHealthAndResetLevel) {
  const auto& [c, at_decode] = GetParam();
  const std::string site = at_decode ? "decode" : "prefill";
  auto rig = ready_rig(plan_for(c, site));
  Step step;
  if (at_decode) {
    const Step prefill = rig->prefill();
    ASSERT_EQ(prefill.state, CALRT_JOB_COMPLETED) << prefill.message;
    step = rig->decode();
  } else {
    step = rig->prefill();
  }
  // Job_Wait returns the device-class code; the job is FAILED or TIMED_OUT with it.
  ASSERT_TRUE(step.wait_error) << c.kind << " at " << site;
  EXPECT_EQ(step.wait_error->code, c.code) << step.wait_error->message;
  EXPECT_EQ(step.state, c.state) << step.message;
  EXPECT_EQ(step.code, c.code);
  EXPECT_TRUE(contains(step.message, "job #")) << step.message;
  EXPECT_EQ(rig->state(), CALRT_DEVICE_FAULTED);
  EXPECT_EQ(rig->chip(0).health, c.chip0) << c.kind;
  EXPECT_EQ(rig->chip(1).health, c.chip1) << c.kind;
  EXPECT_EQ(rig->hits(*parse_fault_kind(c.kind), *parse_fault_site(site)), 1u);
  EXPECT_EQ(rig->device->status().last_error, c.code);
  expect_cleared_at(*rig, c.level);
}

const JobFaultCase kJobFaultCases[] = {
    {"dma_h2d", CALRT_DMA_ERROR, CALRT_JOB_FAILED, CALRT_RESET_JOB_ABORT, CALRT_CHIP_OK,
     CALRT_CHIP_OK},
    {"dma_d2h", CALRT_DMA_ERROR, CALRT_JOB_FAILED, CALRT_RESET_JOB_ABORT, CALRT_CHIP_OK,
     CALRT_CHIP_OK},
    {"job_hang", CALRT_DEVICE_HUNG, CALRT_JOB_TIMED_OUT, CALRT_RESET_JOB_ABORT, CALRT_CHIP_HUNG,
     CALRT_CHIP_HUNG},
    {"chip_hang", CALRT_DEVICE_HUNG, CALRT_JOB_TIMED_OUT, CALRT_RESET_CORES, CALRT_CHIP_OK,
     CALRT_CHIP_HUNG},
    {"ecc_uncorrectable", CALRT_ECC_UNCORRECTABLE, CALRT_JOB_FAILED, CALRT_RESET_CHIP,
     CALRT_CHIP_OK, CALRT_CHIP_DEGRADED},
    {"firmware_crash", CALRT_FIRMWARE_CRASH, CALRT_JOB_FAILED, CALRT_RESET_CHIP, CALRT_CHIP_HUNG,
     CALRT_CHIP_HUNG},
    {"d2d_link_down", CALRT_D2D_LINK_DOWN, CALRT_JOB_FAILED, CALRT_RESET_FULL, CALRT_CHIP_DEGRADED,
     CALRT_CHIP_DEGRADED},
};

INSTANTIATE_TEST_SUITE_P(EveryFailingKind, JobFaults,
                         ::testing::Combine(::testing::ValuesIn(kJobFaultCases), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<JobFaults::ParamType>& param) {
                           return std::string(std::get<0>(param.param).kind) +
                                  (std::get<1>(param.param) ? "_decode" : "_prefill");
                         });

// ---- when failures show ----------------------------------------------------------------------

TEST(Watchdog, AHungJobEndsAtComputeStartPlusTheWatchdog) {
  auto rig = ready_rig("faults: [{kind: job_hang, during: prefill, at_op: 1}]");
  const Step step = rig->prefill();
  EXPECT_EQ(step.state, CALRT_JOB_TIMED_OUT);
  EXPECT_EQ(step.end_ps - step.compute_start_ps, kWatchdogPs);
  EXPECT_TRUE(contains(step.message, "watchdog")) << step.message;
  EXPECT_TRUE(contains(rig->device->hang_report(), "hung in segment"));

  // The config key moves it.
  auto quick =
      ready_rig("faults: [{kind: job_hang, during: decode, at_op: 1}]", "job_watchdog_ms=5");
  ASSERT_EQ(quick->prefill().state, CALRT_JOB_COMPLETED);
  const Step decode = quick->decode();
  EXPECT_EQ(decode.state, CALRT_JOB_TIMED_OUT);
  EXPECT_EQ(decode.end_ps - decode.compute_start_ps, 5 * kPsPerMs);
}

TEST(Watchdog, AShorterWaitSeesNotReadyAndMayResetFirst) {
  auto rig = ready_rig("faults: [{kind: job_hang, during: prefill, at_op: 1}]");
  auto job = rig->submit(true, kPrompt, {0, 1, 2, 3, 4, 5, 6}, 0);
  ASSERT_TRUE(job);
  const Step early = rig->collect(*job, true, 1000000000, /*destroy=*/false);  // 1 s
  EXPECT_FALSE(early.wait_error);
  EXPECT_EQ(early.wait_result, CALRT_WAIT_NOT_READY);
  EXPECT_EQ(early.state, CALRT_JOB_RUNNING);
  EXPECT_EQ(rig->state(), CALRT_DEVICE_RUNNING);  // not FAULTED before the watchdog
  EXPECT_EQ(rig->chip(0).health, CALRT_CHIP_HUNG);
  // job_hang needs only job_abort: a reset before the watchdog clears it.
  auto after = rig->device->reset(CALRT_RESET_JOB_ABORT, kDefault);
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, CALRT_DEVICE_CONFIGURED);
  EXPECT_EQ((*rig->device->job(*job))->state, CALRT_JOB_CANCELLED);
  expect_healthy_again(*rig);
}

TEST(Watchdog, ABrokenPartStaysBrokenWhenItsJobEndsEarly) {
  // chip_hang needs cores: a job_abort reset before the watchdog fails its self-test.
  auto rig = ready_rig("faults: [{kind: chip_hang, during: prefill, at_op: 1}]");
  auto job = rig->submit(true, kPrompt, {0, 1, 2, 3, 4, 5, 6}, 0);
  ASSERT_TRUE(job);
  (void)rig->collect(*job, true, 1000000, /*destroy=*/false);
  auto after = rig->device->reset(CALRT_RESET_JOB_ABORT, kDefault);
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, CALRT_DEVICE_FAULTED);
  expect_cleared_at(*rig, CALRT_RESET_CORES);

  // Cancelling the hung job does not unhang the chip either.
  auto cancelled = ready_rig("faults: [{kind: job_hang, during: prefill, at_op: 1}]");
  auto hung = cancelled->submit(true, kPrompt, {0, 1, 2, 3, 4, 5, 6}, 0);
  ASSERT_TRUE(hung);
  (void)cancelled->collect(*hung, true, 1000000, /*destroy=*/false);
  ASSERT_TRUE(cancelled->device->job_cancel(*hung));
  EXPECT_EQ(cancelled->state(), CALRT_DEVICE_FAULTED);
  expect_cleared_at(*cancelled, CALRT_RESET_JOB_ABORT);
}

TEST(Watchdog, ASlowJobPastTheWatchdogIsAHang) {
  auto rig = ready_rig(
      "faults: [{kind: slow_completion, during: prefill, at_op: 1, "
      "factor: 1000000}]");
  const Step step = rig->prefill();
  ASSERT_TRUE(step.wait_error);
  EXPECT_EQ(step.wait_error->code, CALRT_DEVICE_HUNG);
  EXPECT_EQ(step.state, CALRT_JOB_TIMED_OUT);
  EXPECT_EQ(step.end_ps - step.compute_start_ps, kWatchdogPs);
  EXPECT_EQ(rig->state(), CALRT_DEVICE_FAULTED);
  expect_cleared_at(*rig, CALRT_RESET_JOB_ABORT);
}

TEST(FaultTiming, D2dLinkDownFailsAtTheBarrierClosingItsSegment) {
  auto rig = ready_rig("faults: [{kind: d2d_link_down, during: prefill, at_op: 1, segment: 2}]");
  const JobCost cost = rig->cost(true);
  ASSERT_GT(cost.segments.size(), 2u);
  const TimePs barrier = segment_start_ps(cost.segments, 2) + cost.segments[2].chips_ps();
  const Step step = rig->prefill();
  EXPECT_EQ(step.state, CALRT_JOB_FAILED);
  EXPECT_EQ(step.end_ps - step.compute_start_ps, barrier);
  EXPECT_TRUE(contains(step.message, "segment 2")) << step.message;
}

TEST(FaultTiming, FirmwareCrashFailsEveryInFlightJob) {
  // The crash hits a Kv_Allocate while a prefill is queued.
  auto rig = ready_rig("faults: [{kind: firmware_crash, during: kv, at_op: 2}]");
  auto job = rig->submit(true, kPrompt, {0, 1, 2, 3, 4, 5, 6}, 0);
  ASSERT_TRUE(job);
  auto second = rig->device->kv_allocate(rig->calbin, 8);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, CALRT_FIRMWARE_CRASH);
  const Step step = rig->collect(*job, true);
  ASSERT_TRUE(step.wait_error);
  EXPECT_EQ(step.wait_error->code, CALRT_FIRMWARE_CRASH);
  EXPECT_EQ(step.state, CALRT_JOB_FAILED);
  EXPECT_EQ(step.code, CALRT_FIRMWARE_CRASH);
  EXPECT_EQ(rig->chip(0).health, CALRT_CHIP_HUNG);
  expect_cleared_at(*rig, CALRT_RESET_CHIP);
}

// ---- configure ------------------------------------------------------------------------------

TEST(ConfigureFaults, FailuresAndTheirLevels) {
  struct Case {
    const char* plan;
    CalrtCode code;
    CalrtResetLevel level;
  };
  for (const Case& c : {
           Case{"faults: [{kind: dma_h2d, during: configure, at_op: 1}]", CALRT_DMA_ERROR,
                CALRT_RESET_JOB_ABORT},
           Case{"faults: [{kind: ecc_uncorrectable, during: configure, at_op: 1, chip: 1}]",
                CALRT_ECC_UNCORRECTABLE, CALRT_RESET_CHIP},
           Case{"faults: [{kind: firmware_crash, during: configure, at_op: 1}]",
                CALRT_FIRMWARE_CRASH, CALRT_RESET_CHIP},
       }) {
    Rig rig("", c.plan);
    auto configured = rig.configure();
    ASSERT_FALSE(configured) << c.plan;
    EXPECT_EQ(configured.error().code, c.code) << configured.error().message;
    EXPECT_TRUE(contains(configured.error().message, "calbin #")) << configured.error().message;
    EXPECT_FALSE(rig.image().configured);
    EXPECT_EQ(rig.state(), CALRT_DEVICE_FAULTED);
    for (int below = CALRT_RESET_JOB_ABORT; below < c.level; ++below) {
      EXPECT_EQ(*rig.device->reset(static_cast<CalrtResetLevel>(below), kDefault),
                CALRT_DEVICE_FAULTED)
          << c.plan << " level " << below;
    }
    EXPECT_EQ(*rig.device->reset(c.level, kDefault), CALRT_DEVICE_OPEN) << c.plan;
    expect_healthy_again(rig);
  }
}

TEST(ConfigureFaults, EccUncorrectableNamesTheFlippedWeight) {
  Rig rig("", "faults: [{kind: ecc_uncorrectable, during: configure, at_op: 1, chip: 1}]");
  auto configured = rig.configure();
  ASSERT_FALSE(configured);
  EXPECT_TRUE(contains(configured.error().message, "chip 1 layer")) << configured.error().message;
  EXPECT_EQ(rig.chip(1).health, CALRT_CHIP_DEGRADED);
  EXPECT_EQ(rig.chip(1).ecc_uncorrected, 1u);
  EXPECT_EQ(rig.chip(0).ecc_uncorrected, 0u);
}

TEST(ConfigureFaults, AHungUploadReturnsAtTheWatchdogOrTheTimeout) {
  {
    // The default timeout (30 s) is longer than the watchdog (10 s).
    Rig rig("", "faults: [{kind: job_hang, during: configure, at_op: 1}]");
    const TimePs before = rig.device->now();
    auto configured = rig.configure();
    ASSERT_FALSE(configured);
    EXPECT_EQ(configured.error().code, CALRT_DEVICE_HUNG);
    EXPECT_EQ(rig.device->now() - before, kWatchdogPs);
    EXPECT_EQ(rig.chip(0).health, CALRT_CHIP_HUNG);
    expect_cleared_at(rig, CALRT_RESET_CHIP);
  }
  {
    Rig rig("", "faults: [{kind: job_hang, during: configure, at_op: 1}]");
    const TimePs before = rig.device->now();
    auto configured = rig.configure(3000000);  // 3 ms
    ASSERT_FALSE(configured);
    EXPECT_EQ(configured.error().code, CALRT_DEVICE_HUNG);
    EXPECT_EQ(rig.device->now() - before, 3 * kPsPerMs);
    EXPECT_EQ(rig.state(), CALRT_DEVICE_FAULTED);
  }
}

TEST(ConfigureFaults, SlowUploadTakesFactorTimesLongerOrTimesOut) {
  Rig rig("", "faults: [{kind: slow_completion, during: configure, at_op: 1, factor: 3}]");
  auto configured = rig.configure();
  ASSERT_TRUE(configured) << configured.error().message;
  EXPECT_EQ(configured->duration_ps, 3 * baseline().configure_ps);

  // Past the caller's timeout: DEVICE_HUNG at the timeout, FAULTED needing a chip reset.
  Rig late("", "faults: [{kind: slow_completion, during: configure, at_op: 1, factor: 3}]");
  const uint64_t timeout_ns = ps_to_ns(2 * baseline().configure_ps);
  const TimePs before = late.device->now();
  auto timed_out = late.configure(timeout_ns);
  ASSERT_FALSE(timed_out);
  EXPECT_EQ(timed_out.error().code, CALRT_DEVICE_HUNG);
  EXPECT_EQ(late.device->now() - before, ns_to_ps(timeout_ns));
  expect_cleared_at(late, CALRT_RESET_CHIP);
}

TEST(ConfigureFaults, AnUploadPastItsTimeoutNeedsAChipReset) {
  // No fault: the upload itself is longer than the caller allows.
  Rig rig;
  auto configured = rig.configure(ps_to_ns(baseline().configure_ps / 2));
  ASSERT_FALSE(configured);
  EXPECT_EQ(configured.error().code, CALRT_DEVICE_HUNG);
  EXPECT_TRUE(contains(configured.error().message, "timeout")) << configured.error().message;
  expect_cleared_at(rig, CALRT_RESET_CHIP);
}

// ---- KV operations --------------------------------------------------------------------------

TEST(KvFaults, ExhaustionFailsTheAllocationOnly) {
  Rig rig("", "faults: [{kind: kv_exhaustion, at_op: 1}]");
  ASSERT_TRUE(rig.configure());
  const uint64_t free_before = rig.device->kv_capacity(rig.calbin)->free_tokens;
  auto refused = rig.device->kv_allocate(rig.calbin, 48);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, CALRT_KV_EXHAUSTED);
  EXPECT_TRUE(contains(refused.error().message, "48 tokens")) << refused.error().message;
  EXPECT_EQ(rig.device->kv_capacity(rig.calbin)->free_tokens, free_before);
  EXPECT_EQ(rig.state(), CALRT_DEVICE_CONFIGURED);  // a request-class fault
  EXPECT_EQ(rig.hits(FaultKind::kKvExhaustion, FaultSite::kKv), 1u);
  ASSERT_TRUE(rig.allocate_kv());
  const Step prefill = rig.prefill();
  EXPECT_EQ(prefill.logits, baseline().prefill.logits);
}

TEST(KvFaults, EccUncorrectableAtKvClearFlipsTheHandlesKv) {
  // kv op 1 is the Kv_Allocate of ready(); op 2 the Kv_Clear below.
  auto rig = ready_rig("faults: [{kind: ecc_uncorrectable, during: kv, at_op: 2, chip: 0}]");
  ASSERT_EQ(rig->prefill().state, CALRT_JOB_COMPLETED);
  auto cleared = rig->device->kv_clear(rig->kv);
  ASSERT_FALSE(cleared);
  EXPECT_EQ(cleared.error().code, CALRT_ECC_UNCORRECTABLE);
  EXPECT_TRUE(contains(cleared.error().message, "flipped")) << cleared.error().message;
  EXPECT_TRUE(contains(cleared.error().message, "kv handle #")) << cleared.error().message;
  EXPECT_EQ(rig->chip(0).health, CALRT_CHIP_DEGRADED);
  EXPECT_EQ(rig->chip(0).ecc_uncorrected, 1u);
  expect_cleared_at(*rig, CALRT_RESET_CHIP);
}

TEST(KvFaults, EccUncorrectableAndFirmwareCrashAtKvAllocate) {
  Rig rig("", "faults: [{kind: ecc_uncorrectable, during: kv, at_op: 1}]");
  ASSERT_TRUE(rig.configure());
  auto refused = rig.device->kv_allocate(rig.calbin, 16);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, CALRT_ECC_UNCORRECTABLE);
  EXPECT_TRUE(contains(refused.error().message, "Kv_Allocate of 16 tokens"))
      << refused.error().message;
  EXPECT_EQ(rig.device->kv_capacity(rig.calbin)->live_handles, 0u);
  expect_cleared_at(rig, CALRT_RESET_CHIP);
}

// ---- device lost ----------------------------------------------------------------------------

TEST(DeviceLost, AtEverySiteTheDeviceIsGoneForGood) {
  for (const std::string site : {"configure", "prefill", "decode", "kv"}) {
    Rig rig("", "faults: [{kind: device_lost, during: " + site + ", at_op: 1}]");
    if (site == "configure") {
      auto configured = rig.configure();
      ASSERT_FALSE(configured);
      EXPECT_EQ(configured.error().code, CALRT_DEVICE_LOST);
    } else if (site == "kv") {
      ASSERT_TRUE(rig.configure());
      auto allocated = rig.device->kv_allocate(rig.calbin, 16);
      ASSERT_FALSE(allocated);
      EXPECT_EQ(allocated.error().code, CALRT_DEVICE_LOST);
    } else {
      rig.ready();
      if (site == "decode") {
        ASSERT_EQ(rig.prefill().state, CALRT_JOB_COMPLETED);
      }
      const Step step = site == "decode" ? rig.decode() : rig.prefill();
      ASSERT_TRUE(step.wait_error);
      EXPECT_EQ(step.wait_error->code, CALRT_DEVICE_LOST);
      EXPECT_EQ(step.state, CALRT_JOB_FAILED);
      EXPECT_EQ(step.code, CALRT_DEVICE_LOST);
    }
    EXPECT_EQ(rig.state(), CALRT_DEVICE_LOST_STATE) << site;
    EXPECT_EQ(rig.chip(0).health, CALRT_CHIP_FAILED);
    EXPECT_EQ(rig.chip(1).health, CALRT_CHIP_FAILED);
    auto reset = rig.device->reset(CALRT_RESET_FULL, kDefault);
    ASSERT_FALSE(reset) << site;
    EXPECT_EQ(reset.error().code, CALRT_DEVICE_LOST);
    EXPECT_EQ(rig.hits(FaultKind::kDeviceLost, *parse_fault_site(site)), 1u);
  }
}

// ---- faults that do not fail ------------------------------------------------------------------

TEST(SilentFaults, CorrectableEccDegradesTheChipUntilAReset) {
  for (const std::string site : {"configure", "prefill", "decode", "kv"}) {
    auto rig = ready_rig("faults: [{kind: ecc_correctable, during: " + site +
                         ", at_op: 1, "
                         "chip: 1}]");
    const Step prefill = rig->prefill();
    const Step decode = rig->decode();
    EXPECT_EQ(prefill.logits, baseline().prefill.logits) << site;  // no data changes
    EXPECT_EQ(decode.logits, baseline().decode.logits) << site;
    EXPECT_EQ(rig->chip(1).health, CALRT_CHIP_DEGRADED) << site;
    EXPECT_EQ(rig->chip(1).ecc_corrected, 1u);
    EXPECT_EQ(rig->chip(0).health, CALRT_CHIP_OK);
    EXPECT_EQ(rig->state(), CALRT_DEVICE_CONFIGURED);
    EXPECT_EQ(*rig->device->reset(CALRT_RESET_JOB_ABORT, kDefault), CALRT_DEVICE_CONFIGURED);
    EXPECT_EQ(rig->chip(1).health, CALRT_CHIP_OK);
    EXPECT_EQ(rig->chip(1).ecc_corrected, 1u);  // the counter is since creation
  }
}

TEST(SilentFaults, CorruptedOutputCompletesWithWrongLogits) {
  for (const bool at_decode : {false, true}) {
    auto rig = ready_rig(std::string("seed: 9\nfaults: [{kind: corrupted_output, during: ") +
                         (at_decode ? "decode" : "prefill") + ", at_op: 1}]");
    const Step prefill = rig->prefill();
    const Step decode = rig->decode();
    const Step& hit = at_decode ? decode : prefill;
    const Step& clean = at_decode ? baseline().decode : baseline().prefill;
    ASSERT_EQ(hit.state, CALRT_JOB_COMPLETED) << hit.message;
    EXPECT_FALSE(hit.wait_error);
    ASSERT_EQ(hit.logits.size(), clean.logits.size());
    size_t changed = 0;
    for (size_t i = 0; i < hit.logits.size(); ++i) {
      changed += hit.logits[i] != clean.logits[i] ? 1 : 0;
    }
    // About 1/16 of the stored values (FAULTS.md).
    EXPECT_GT(changed, hit.logits.size() / 32);
    EXPECT_LT(changed, hit.logits.size() / 8);
    const std::vector<float> got = logical(hit.logits);
    const std::vector<float> want = logical(clean.logits);
    double dot = 0, a = 0, b = 0, max_error = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;  // no NaN or Inf that a check could miss
      dot += double(got[i]) * want[i];
      a += double(got[i]) * got[i];
      b += double(want[i]) * want[i];
      max_error = std::max(max_error, std::abs(double(got[i]) - want[i]));
    }
    EXPECT_LT(dot / std::sqrt(a * b), 0.9);  // a logits check wants >= 0.99
    EXPECT_GT(max_error, 1e6);
    EXPECT_EQ(rig->state(), CALRT_DEVICE_CONFIGURED);
    // One-shot: the next run is clean again.
    expect_healthy_again(*rig);
  }
}

TEST(SilentFaults, SlowCompletionMultipliesTheComputeTime) {
  auto rig = ready_rig("faults: [{kind: slow_completion, during: decode, at_op: 1, factor: 3}]");
  const Step prefill = rig->prefill();
  const Step decode = rig->decode();
  EXPECT_EQ(prefill.compute_ps(), baseline().prefill.compute_ps());
  EXPECT_EQ(decode.compute_ps(), 3 * baseline().decode.compute_ps());
  EXPECT_EQ(decode.logits, baseline().decode.logits);
  EXPECT_EQ(rig->state(), CALRT_DEVICE_CONFIGURED);
}

TEST(SilentFaults, ThermalThrottleSlowsOneChipWhileItLasts) {
  auto rig = ready_rig(
      "faults: [{kind: thermal_throttle, during: prefill, at_op: 1, chip: 0, "
      "factor: 4, duration_us: 1000000}]");
  const Step prefill = rig->prefill();
  ASSERT_EQ(prefill.state, CALRT_JOB_COMPLETED);
  EXPECT_EQ(prefill.logits, baseline().prefill.logits);
  // Each segment ends when the slower chip is done: chip 0 at 4x its time; the D2D
  // reductions are not slowed.
  const JobCost cost = rig->cost(true);
  TimePs clean = 0, throttled = 0;
  for (const Segment& s : cost.segments) {
    clean += std::max(s.chips[0].ps, s.chips[1].ps) + s.d2d_ps;
    throttled += std::max(4 * s.chips[0].ps, s.chips[1].ps) + s.d2d_ps;
  }
  EXPECT_EQ(baseline().prefill.compute_ps(), clean);
  EXPECT_EQ(prefill.compute_ps(), throttled);
  EXPECT_GT(prefill.compute_ps(), baseline().prefill.compute_ps());
  EXPECT_EQ(rig->chip(0).health, CALRT_CHIP_DEGRADED);
  EXPECT_EQ(rig->chip(1).health, CALRT_CHIP_OK);
  // Still throttled for the decode (within the second): slower, same numbers.
  const Step decode = rig->decode();
  EXPECT_GT(decode.compute_ps(), baseline().decode.compute_ps());
  EXPECT_EQ(decode.logits, baseline().decode.logits);
  // A reset does not cool a chip; time does.
  EXPECT_EQ(*rig->device->reset(CALRT_RESET_JOB_ABORT, kDefault), CALRT_DEVICE_CONFIGURED);
  EXPECT_EQ(rig->chip(0).health, CALRT_CHIP_DEGRADED);
  ASSERT_TRUE(rig->device->host_spend(1000000000));
  EXPECT_EQ(rig->chip(0).health, CALRT_CHIP_OK);
  rig->ready();
  EXPECT_EQ(rig->prefill().compute_ps(), baseline().prefill.compute_ps());
}

// ---- persistent faults, reset errors --------------------------------------------------------

TEST(Persistent, ADeviceClassFaultIsNeverCleared) {
  auto rig = ready_rig("faults: [{kind: dma_h2d, during: prefill, at_op: 1, persistent: true}]");
  const Step step = rig->prefill();
  EXPECT_EQ(step.code, CALRT_DMA_ERROR);
  for (int level = CALRT_RESET_JOB_ABORT; level <= CALRT_RESET_FULL; ++level) {
    auto after = rig->device->reset(static_cast<CalrtResetLevel>(level), kDefault);
    ASSERT_TRUE(after);
    EXPECT_EQ(*after, CALRT_DEVICE_FAULTED) << "level " << level;
  }
  EXPECT_EQ(rig->device->status().reset_count, 4u);
}

TEST(Persistent, ANonDeviceFaultKeepsFiring) {
  auto rig = ready_rig("faults: [{kind: kv_exhaustion, at_op: 2, persistent: true}]");
  for (int i = 0; i < 3; ++i) {
    auto refused = rig->device->kv_allocate(rig->calbin, 8);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, CALRT_KV_EXHAUSTED);
  }
  EXPECT_EQ(rig->hits(FaultKind::kKvExhaustion, FaultSite::kKv), 3u);
  EXPECT_EQ(rig->state(), CALRT_DEVICE_CONFIGURED);
}

TEST(Reset, ATimedOutResetLeavesTheDeviceFaulted) {
  auto rig = ready_rig("");
  auto timed_out = rig->device->reset(CALRT_RESET_CHIP, 1000);  // 1 us; a chip reset takes more
  ASSERT_FALSE(timed_out);
  EXPECT_EQ(timed_out.error().code, CALRT_DEVICE_HUNG);
  EXPECT_EQ(rig->state(), CALRT_DEVICE_FAULTED);
  expect_cleared_at(*rig, CALRT_RESET_CHIP);
}

// ---- the plan through the device ------------------------------------------------------------

TEST(DeviceFaultPlan, HitsListEveryPairInAFixedOrder) {
  Rig rig;
  const std::vector<FaultHitCount> hits = rig.device->fault_hits();
  ASSERT_EQ(hits.size(), 48u);  // FAULTS.md's table
  size_t at = 0;
  for (size_t k = 0; k < kFaultKindCount; ++k) {
    for (size_t s = 0; s < kFaultSiteCount; ++s) {
      const auto kind = static_cast<FaultKind>(k);
      const auto site = static_cast<FaultSite>(s);
      if (!can_happen(kind, site)) {
        continue;
      }
      ASSERT_LT(at, hits.size());
      EXPECT_EQ(hits[at].kind, kind);
      EXPECT_EQ(hits[at].site, site);
      EXPECT_EQ(hits[at].count, 0u);
      ++at;
    }
  }
}

TEST(DeviceFaultPlan, ABadPlanIsRefusedAndReplacingOneKeepsTheCounters) {
  auto one_chip = Device::create("chips=1");
  ASSERT_TRUE(one_chip);
  auto refused = (*one_chip)->set_fault_plan("faults: [{kind: chip_hang, chip: 1, at_op: 1}]");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, CALRT_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(refused.error().message, "faults[0].chip")) << refused.error().message;

  auto rig = ready_rig("faults: [{kind: ecc_correctable, during: kv, at_op: 1}]");
  EXPECT_EQ(rig->hits(FaultKind::kEccCorrectable, FaultSite::kKv), 1u);
  ASSERT_TRUE(rig->device->set_fault_plan(""));
  EXPECT_EQ(rig->hits(FaultKind::kEccCorrectable, FaultSite::kKv), 1u);
  ASSERT_TRUE(rig->device->kv_allocate(rig->calbin, 8));
  EXPECT_EQ(rig->hits(FaultKind::kEccCorrectable, FaultSite::kKv), 1u);  // the empty plan
}

// Same plan, same calls: same injections, same outputs, same device state.
TEST(DeviceFaultPlan, SamePlanTwiceGivesTheSameRun) {
  const std::string plan =
      "seed: 21\nfaults: [{kind: ecc_correctable, probability: 0.4, persistent: true, chip: 1}, "
      "{kind: corrupted_output, probability: 0.3}, {kind: thermal_throttle, probability: 0.5, "
      "chip: 0, factor: 3, duration_us: 50}, {kind: slow_completion, during: decode, "
      "probability: 0.3, factor: 2}]";
  const auto run = [&plan] {
    auto rig = ready_rig(plan);
    std::vector<Step> steps = {rig->prefill()};
    for (int32_t i = 0; i < 6; ++i) {
      const auto at = static_cast<int32_t>(kPrompt.size()) + i;
      steps.push_back(rig->run(false, {kNextToken + i}, {at}, static_cast<uint64_t>(at)));
    }
    std::vector<uint64_t> counts;
    for (const FaultHitCount& hit : rig->device->fault_hits()) {
      counts.push_back(hit.count);
    }
    return std::tuple{std::move(steps), counts, rig->device->now(), rig->device->state_hash()};
  };
  const auto [steps, counts, now, hash] = run();
  const auto [steps2, counts2, now2, hash2] = run();
  uint64_t injected = 0;
  for (uint64_t c : counts) {
    injected += c;
  }
  EXPECT_GT(injected, 3u);  // the plan did something
  EXPECT_EQ(counts2, counts);
  EXPECT_EQ(now2, now);
  EXPECT_EQ(hash2, hash);
  ASSERT_EQ(steps2.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps2[i].state, CALRT_JOB_COMPLETED);
    EXPECT_EQ(steps2[i].logits, steps[i].logits) << i;
    EXPECT_EQ(steps2[i].end_ps, steps[i].end_ps) << i;
  }
}

}  // namespace
}  // namespace simdev
