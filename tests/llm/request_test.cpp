// One request's life: refused at submit (typed request errors), context limits and the
// opt-in context shift, cancels in prefill and in decode, seeded sampling. Every request's
// ledger and the engine's are zero once it has ended.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/llm/engine_fixture.hpp"

namespace calrt::llm::test {
namespace {

class RequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig config = config_for(kTiny);
    config.slot_context = 64;  // short sequences reach n_ctx within a few steps
    engine_ = open_or_fail(std::move(config));
    ASSERT_TRUE(engine_);
    vocab_ = engine_->capabilities().vocab;
  }
  std::unique_ptr<Engine> engine_;
  uint32_t vocab_ = 0;
};

TEST_F(RequestTest, MalformedRequestsAreRefusedAtSubmit) {
  auto empty = engine_->submit(greedy_request({}, 4));
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::invalid_request);
  auto outside = engine_->submit(greedy_request({1, 2, static_cast<int32_t>(vocab_)}, 4));
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().code, ErrorCode::invalid_request);
  EXPECT_NE(outside.error().message.find("prompt[2] is token 1000"), std::string::npos)
      << outside.error().message;
  Request hot = greedy_request({1}, 4);
  hot.sampling.temperature = 0.0;
  EXPECT_EQ(engine_->submit(hot).error().code, ErrorCode::invalid_request);
  EXPECT_TRUE(engine_->idle());
}

TEST_F(RequestTest, APromptPastNctxIsContextExceeded) {
  auto refused = engine_->submit(greedy_request(prompt_of(65, 1, vocab_), 1));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::request);
  EXPECT_EQ(refused.error().code, ErrorCode::context_exceeded);
  EXPECT_NE(refused.error().message.find("n_ctx 64"), std::string::npos);
  // The prompt fits, prompt + generation does not: refused too, never cut short.
  auto long_run = engine_->submit(greedy_request(prompt_of(40, 1, vocab_), 26));
  ASSERT_FALSE(long_run);
  EXPECT_EQ(long_run.error().code, ErrorCode::context_exceeded);
  // The largest that fits: 40 + 25 - 1 = 64 KV positions.
  auto fits = engine_->submit(greedy_request(prompt_of(40, 1, vocab_), 25));
  ASSERT_TRUE(fits) << fits.error().to_string();
  RunLog log = run_all(*engine_);
  ASSERT_TRUE(log.outcomes.at(*fits).ok()) << log.outcomes.at(*fits).error->to_string();
  EXPECT_EQ(log.outcomes.at(*fits).tokens.size(), 25u);
  expect_ledger_zero(*engine_, log.outcomes.at(*fits));
}

TEST_F(RequestTest, QueueFullIsRetryable) {
  EngineConfig config = config_for(kTiny);
  config.queue_capacity = 2;
  auto small = open_or_fail(std::move(config));
  ASSERT_TRUE(small);
  ASSERT_TRUE(small->submit(greedy_request({1, 2}, 2)));
  ASSERT_TRUE(small->submit(greedy_request({3, 4}, 2)));
  auto third = small->submit(greedy_request({5, 6}, 2));
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, ErrorCode::queue_full);
  EXPECT_TRUE(third.error().retryable());
  RunLog log = run_all(*small);
  EXPECT_EQ(log.outcomes.size(), 2u);
}

// The shift keeps the first n_keep tokens, drops the oldest half of the rest and prefills
// again. The tokens after it must be those of a request whose prompt is the shifted history,
// run alone: computed here from the rule, not from the engine.
TEST_F(RequestTest, ContextShiftContinuesAsTheShiftedPromptAlone) {
  const uint32_t n_ctx = engine_->capabilities().n_ctx;  // 64
  const std::vector<int32_t> prompt = prompt_of(40, 2, vocab_);
  Request shifted = greedy_request(prompt, 40);
  shifted.context_shift = ContextShift{8};
  auto refused = engine_->submit(greedy_request(prompt, 40));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::context_exceeded);

  const Outcome run = run_alone(*engine_, shifted, kRunTimeout);
  ASSERT_TRUE(run.ok()) << run.error->to_string();
  ASSERT_EQ(run.tokens.size(), 40u);
  EXPECT_GE(run.context_shifts, 1u);
  expect_ledger_zero(*engine_, run);
  // The first shift comes when the history holds n_ctx + 1 tokens.
  std::vector<int32_t> history = prompt;
  const size_t before = n_ctx + 1 - prompt.size();
  history.insert(history.end(), run.tokens.begin(), run.tokens.begin() + before);
  const size_t discard = (history.size() - 8) / 2;
  history.erase(history.begin() + 8, history.begin() + 8 + static_cast<ptrdiff_t>(discard));
  const uint32_t after = 10;
  const Outcome alone = run_alone(*engine_, greedy_request(history, after), kRunTimeout);
  ASSERT_TRUE(alone.ok()) << alone.error->to_string();
  const std::vector<int32_t> continued(run.tokens.begin() + before,
                                       run.tokens.begin() + before + after);
  EXPECT_EQ(continued, alone.tokens);
}

TEST_F(RequestTest, CancelInPrefillStopsAtAJobBoundaryAndFreesEverything) {
  EngineConfig config = config_for(kTiny);
  auto engine = open_or_fail(std::move(config));
  ASSERT_TRUE(engine);
  const uint32_t chunk = engine->capabilities().prefill_chunk;
  auto id = engine->submit(greedy_request(prompt_of(3 * chunk, 3, vocab_), 4));
  ASSERT_TRUE(id);
  std::vector<Event> events;
  engine->poll(std::chrono::nanoseconds(1), events);  // the first chunk goes out
  EXPECT_TRUE(events.empty());
  EXPECT_GT(engine->stats().ledger.jobs_in_flight, 0);
  EXPECT_GT(engine->stats().ledger.kv_handles, 0);
  EXPECT_TRUE(engine->cancel(*id));
  RunLog log = run_all(*engine);
  const Outcome& outcome = log.outcomes.at(*id);
  ASSERT_TRUE(outcome.error);
  EXPECT_EQ(outcome.error->code, ErrorCode::cancelled);
  EXPECT_TRUE(outcome.tokens.empty());
  EXPECT_LT(outcome.timing.prefill_jobs, 3u);
  expect_ledger_zero(*engine, outcome);
  EXPECT_FALSE(engine->cancel(*id)) << "an ended request is not live";
}

TEST_F(RequestTest, CancelInDecodeStopsAtTheNextStep) {
  auto id = engine_->submit(greedy_request(prompt_of(5, 4, vocab_), 30));
  ASSERT_TRUE(id);
  RunLog log;
  std::vector<Event> events;
  while (log.tokens[*id].size() < 3) {
    engine_->poll(std::chrono::seconds(10), events);
    log.add(events);
    ASSERT_TRUE(log.outcomes.empty());
  }
  EXPECT_TRUE(engine_->cancel(*id));
  RunLog rest = run_all(*engine_);
  const Outcome& outcome = rest.outcomes.at(*id);
  ASSERT_TRUE(outcome.error);
  EXPECT_EQ(outcome.error->code, ErrorCode::cancelled);
  EXPECT_GE(outcome.tokens.size(), 3u);
  EXPECT_LE(outcome.tokens.size(), 4u);  // the step in flight at most
  expect_ledger_zero(*engine_, outcome);
}

TEST_F(RequestTest, CancelWhileQueuedAnswersAtTheNextPoll) {
  auto id = engine_->submit(greedy_request({7, 8}, 3));
  ASSERT_TRUE(id);
  EXPECT_TRUE(engine_->cancel(*id));
  RunLog log = run_all(*engine_);
  EXPECT_EQ(log.outcomes.at(*id).error->code, ErrorCode::cancelled);
  EXPECT_EQ(log.outcomes.at(*id).timing.prefill_jobs, 0u);
}

TEST_F(RequestTest, SamplingIsDeterministicPerSeed) {
  Request r = greedy_request(prompt_of(9, 5, vocab_), 12);
  r.sampling.method = SamplingMethod::top_k;
  r.sampling.top_k = 50;
  r.sampling.top_p = 0.95;
  r.sampling.temperature = 1.5;
  r.sampling.seed = 11;
  const Outcome first = run_alone(*engine_, r, kRunTimeout);
  const Outcome again = run_alone(*engine_, r, kRunTimeout);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first.tokens, again.tokens);
  r.sampling.seed = 12;
  const Outcome other = run_alone(*engine_, r, kRunTimeout);
  EXPECT_NE(first.tokens, other.tokens) << "another seed drew the same 12 tokens";
  // top-k of 1 is greedy whatever the seed.
  r.sampling.top_k = 1;
  const Outcome one = run_alone(*engine_, r, kRunTimeout);
  const Outcome greedy = run_alone(*engine_, greedy_request(r.prompt, 12), kRunTimeout);
  EXPECT_EQ(one.tokens, greedy.tokens);
}

TEST(Timing, EveryPhaseIsTimedByItsOwnClock) {
  auto engine = open_or_fail(config_for(kTiny));
  ASSERT_TRUE(engine);
  // chunk + 1 tokens: two prefill chunks, the second of one token, never a decode step
  Request r = greedy_request(prompt_of(257, 6, 1000), 6, true);
  const Outcome o = run_alone(*engine, r, kRunTimeout);
  ASSERT_TRUE(o.ok()) << o.error->to_string();
  const RequestTiming& t = o.timing;
  EXPECT_EQ(t.prefill_jobs, 2u);
  EXPECT_EQ(t.decode_jobs, 5u);
  // Device clock: every job moved inputs, computed and moved the row back.
  EXPECT_GT(t.h2d.count(), 0);
  EXPECT_GT(t.infer.count(), 0);
  EXPECT_GT(t.d2h.count(), 0);
  // Host clock: with want_logits every row is converted; sampling ranks it.
  EXPECT_GT(t.convert.count(), 0);
  EXPECT_GT(t.sample.count(), 0);
  EXPECT_GT(t.ttft.count(), 0);
  EXPECT_GT(t.tpot.count(), 0);
  EXPECT_GE(t.total, t.ttft);
  EXPECT_LE(t.queue, t.ttft);
  // Greedy without logits converts nothing: it ranks the BF16 row.
  const Outcome ranked = run_alone(*engine, greedy_request(r.prompt, 6), kRunTimeout);
  EXPECT_EQ(ranked.timing.convert.count(), 0);
  EXPECT_EQ(ranked.tokens, o.tokens);
}

TEST(Sampling, TopPKeepsTheNucleusOnly) {
  const std::vector<float> ranked = {4.0f, 1.0f, 0.5f, 0.0f};  // best first
  for (uint64_t stream = 0; stream < 200; ++stream) {
    // softmax: the first holds ~0.89 of the mass; top_p 0.8 keeps it alone.
    EXPECT_EQ(draw_candidate(ranked, 1.0, stream, 0.8), 0u);
  }
  bool other = false;
  for (uint64_t stream = 0; stream < 200 && !other; ++stream) {
    other = draw_candidate(ranked, 1.0, stream, 1.0) != 0;
  }
  EXPECT_TRUE(other) << "without top-p the tail is never drawn";
}

}  // namespace
}  // namespace calrt::llm::test

namespace calrt::llm::test {
namespace {

// submit() and cancel() from other threads while one thread polls: every request accepted
// gets exactly one outcome (RunLog fails on a second one), the cancelled ones as cancelled or
// completed if they ended first, and nothing is left held.
TEST(Threads, SubmitAndCancelFromOtherThreadsWhileOnePolls) {
  auto engine = open_or_fail(config_for(kTiny));
  ASSERT_TRUE(engine);
  constexpr int kRequests = 24;
  std::vector<RequestId> ids(kRequests);
  std::atomic<int> submitted{0};
  std::thread submitter([&] {
    for (int i = 0; i < kRequests; ++i) {
      auto id = engine->submit(greedy_request(prompt_of(1 + i % 20, i, 1000), 6));
      ids[static_cast<size_t>(i)] = id ? *id : 0;
      submitted.fetch_add(1);
    }
  });
  std::thread canceller([&] {
    for (int i = 0; i < kRequests; i += 3) {
      while (submitted.load() <= i) std::this_thread::yield();
      engine->cancel(ids[static_cast<size_t>(i)]);
    }
  });
  RunLog log;
  std::vector<Event> events;
  const auto deadline = std::chrono::steady_clock::now() + kRunTimeout;
  while (log.outcomes.size() < kRequests && std::chrono::steady_clock::now() < deadline) {
    engine->poll(std::chrono::milliseconds(50), events);
    log.add(events);
  }
  submitter.join();
  canceller.join();
  ASSERT_EQ(log.outcomes.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, outcome] : log.outcomes) {
    if (outcome.error) EXPECT_EQ(outcome.error->code, ErrorCode::cancelled) << id;
    expect_ledger_zero(*engine, outcome);
  }
  EXPECT_TRUE(engine->idle());
}

}  // namespace
}  // namespace calrt::llm::test
