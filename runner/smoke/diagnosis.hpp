// What the smoke remembers about each submission so that a numeric failure can point at
// its cause: the CSR values the runner set, the positions it fed, and the KV handle's
// capacity and fill level around the job (Kv_Info).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace runner {

struct Submission {
  std::string case_name;
  std::string phase;  // "prefill chunk 1/2", "decode step 3", "free-running decode step 0"
  uint64_t cur_seq_len = 0;
  uint64_t past_kv_cur_seq_len = 0;
  int32_t first_position = 0;
  int32_t last_position = 0;
  uint32_t sequence_tokens = 0;  // tokens the runner has fed into this sequence so far
  uint32_t kv_capacity = 0;
  uint32_t kv_fill_before = 0;
  uint32_t kv_fill_after = 0;
  bool kv_info_after = false;  // kv_fill_after is known (the job completed)
};

// Sentences about inconsistencies between the CSRs, the positions, the KV fill level and
// the sequence, e.g. "past_kv_cur_seq_len 18 != KV fill level 17 before the job". Empty
// when everything agrees.
std::vector<std::string> consistency_hints(const Submission& submission);

// The diagnosis block of a failing submission: what failed, the CSR values, positions,
// KV capacity and fill level, then the hints (or a sentence saying there are none).
std::vector<std::string> diagnose(const Submission& submission, const std::string& what_failed);

nlohmann::json to_json(const Submission& submission);

}  // namespace runner
