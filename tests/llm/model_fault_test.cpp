// A model fault stops the calbin: the simulator's runtime table with Job_Submit answering
// NOT_CONFIGURED (a model-class code, calrt.h) from the Nth submission on. Every request,
// admitted or queued, gets a model error, and new work is refused.
#include <gtest/gtest.h>

#include <atomic>

#include "simdev/runtime/errors.hpp"
#include "tests/llm/engine_fixture.hpp"

namespace calrt::llm::test {
namespace {

std::atomic<int> submits_left{0};
const CalrtApi* sim_table = nullptr;

CalrtError* failing_submit(Calrt_Job_Submit_Args* args) {
  if (submits_left.fetch_sub(1) <= 0) {
    return simdev::runtime::make_error(CALRT_NOT_CONFIGURED,
                                       "test: the calbin was unconfigured behind the adapter");
  }
  return sim_table->Job_Submit(args);
}

calrt::Api api_failing_after(int submits) {
  static CalrtApi table;
  sim_table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  table = *sim_table;
  table.Job_Submit = &failing_submit;
  submits_left = submits;
  return calrt::Api(&table);
}

TEST(ModelFault, StopsTheCalbinAnswersEveryRequestAndRefusesNewWork) {
  EngineConfig config = config_for(kTiny);
  config.device.api = api_failing_after(5);
  config.max_sequences = 2;  // the third request waits in the queue
  auto engine = open_or_fail(std::move(config));
  ASSERT_TRUE(engine);
  std::vector<RequestId> ids;
  for (int32_t i = 0; i < 3; ++i) ids.push_back(*engine->submit(greedy_request({i + 1, 2, 3}, 10)));
  RunLog log = run_all(*engine);
  ASSERT_EQ(log.outcomes.size(), 3u) << "every request gets an answer";
  for (const RequestId id : ids) {
    const Outcome& outcome = log.outcomes.at(id);
    ASSERT_TRUE(outcome.error) << "request " << id << " completed";
    EXPECT_EQ(outcome.error->kind, ErrorKind::model) << outcome.error->to_string();
    EXPECT_EQ(outcome.error->code, ErrorCode::model_unavailable);
    EXPECT_FALSE(outcome.error->retryable());
    expect_ledger_zero(*engine, outcome);
  }
  EXPECT_EQ(log.outcomes.at(ids[0]).error->runtime_code, CALRT_NOT_CONFIGURED);
  auto refused = engine->submit(greedy_request({1, 2}, 2));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::model_unavailable);
  EXPECT_FALSE(engine->stats().model_available);
  EXPECT_EQ(engine->stats().device_faults, 0u);
}

}  // namespace
}  // namespace calrt::llm::test
