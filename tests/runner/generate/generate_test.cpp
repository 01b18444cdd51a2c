// `calrt generate` end to end: the JSONL stream (a start line, one line per token, the
// outcome), tokens that follow the calbin's golden contract rows, the same tokens on the
// runtime's shared library, and the exits of bad input (2, naming the option and value) and of
// a refused request (1).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "calbin/golden.hpp"
#include "llm/host/ranking.hpp"
#include "tests/runner/calrt_process.hpp"

namespace {

const std::filesystem::path kTiny = CALRT_LLM_TINY_CALBIN;

std::vector<nlohmann::json> json_lines(const std::string& output) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.front() == '{') lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

std::string joined(const std::vector<int32_t>& tokens) {
  std::string text;
  for (const int32_t t : tokens) text += (text.empty() ? "" : ",") + std::to_string(t);
  return text;
}

// The golden case "len17" (a prompt of 17 tokens) and its first tokens by the contract rows.
struct Expected {
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;
};

Expected from_golden(uint32_t steps) {
  auto golden = calbin::read_golden(kTiny / "golden");
  EXPECT_TRUE(golden) << golden.error().to_string();
  Expected out;
  if (!golden) return out;
  for (const calbin::GoldenCase& g : golden->cases) {
    if (g.long_case || g.contract_rows.empty() || g.decode_steps + 1 < steps) continue;
    out.prompt = g.tokens;
    for (uint32_t s = 0; s < steps; ++s) {
      const auto index = static_cast<int32_t>(g.prompt_len - 1 + s);
      const auto row = std::find(g.contract_rows.begin(), g.contract_rows.end(), index);
      if (row == g.contract_rows.end()) break;
      const std::span<const float> logits(
          g.contract_logits.data() + (row - g.contract_rows.begin()) * golden->vocab,
          golden->vocab);
      out.tokens.push_back(calrt::llm::argmax(logits));
      if (out.tokens.back() != g.greedy[s]) break;  // past here the teacher's history differs
    }
    return out;
  }
  ADD_FAILURE() << "no golden case with contract rows";
  return out;
}

void expect_stream(const std::string& args, const Expected& expected, uint32_t max_new) {
  const CalrtRun run = run_calrt(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<nlohmann::json> lines = json_lines(run.output);
  ASSERT_EQ(lines.size(), max_new + 2) << run.output;
  EXPECT_EQ(lines.front()["event"], "start");
  EXPECT_EQ(lines.front()["vocab"], 1000);
  std::vector<int32_t> tokens;
  for (uint32_t i = 1; i <= max_new; ++i) {
    EXPECT_EQ(lines[i]["event"], "token");
    EXPECT_EQ(lines[i]["step"], i - 1);
    EXPECT_GE(lines[i]["ms"].get<double>(), 0.0);
    tokens.push_back(lines[i]["token"].get<int32_t>());
  }
  const nlohmann::json& done = lines.back();
  EXPECT_EQ(done["event"], "done");
  EXPECT_EQ(done["tokens"].get<std::vector<int32_t>>(), tokens);
  EXPECT_EQ(done["ledger"]["kv_handles"], 0);
  EXPECT_EQ(done["ledger"]["buffers_mapped"], 0);
  EXPECT_GT(done["timing"]["infer_ms"].get<double>(), 0.0);
  EXPECT_GT(done["timing"]["ttft_ms"].get<double>(), 0.0);
  ASSERT_FALSE(expected.tokens.empty());
  const std::vector<int32_t> head(tokens.begin(),
                                  tokens.begin() + static_cast<ptrdiff_t>(std::min<size_t>(
                                                       expected.tokens.size(), tokens.size())));
  EXPECT_EQ(head, expected.tokens);
}

TEST(Generate, StreamsJsonlTokensThatFollowTheGoldenContract) {
  const Expected expected = from_golden(4);
  expect_stream("generate " + quoted(kTiny) + " --tokens " + joined(expected.prompt) +
                    " --max-new 4 --manifest " +
                    quoted(std::filesystem::path(CALRT_LLM_TINY_SERVICE)),
                expected, 4);
}

TEST(Generate, TheSharedLibraryRuntimeGivesTheSameTokens) {
  const Expected expected = from_golden(3);
  expect_stream("generate " + quoted(kTiny) + " --tokens " + joined(expected.prompt) +
                    " --max-new 3 --device " + quoted(std::filesystem::path(CALRT_SIM_SO)),
                expected, 3);
}

TEST(Generate, BadInputExitsTwoNamingTheOptionAndValue) {
  const struct {
    std::string args;
    std::string named;
  } cases[] = {
      {"--tokens 1,x,3 --max-new 2", "'x'"},
      {"--tokens 1,,3 --max-new 2", "--tokens '1,,3'"},
      {"--tokens 1,2 --max-new 0", "--max-new"},
      {"--tokens 1,2 --sampling beam", "--sampling"},
      {"--tokens 1,5000 --max-new 2", "prompt[1] is token 5000"},
      {"--tokens 1,2 --manifest /nonexistent/service.yaml", "/nonexistent/service.yaml"},
      {"--tokens 1,2 --device /nonexistent/libruntime.so", "/nonexistent/libruntime.so"},
  };
  for (const auto& c : cases) {
    const CalrtRun run = run_calrt("generate " + quoted(kTiny) + " " + c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find(c.named), std::string::npos) << c.args << "\n" << run.output;
  }
  const CalrtRun missing = run_calrt("generate /nonexistent/calbin --tokens 1");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("/nonexistent/calbin"), std::string::npos) << missing.output;
}

TEST(Generate, AContextPastNctxIsARequestFailure) {
  std::string prompt = "1";
  for (int i = 0; i < 4608; ++i) prompt += ",1";
  const CalrtRun run = run_calrt("generate " + quoted(kTiny) + " --tokens " + prompt);
  EXPECT_EQ(run.exit_code, 1) << run.output.substr(0, 2000);
  EXPECT_NE(run.output.find("context_exceeded"), std::string::npos) << run.output.substr(0, 2000);
}

}  // namespace
