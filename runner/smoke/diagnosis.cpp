#include "runner/smoke/diagnosis.hpp"

#include <spdlog/fmt/fmt.h>

namespace runner {

std::vector<std::string> consistency_hints(const Submission& s) {
  std::vector<std::string> hints;
  const auto first_position = static_cast<int64_t>(s.first_position);
  if (s.past_kv_cur_seq_len != s.kv_fill_before) {
    // When the positions agree with the KV, the CSR is the value that is off.
    const bool positions_follow_kv = first_position == static_cast<int64_t>(s.kv_fill_before);
    hints.push_back(fmt::format("past_kv_cur_seq_len {} != KV fill level {} before the job{}",
                                s.past_kv_cur_seq_len, s.kv_fill_before,
                                positions_follow_kv ? "; the positions start at the fill level, so "
                                                      "past_kv_cur_seq_len is the value that is off"
                                                    : ""));
  } else if (first_position != static_cast<int64_t>(s.past_kv_cur_seq_len)) {
    hints.push_back(
        fmt::format("position {} != past_kv_cur_seq_len {} (a submission's first token sits at the "
                    "sequence's next position, the KV fill level)",
                    s.first_position, s.past_kv_cur_seq_len));
  }
  if (s.kv_fill_before == 0 && s.sequence_tokens > 0) {
    hints.push_back(fmt::format(
        "the KV applied to the input buffer is empty (fill level 0) although {} tokens of "
        "this sequence were already fed: a stale or wrong KV handle",
        s.sequence_tokens));
  } else if (s.kv_fill_before != s.sequence_tokens) {
    hints.push_back(fmt::format("KV fill level {} before the job != {} tokens fed so far",
                                s.kv_fill_before, s.sequence_tokens));
  }
  if (s.kv_info_after && s.kv_fill_after != s.past_kv_cur_seq_len + s.cur_seq_len) {
    hints.push_back(
        fmt::format("KV fill level {} after the job != past_kv_cur_seq_len + cur_seq_len = {}",
                    s.kv_fill_after, s.past_kv_cur_seq_len + s.cur_seq_len));
  }
  return hints;
}

std::vector<std::string> diagnose(const Submission& s, const std::string& what_failed) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("case {}, {}: {}", s.case_name, s.phase, what_failed));
  lines.push_back(fmt::format("  CSRs set: cur_seq_len={} past_kv_cur_seq_len={}; positions {}..{}",
                              s.cur_seq_len, s.past_kv_cur_seq_len, s.first_position,
                              s.last_position));
  lines.push_back(fmt::format(
      "  KV handle: capacity {}, fill level {} before the job{}", s.kv_capacity, s.kv_fill_before,
      s.kv_info_after ? fmt::format(", {} after", s.kv_fill_after) : std::string()));
  const auto hints = consistency_hints(s);
  for (const std::string& hint : hints) {
    lines.push_back("  hint: " + hint);
  }
  if (hints.empty()) {
    lines.push_back(
        "  hint: CSRs, positions and KV fill level are consistent; suspect the device or the "
        "calbin (weights, output layout) rather than the runner's bookkeeping");
  }
  return lines;
}

nlohmann::json to_json(const Submission& s) {
  return {{"case", s.case_name},
          {"phase", s.phase},
          {"cur_seq_len", s.cur_seq_len},
          {"past_kv_cur_seq_len", s.past_kv_cur_seq_len},
          {"first_position", s.first_position},
          {"last_position", s.last_position},
          {"sequence_tokens", s.sequence_tokens},
          {"kv_capacity", s.kv_capacity},
          {"kv_fill_before", s.kv_fill_before},
          {"kv_fill_after", s.kv_fill_after}};
}

}  // namespace runner
