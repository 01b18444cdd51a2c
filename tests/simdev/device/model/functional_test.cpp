// The device's numbers: golden agreement, determinism, prefix consistency, and CSRs and
// inputs honoured exactly (errors, never silent correction).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "calbin/golden.hpp"
#include "tests/simdev/device/sim_session.hpp"

namespace simdev::test {
namespace {

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    dot += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
  }
  return dot / (std::sqrt(na) * std::sqrt(nb) + 1e-30);
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<int32_t> iota_positions(size_t count, int32_t first = 0) {
  std::vector<int32_t> positions(count);
  for (size_t i = 0; i < count; ++i) {
    positions[i] = first + static_cast<int32_t>(i);
  }
  return positions;
}

std::vector<int32_t> prompt_of(size_t length, uint32_t vocab, uint32_t salt = 7) {
  std::vector<int32_t> tokens(length);
  for (size_t i = 0; i < length; ++i) {
    tokens[i] = static_cast<int32_t>((i * 2654435761u + salt) % vocab);
  }
  return tokens;
}

void clear_kv(CalrtKv* kv) {
  auto args = make_args<Calrt_Kv_Clear_Args>(CALRT_KV_CLEAR_ARGS_STRUCT_SIZE);
  args.kv = kv;
  SIM_OK(api().Kv_Clear(&args));
}

TEST(Functional, PrefillAndDecodeMatchGolden) {
  auto golden = calbin::read_golden(tiny_calbin() / "golden");
  ASSERT_TRUE(golden) << golden.error().to_string();
  Session s;
  size_t checked = 0;
  double min_cosine = 1.0;
  size_t agree_total = 0;
  size_t steps_total = 0;
  for (const calbin::GoldenCase& c : golden->cases) {
    if (c.long_case && std::getenv("SIMDEV_LONG_TESTS") == nullptr) {
      continue;
    }
    clear_kv(s.kv);
    const StepResult prefill = s.prefill(c.tokens);
    ASSERT_EQ(prefill.state, CALRT_JOB_COMPLETED) << c.name << ": " << prefill.message;
    const double prefill_cosine = cosine(prefill.logits, c.prefill_logits);
    min_cosine = std::min(min_cosine, prefill_cosine);
    EXPECT_GT(prefill_cosine, 0.99) << c.name;
    size_t agree = 0;
    for (uint32_t step = 0; step < c.decode_steps; ++step) {
      const int32_t pos = static_cast<int32_t>(c.prompt_len + step);
      const StepResult d = s.step(false, {c.greedy[step]}, {pos}, c.prompt_len + step);
      ASSERT_EQ(d.state, CALRT_JOB_COMPLETED) << c.name << ": " << d.message;
      agree += argmax(d.logits) == c.greedy[step + 1] ? 1 : 0;
      if (!c.decode_logits.empty()) {
        const auto row = c.decode_logits.begin() + static_cast<std::ptrdiff_t>(step * s.vocab);
        EXPECT_GT(cosine(d.logits, std::vector<float>(row, row + s.vocab)), 0.99)
            << c.name << " step " << step;
      }
    }
    agree_total += agree;
    steps_total += c.decode_steps;
    if (c.decode_steps > 0) {
      EXPECT_GE(double(agree) / c.decode_steps, 0.8) << c.name;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0u);
  std::printf("golden: %zu cases, min prefill cosine %.5f, greedy agreement %zu/%zu\n", checked,
              min_cosine, agree_total, steps_total);
}

TEST(Functional, DeterministicLogitsAndDeviceTimes) {
  std::vector<StepResult> runs;
  for (int run = 0; run < 2; ++run) {
    Session s("seed=42");
    const auto prompt = prompt_of(300, s.vocab);
    runs.push_back(s.prefill(prompt));
    runs.push_back(s.step(false, {5}, {300}, 300));
  }
  EXPECT_EQ(runs[0].logits_raw, runs[2].logits_raw);
  EXPECT_EQ(runs[1].logits_raw, runs[3].logits_raw);
  EXPECT_EQ(runs[0].end_ns, runs[2].end_ns);
  EXPECT_EQ(runs[1].start_ns, runs[3].start_ns);
  EXPECT_EQ(runs[1].end_ns, runs[3].end_ns);
}

TEST(Functional, ChunkedPrefillEqualsDecodePath) {
  Session s;
  const auto prompt = prompt_of(257, s.vocab);
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 256);
  ASSERT_EQ(s.step(true, head, iota_positions(256), 0).state, CALRT_JOB_COMPLETED);
  const StepResult via_prefill = s.step(true, {prompt[256]}, {256}, 256);
  clear_kv(s.kv);
  ASSERT_EQ(s.step(true, head, iota_positions(256), 0).state, CALRT_JOB_COMPLETED);
  const StepResult via_decode = s.step(false, {prompt[256]}, {256}, 256);
  ASSERT_EQ(via_prefill.state, CALRT_JOB_COMPLETED);
  ASSERT_EQ(via_decode.state, CALRT_JOB_COMPLETED);
  EXPECT_EQ(via_prefill.logits, via_decode.logits);
}

TEST(Functional, CurSeqLenOutOfRangeFailsTheJob) {
  Session s;
  const StepResult too_many = s.step(true, prompt_of(4, s.vocab), iota_positions(4), 0, 300);
  EXPECT_EQ(too_many.state, CALRT_JOB_FAILED);
  EXPECT_EQ(too_many.code, CALRT_OUT_OF_RANGE);
  EXPECT_NE(too_many.message.find("cur_seq_len"), std::string::npos) << too_many.message;
  EXPECT_NE(too_many.message.find("300"), std::string::npos) << too_many.message;
  const StepResult decode_two = s.step(false, {1, 2}, {0, 1}, 0);
  EXPECT_EQ(decode_two.state, CALRT_JOB_FAILED);
  EXPECT_EQ(decode_two.code, CALRT_OUT_OF_RANGE);
}

TEST(Functional, PastBeyondKvCapacityFailsTheJob) {
  Session s("", 64);
  const StepResult r = s.step(true, prompt_of(10, s.vocab), iota_positions(10, 60), 60);
  EXPECT_EQ(r.state, CALRT_JOB_FAILED);
  EXPECT_EQ(r.code, CALRT_OUT_OF_RANGE);
  EXPECT_NE(r.message.find("past_kv_cur_seq_len"), std::string::npos) << r.message;
}

TEST(Functional, TokenBeyondVocabFailsTheJob) {
  Session s;
  const StepResult r = s.step(true, {1, 2, int32_t(s.vocab)}, iota_positions(3), 0);
  EXPECT_EQ(r.state, CALRT_JOB_FAILED);
  EXPECT_EQ(r.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("[2] = 1000"), std::string::npos) << r.message;
}

TEST(Functional, WrongPositionIsNotCorrected) {
  Session s;
  const auto prompt = prompt_of(20, s.vocab);
  const StepResult right = s.prefill(prompt);
  clear_kv(s.kv);
  const StepResult shifted = s.step(true, prompt, iota_positions(20, 5), 0);
  ASSERT_EQ(shifted.state, CALRT_JOB_COMPLETED);
  EXPECT_NE(right.logits_raw, shifted.logits_raw);
}

TEST(Functional, KvFillLevelTracksHighestSlot) {
  Session s;
  ASSERT_EQ(s.prefill(prompt_of(17, s.vocab)).state, CALRT_JOB_COMPLETED);
  auto info = make_args<Calrt_Kv_Info_Args>(CALRT_KV_INFO_ARGS_STRUCT_SIZE);
  info.kv = s.kv;
  SIM_OK(api().Kv_Info(&info));
  EXPECT_EQ(info.filled_tokens, 17u);
  clear_kv(s.kv);
  SIM_OK(api().Kv_Info(&info));
  EXPECT_EQ(info.filled_tokens, 0u);
}

TEST(Functional, LongPrefillTiming) {
  Session s;
  const auto prompt = prompt_of(4600, s.vocab);
  const auto begin = std::chrono::steady_clock::now();
  const StepResult r = s.prefill(prompt);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_EQ(r.state, CALRT_JOB_COMPLETED) << r.message;
  std::printf("4600-token prefill (18 chunks of 256): %.2f s wall, device end %llu ns\n", seconds,
              static_cast<unsigned long long>(r.end_ns));
  EXPECT_LT(seconds, 60.0);
}

}  // namespace
}  // namespace simdev::test
