// Held buffer calls (simdev/service/PROTOCOL.md, "Held buffer calls"): between jobs the client
// answers a repeated map, unmap, CSR write or job release itself and sends them with the next
// submit. What a caller sees must not change: the same outputs and device times as the
// simulator in process, BUFFER_REUSE still caught, and a held call that the daemon refuses
// (another session faulted the shared device) still fails, by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "abi/calrt_ext.hpp"
#include "tests/simdev/service/client/daemon_client_test.hpp"

#if CALRT_TEST_IN_PROCESS
#include "simdev/runtime/sim_api.h"
#endif

namespace {

using namespace std::chrono_literals;

class HeldCallsTest : public calrt_test::DaemonClientTest {};

struct StepRecord {
  std::vector<std::byte> output;
  calrt::JobState state = calrt::JobState::submitted;
  std::chrono::nanoseconds start{0}, end{0};
  bool operator==(const StepRecord&) const = default;
};

calrt::ModelDesc model_of(const calrt_test::PrefillSession& s) {
  for (calrt::ModelDesc& m : s.calbin.models()) {
    if (m.name == s.model) return m;
  }
  throw std::runtime_error("no model " + s.model);
}

uint32_t token_index(const calrt_test::PrefillSession& s) {
  const calrt::ModelDesc model = model_of(s);
  const calrt::TensorDesc* in =
      model.find_tensor(calrt::Direction::input, calrt::TensorRole::token);
  if (in == nullptr) throw std::runtime_error("no token input in " + s.model);
  return in->index;
}

// Writes the token and the CSRs, runs the job, reads the first output: a decode-like step
// whose calls are all held from the second step on.
StepRecord step(calrt_test::PrefillSession& s, int32_t token) {
  const calrt::ModelDesc model = model_of(s);
  for (uint32_t i = 0; i < model.csrs.size(); ++i) {
    s.input.set_csr(i, model.csrs[i].name == "cur_seq_len" ? 1 : 0);
  }
  {
    calrt::Mapping map = s.input.map(token_index(s));
    std::memcpy(map.bytes().data(), &token, sizeof token);
  }
  calrt::Job job = s.submit();
  EXPECT_EQ(job.wait(10s), calrt::WaitResult::ready);
  const calrt::JobStatus status = job.status();
  StepRecord record;
  record.state = status.state;
  record.start = status.start_time;
  record.end = status.end_time;
  const calrt::Mapping out = s.output.map(0);
  record.output.assign(out.bytes().begin(), out.bytes().end());
  return record;
}

// Another session faults the shared device with a job of its own (a DMA error), unknown to
// the sessions whose client still believes the device takes writes.
void fault_with_a_job(calrt_test::PrefillSession& other) {
  calrt::DeviceFaults::of(other.device)
      .set_plan("seed: 1\nfaults:\n  - kind: dma_h2d\n    during: prefill\n    at_op: 1\n");
  calrt::Job failing = other.submit();
  EXPECT_THROW(failing.wait(10s), calrt::Error);  // the job's DMA_ERROR
  ASSERT_EQ(failing.status().state, calrt::JobState::failed);
}

std::vector<StepRecord> run_steps(const calrt::Api& api) {
  calrt_test::PrefillSession s(api, CALRT_TEST_CALBIN);
  std::vector<StepRecord> records;
  for (int32_t token = 1; token <= 6; ++token) records.push_back(step(s, token * 7));
  return records;
}

TEST_F(HeldCallsTest, StepsMatchTheSimulatorInProcess) {
#if !CALRT_TEST_IN_PROCESS
  GTEST_SKIP() << "built without the in-process simulator";
#else
  start();
  const std::vector<StepRecord> served = run_steps(api_);
  const std::vector<StepRecord> local = run_steps(calrt::Api(calrt_sim_get_api(CALRT_ABI_MAJOR)));
  ASSERT_EQ(served.size(), local.size());
  for (size_t i = 0; i < served.size(); ++i) {
    EXPECT_EQ(served[i].state, calrt::JobState::completed) << "step " << i;
    EXPECT_TRUE(served[i] == local[i]) << "step " << i << " differs from the simulator in process";
    // Each step's token reached the device: a lost held write would repeat the last output.
    if (i > 0) EXPECT_NE(served[i].output, served[i - 1].output) << "step " << i;
  }
#endif
}

TEST_F(HeldCallsTest, AWriteThroughAStaleMappingIsStillBufferReuse) {
  start();
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN);
  ASSERT_EQ(step(s, 3).state, calrt::JobState::completed);
  // Held map and unmap: the pointer is the client's shadow, kept past unmap.
  std::byte* stale = nullptr;
  {
    calrt::Mapping map = s.input.map(token_index(s));
    stale = map.bytes().data();
  }
  calrt::Job job = s.submit();
  *stale = std::byte{0x5a};
  ASSERT_EQ(job.wait(10s), calrt::WaitResult::ready);
  const calrt::JobStatus status = job.status();
  EXPECT_EQ(status.state, calrt::JobState::failed);
  EXPECT_EQ(status.code, CALRT_BUFFER_REUSE) << status.message;
}

TEST_F(HeldCallsTest, AHeldCallRefusedByTheDaemonFailsTheSubmitNamingIt) {
  start();
  calrt_test::PrefillSession held(api_, CALRT_TEST_CALBIN);
  ASSERT_EQ(step(held, 5).state, calrt::JobState::completed);
  calrt_test::PrefillSession other(api_, CALRT_TEST_CALBIN);
  fault_with_a_job(other);

  // The client still believes the device takes writes: the CSR write is held, and answered.
  held.input.set_csr(0, 1);
  try {
    // The submit repeats the step's: held as well, so the refusal surfaces at the wait.
    calrt::Job job = held.submit();
    (void)job.wait(10s);
    FAIL() << "a job on a FAULTED device ran";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_WRONG_STATE) << e.what();
    EXPECT_NE(std::string(e.what()).find("Buffer_SetCsr, held by the client until Job_Wait"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(held.device.status().state, calrt::DeviceState::faulted);
  // Nothing is held any more: the next call is answered by the daemon, as in process.
  try {
    held.input.set_csr(0, 1);
    FAIL() << "Buffer_SetCsr on a FAULTED device was accepted";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_WRONG_STATE) << e.what();
    EXPECT_EQ(std::string(e.what()).find("held"), std::string::npos) << e.what();
  }
}

// A submit that repeats the last one the daemon accepted is held too, and sent with the job's
// wait. Refused there (another session faulted the device meanwhile), its job is FAILED with
// the refusal's code: the wait reports it, naming the held submit, and so does Job_Status.
TEST_F(HeldCallsTest, AHeldSubmitRefusedByTheDaemonFailsItsJobAtTheWait) {
  start();
  calrt_test::PrefillSession held(api_, CALRT_TEST_CALBIN);
  ASSERT_EQ(step(held, 5).state, calrt::JobState::completed);
  calrt_test::PrefillSession other(api_, CALRT_TEST_CALBIN);
  fault_with_a_job(other);
  ASSERT_EQ(held.device.status().state, calrt::DeviceState::faulted);

  calrt::Job job = held.submit();  // held: in process it would be refused here
  try {
    (void)job.wait(10s);
    FAIL() << "a held submit on a FAULTED device ran";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_WRONG_STATE) << e.what();
    EXPECT_NE(std::string(e.what()).find("Job_Submit, held by the client until Job_Wait, failed"),
              std::string::npos)
        << e.what();
  }
  const calrt::JobStatus status = job.status();
  EXPECT_EQ(status.state, calrt::JobState::failed);
  EXPECT_EQ(status.code, CALRT_WRONG_STATE) << status.message;
  EXPECT_NO_THROW(job.cancel());  // a final job: nothing to cancel
  // The client has heard the refusal: the next submit goes to the daemon, as in process.
  try {
    calrt::Job next = held.submit();
    FAIL() << "a submit on a FAULTED device was accepted";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_WRONG_STATE) << e.what();
    EXPECT_EQ(std::string(e.what()).find("held"), std::string::npos) << e.what();
  }
}

// While a held submit and its wait are on the wire, the client does not know the job's daemon
// id yet. Another thread's Job_Cancel and Job_Status of that job must still reach it: as job
// 0, the daemon's name for the batch's job, sent after the batch. The daemon is stopped
// meanwhile, so that the batch's answer cannot have come first. Whether the cancel finds the
// job still running or the wait has completed it is the daemon's race; either way the job
// ends in that state and every call succeeds.
TEST_F(HeldCallsTest, CancelAndStatusReachAHeldJobBeforeItsWaitIsAnswered) {
  start();
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN);
  ASSERT_EQ(step(s, 5).state, calrt::JobState::completed);
  calrt::Job job = s.submit();  // held: the same submit as the step's
  daemon_->stop();
  auto waiter = std::async(std::launch::async, [&] { return job.wait(20s); });
  std::this_thread::sleep_for(200ms);  // the batch with the wait is on the wire
  auto canceller = std::async(std::launch::async, [&] { job.cancel(); });
  auto asker = std::async(std::launch::async, [&] { return job.status().state; });
  std::this_thread::sleep_for(200ms);
  daemon_->resume();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready) << "Job_Wait hangs";
  ASSERT_EQ(canceller.wait_for(10s), std::future_status::ready) << "Job_Cancel hangs";
  ASSERT_EQ(asker.wait_for(10s), std::future_status::ready) << "Job_Status hangs";
  EXPECT_EQ(waiter.get(), calrt::WaitResult::ready);
  EXPECT_NO_THROW(canceller.get());
  const calrt::JobState asked = asker.get();
  EXPECT_TRUE(asked == calrt::JobState::submitted || asked == calrt::JobState::running ||
              asked == calrt::JobState::completed || asked == calrt::JobState::cancelled)
      << static_cast<int>(asked);
  const calrt::JobState final_state = job.status().state;
  EXPECT_TRUE(final_state == calrt::JobState::completed ||
              final_state == calrt::JobState::cancelled)
      << static_cast<int>(final_state);
}

// On a paced clock the device starts a job when the daemon gets its submit, so a held submit
// would start it late, at its wait: the client holds none there. A submit after another
// session faulted the device is refused at the submit, as in process.
TEST_F(HeldCallsTest, OnAPacedClockSubmitsAreNotHeld) {
  start();
  calrt_test::PrefillSession paced(api_, CALRT_TEST_CALBIN, "clock=paced");
  ASSERT_EQ(step(paced, 5).state, calrt::JobState::completed);
  calrt_test::PrefillSession other(api_, CALRT_TEST_CALBIN, "clock=paced");
  fault_with_a_job(other);
  try {
    calrt::Job job = paced.submit();
    FAIL() << "a submit on a FAULTED device was accepted";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_WRONG_STATE) << e.what();
    EXPECT_EQ(std::string(e.what()).find("Job_Submit, held"), std::string::npos) << e.what();
  }
}

}  // namespace
