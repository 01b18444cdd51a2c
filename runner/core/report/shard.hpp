// --shard I/N: one machine's part of a long run (a campaign's plans, a scenario list, a bench
// sweep's points). Unit k of the whole run belongs to shard k mod N, so the N shards are
// disjoint, their union is the whole run, and no shard needs to know the others. Each
// --jsonl record carries its unit's `index` in the whole run and the summary line the
// shard, so that `calrt merge` can put the shards back together in the order one unsharded
// run would have written (runner/tools/merge.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace runner {

struct Shard {
  uint32_t index = 0;
  uint32_t count = 1;
  bool owns(uint64_t unit) const { return unit % count == index; }
};

inline constexpr uint32_t kMaxShards = 100000;

// "I/N" with 0 <= I < N <= kMaxShards; an error message naming the text otherwise.
std::optional<Shard> parse_shard(const std::string& text, std::string* why = nullptr);

// The option on `app`, filling `shard` when given.
CLI::Option* add_shard_option(CLI::App& app, std::optional<Shard>& shard, const char* units);

// {"index": I, "count": N}: the summary line's "shard".
nlohmann::json to_json(const Shard& shard);

}  // namespace runner
