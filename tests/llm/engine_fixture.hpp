// What the adapter's tests share: engines on the in-process simulator over the calbins the
// test fixtures generate, and the loops that drive them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "llm/engine.hpp"
#include "simdev/runtime/sim_api.h"

namespace calrt::llm::test {

inline constexpr std::chrono::seconds kRunTimeout{300};
inline const std::filesystem::path kTiny = CALRT_LLM_TINY_CALBIN;
inline const std::filesystem::path kTinyService = CALRT_LLM_TINY_SERVICE;

inline calrt::Api sim_api() { return calrt::Api(calrt_sim_get_api(CALRT_ABI_MAJOR)); }

inline EngineConfig config_for(const std::filesystem::path& calbin,
                               const std::filesystem::path& service = {}) {
  EngineConfig config;
  config.device.api = sim_api();
  config.device.config = "seed=1";
  config.calbin = calbin;
  config.service_manifest = service;
  return config;
}

inline std::unique_ptr<Engine> open_or_fail(EngineConfig config) {
  auto engine = Engine::open(std::move(config));
  if (!engine) {
    ADD_FAILURE() << "Engine::open: " << engine.error().to_string();
    return nullptr;
  }
  return std::move(*engine);
}

// Everything a run produced, by request.
struct RunLog {
  std::map<RequestId, std::vector<TokenEvent>> tokens;
  std::map<RequestId, Outcome> outcomes;

  void add(std::vector<Event>& events) {
    for (Event& event : events) {
      if (auto* token = std::get_if<TokenEvent>(&event)) {
        tokens[token->id].push_back(std::move(*token));
      } else {
        auto& outcome = std::get<Outcome>(event);
        EXPECT_FALSE(outcomes.contains(outcome.id)) << "two outcomes for request " << outcome.id;
        outcomes[outcome.id] = std::move(outcome);
      }
    }
    events.clear();
  }
};

inline RunLog run_all(Engine& engine) {
  RunLog log;
  std::vector<Event> events;
  const auto deadline = std::chrono::steady_clock::now() + kRunTimeout;
  while (!engine.idle() && std::chrono::steady_clock::now() < deadline) {
    engine.poll(std::chrono::seconds(10), events);
    log.add(events);
  }
  EXPECT_TRUE(engine.idle()) << "the engine did not become idle";
  return log;
}

inline Request greedy_request(std::vector<int32_t> prompt, uint32_t max_new,
                              bool want_logits = false) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new;
  r.want_logits = want_logits;
  return r;
}

// A prompt of `length` tokens drawn from `seed`, below `vocab`.
inline std::vector<int32_t> prompt_of(uint32_t length, uint32_t seed, uint32_t vocab) {
  std::vector<int32_t> tokens(length);
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (int32_t& token : tokens) {
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    token = static_cast<int32_t>(x % vocab);
  }
  return tokens;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void expect_ledger_zero(const Engine& engine, const Outcome& outcome) {
  EXPECT_TRUE(outcome.ledger.zero())
      << "request " << outcome.id << ": " << outcome.ledger.to_string();
  const EngineStats stats = engine.stats();
  if (engine.idle()) {
    EXPECT_TRUE(stats.ledger.zero()) << "engine: " << stats.ledger.to_string();
    // The runtime's own count, apart from the adapter's bookkeeping.
    EXPECT_EQ(stats.device_kv_handles, 0) << "KV handles the device still holds";
  }
}

}  // namespace calrt::llm::test
