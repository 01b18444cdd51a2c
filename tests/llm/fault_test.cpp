// Faults by class, provoked by the simulator's fault injection (simdev/device/FAULTS.md): a
// device fault mid-run answers every admitted request with a retryable device error, the
// engine resets (or reopens) the device and later requests are correct; a request fault
// (KV exhaustion) ends only its request.
#include <gtest/gtest.h>

#include "abi/calrt_ext.hpp"
#include "tests/llm/engine_fixture.hpp"

namespace calrt::llm::test {
namespace {

struct DeviceFaultCase {
  const char* name;
  const char* plan;
  const char* calbin = CALRT_LLM_TINY_CALBIN;
};

class DeviceFault : public ::testing::TestWithParam<DeviceFaultCase> {};

TEST_P(DeviceFault, AnswersEveryRequestRecoversAndLaterRequestsAreCorrect) {
  auto engine = open_or_fail(config_for(GetParam().calbin));
  ASSERT_TRUE(engine);
  const uint32_t vocab = engine->capabilities().vocab;
  std::vector<Request> requests;
  for (uint32_t i = 0; i < 3; ++i)
    requests.push_back(greedy_request(prompt_of(20 + i, i, vocab), 8));
  std::vector<Outcome> reference;
  for (const Request& r : requests) reference.push_back(run_alone(*engine, r, kRunTimeout));

  const calrt::DeviceFaults faults = calrt::DeviceFaults::of(engine->device());
  ASSERT_TRUE(faults) << "the simulator offers fault injection";
  faults.set_plan(GetParam().plan);
  std::vector<RequestId> ids;
  for (const Request& r : requests) ids.push_back(*engine->submit(r));
  RunLog log = run_all(*engine);
  ASSERT_EQ(log.outcomes.size(), ids.size()) << "every request gets an answer";
  size_t faulted = 0;
  for (const RequestId id : ids) {
    const Outcome& outcome = log.outcomes.at(id);
    expect_ledger_zero(*engine, outcome);
    if (outcome.ok()) continue;
    ++faulted;
    EXPECT_EQ(outcome.error->kind, ErrorKind::device) << outcome.error->to_string();
    EXPECT_EQ(outcome.error->code, ErrorCode::device_fault);
    EXPECT_TRUE(outcome.error->retryable());
  }
  EXPECT_EQ(faulted, ids.size()) << "the fault hit while every request was admitted";
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.device_faults, 1u);
  EXPECT_EQ(stats.recoveries, 1u);
  EXPECT_TRUE(stats.model_available);
  EXPECT_TRUE(stats.ledger.zero()) << stats.ledger.to_string();
  // Back in service: the same requests again, now all together, as they were alone.
  if (const calrt::DeviceFaults again = calrt::DeviceFaults::of(engine->device())) {
    again.set_plan("");
  }
  ids.clear();
  for (const Request& r : requests) ids.push_back(*engine->submit(r));
  RunLog after = run_all(*engine);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Outcome& outcome = after.outcomes.at(ids[i]);
    ASSERT_TRUE(outcome.ok()) << outcome.error->to_string();
    EXPECT_EQ(outcome.tokens, reference[i].tokens) << "request " << i << " after recovery";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, DeviceFault,
    ::testing::Values(
        DeviceFaultCase{"dma_h2d_decode",
                        "faults:\n  - kind: dma_h2d\n    during: decode\n    at_op: 5\n"},
        DeviceFaultCase{"firmware_crash_decode",
                        "faults:\n  - kind: firmware_crash\n    during: decode\n    at_op: 4\n"},
        DeviceFaultCase{"job_hang_decode",
                        "faults:\n  - kind: job_hang\n    during: decode\n    at_op: 3\n"},
        DeviceFaultCase{"batch4_dma_d2h_decode",
                        "faults:\n  - kind: dma_d2h\n    during: decode\n    at_op: 3\n",
                        CALRT_LLM_BATCH4_CALBIN},
        DeviceFaultCase{"device_lost_decode",
                        "faults:\n  - kind: device_lost\n    during: decode\n    at_op: 4\n"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RequestFault, KvExhaustionEndsThatRequestAlone) {
  auto engine = open_or_fail(config_for(kTiny));
  ASSERT_TRUE(engine);
  const calrt::DeviceFaults faults = calrt::DeviceFaults::of(engine->device());
  ASSERT_TRUE(faults);
  // The second Kv_Allocate fails as if the reservation were full, with nothing else holding
  // KV... so the second request, admitted after the first ended, gets kv_exhausted alone.
  faults.set_plan("faults:\n  - kind: kv_exhaustion\n    during: kv\n    at_op: 2\n");
  auto first = engine->submit(greedy_request({1, 2, 3}, 3));
  RunLog one = run_all(*engine);
  auto second = engine->submit(greedy_request({4, 5, 6}, 3));
  auto third = engine->submit(greedy_request({1, 2, 3}, 3));
  RunLog two = run_all(*engine);
  ASSERT_TRUE(one.outcomes.at(*first).ok());
  const Outcome& failed = two.outcomes.at(*second);
  ASSERT_TRUE(failed.error);
  EXPECT_EQ(failed.error->kind, ErrorKind::request);
  EXPECT_EQ(failed.error->code, ErrorCode::kv_exhausted);
  expect_ledger_zero(*engine, failed);
  ASSERT_TRUE(two.outcomes.at(*third).ok());
  EXPECT_EQ(two.outcomes.at(*third).tokens, one.outcomes.at(*first).tokens);
  EXPECT_EQ(engine->stats().device_faults, 0u);
}

}  // namespace
}  // namespace calrt::llm::test
