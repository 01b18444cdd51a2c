#include "simdev/gen/reference/golden_cases.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <numeric>
#include <optional>
#include <thread>

#include "simdev/gen/rng.hpp"

namespace simdev::gen {
namespace {

void append_top(const std::vector<float>& logits, calbin::GoldenCase& out) {
  for (const int32_t id : top_ids(logits, kGoldenTopK)) {
    out.top_ids.push_back(id);
    out.top_logits.push_back(logits[static_cast<size_t>(id)]);
  }
}

}  // namespace

std::vector<CaseSpec> golden_case_specs(const ModelConfig& config, bool long_cases) {
  std::vector<CaseSpec> specs;
  for (const uint32_t len : {1u, 2u, 15u, 16u, 17u, 255u, 256u, 257u}) {
    const std::string name = "len" + std::to_string(len);
    specs.push_back({name, len, false, name});
  }
  if (!long_cases) {
    return specs;
  }
  // The long prompts share one stream: the reference then pays for the longest prefill once.
  const uint32_t near_limit = config.context - kGoldenDecodeSteps;
  for (const uint32_t len : {4095u, 4096u, 4097u, near_limit}) {
    if (len + kGoldenDecodeSteps <= config.context) {
      specs.push_back({"len" + std::to_string(len), len, true, "long"});
    }
  }
  return specs;
}

std::vector<int32_t> golden_prompt(const CaseSpec& spec, uint32_t vocab, uint64_t seed) {
  NormalStream stream(derive_seed(seed, "golden:" + spec.stream));
  std::vector<int32_t> tokens(spec.prompt_len);
  for (int32_t& token : tokens) {
    token = static_cast<int32_t>(stream.next_below(vocab));
  }
  return tokens;
}

std::vector<int32_t> top_ids(const std::vector<float>& logits, uint32_t k) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t count = std::min<size_t>(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float va = logits[size_t(a)], vb = logits[size_t(b)];
                      return va > vb || (va == vb && a < b);
                    });
  ids.resize(count);
  return ids;
}

namespace {

// Decode steps on a copy of the session that has just run the case's prompt.
calbin::Result<void> decode_steps(ref::Session session, calbin::GoldenCase& out) {
  for (uint32_t s = 0; s < kGoldenDecodeSteps; ++s) {
    const int32_t token = out.greedy.back();
    const auto position = static_cast<int32_t>(out.prompt_len + s);
    auto logits = session.forward(std::span(&token, 1), std::span(&position, 1));
    if (!logits) {
      return tl::unexpected(logits.error());
    }
    out.greedy.push_back(top_ids(*logits, 1).at(0));
    append_top(*logits, out);
    out.decode_logits.insert(out.decode_logits.end(), logits->begin(), logits->end());
  }
  return {};
}

}  // namespace

calbin::Result<std::vector<calbin::GoldenCase>> run_golden_chain(const ref::Model& model,
                                                                 std::vector<CaseSpec> chain,
                                                                 uint64_t seed) {
  std::sort(chain.begin(), chain.end(),
            [](const CaseSpec& a, const CaseSpec& b) { return a.prompt_len < b.prompt_len; });
  if (chain.empty()) {
    return std::vector<calbin::GoldenCase>{};
  }
  const std::vector<int32_t> tokens = golden_prompt(chain.back(), model.config().vocab, seed);
  std::vector<int32_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  ref::Session prefix(model);
  std::vector<calbin::GoldenCase> cases;
  for (const CaseSpec& spec : chain) {
    const size_t done = prefix.kv_length();
    const size_t count = spec.prompt_len - done;
    auto logits = prefix.forward(std::span(tokens).subspan(done, count),
                                 std::span(positions).subspan(done, count));
    if (!logits) {
      return tl::unexpected(logits.error());
    }
    calbin::GoldenCase out{spec.name,
                           spec.prompt_len,
                           kGoldenDecodeSteps,
                           spec.long_case,
                           std::vector<int32_t>(tokens.begin(), tokens.begin() + spec.prompt_len),
                           std::move(*logits),
                           {},
                           {},
                           {},
                           {}};
    out.greedy.push_back(top_ids(out.prefill_logits, 1).at(0));
    if (auto decoded = decode_steps(prefix, out); !decoded) {
      return tl::unexpected(decoded.error());
    }
    cases.push_back(std::move(out));
  }
  return cases;
}

calbin::Result<void> add_contract_rows(const contract::Model& model,
                                       std::vector<calbin::GoldenCase>& chain) {
  if (chain.empty()) {
    return {};
  }
  const size_t chunk = model.config().prefill_chunk;
  const std::vector<int32_t>& tokens = chain.back().tokens;
  contract::Session prefix(model);
  const ModelConfig& c = model.config();
  struct Row {
    std::vector<float> logits;
    std::vector<float> probes;
  };
  auto add_row = [&c](calbin::GoldenCase& out, size_t index, const Row& row) {
    out.contract_rows.push_back(static_cast<int32_t>(index));
    out.contract_logits.insert(out.contract_logits.end(), row.logits.begin(), row.logits.end());
    out.contract_probes.insert(out.contract_probes.end(), row.probes.begin(), row.probes.end());
    out.probe_points = 2 * c.layers + 1;
    out.probe_width = c.hidden;
  };
  std::map<int32_t, Row> ends;  // token index -> its row, where a chunk ends
  for (calbin::GoldenCase& out : chain) {
    // The prompt goes in pieces that end at every chunk boundary and at the prompt's end.
    while (prefix.kv_length() < out.prompt_len) {
      const size_t done = prefix.kv_length();
      const size_t end = std::min<size_t>((done / chunk + 1) * chunk, out.prompt_len);
      std::vector<int32_t> positions(end - done);
      std::iota(positions.begin(), positions.end(), static_cast<int32_t>(done));
      auto logits = prefix.forward(std::span(tokens).subspan(done, end - done), positions);
      if (!logits) {
        return tl::unexpected(logits.error());
      }
      ends[static_cast<int32_t>(end - 1)] = Row{std::move(*logits), prefix.probes()};
    }
    for (size_t index = chunk - 1; index + 1 < out.prompt_len; index += chunk) {
      add_row(out, index, ends.at(static_cast<int32_t>(index)));
    }
    add_row(out, out.prompt_len - 1, ends.at(static_cast<int32_t>(out.prompt_len - 1)));
    contract::Session decode = prefix;
    for (uint32_t s = 0; s < out.decode_steps; ++s) {
      const int32_t token = out.greedy[s];
      const auto position = static_cast<int32_t>(out.prompt_len + s);
      auto logits = decode.forward(std::span(&token, 1), std::span(&position, 1));
      if (!logits) {
        return tl::unexpected(logits.error());
      }
      add_row(out, out.prompt_len + s, Row{std::move(*logits), decode.probes()});
    }
  }
  return {};
}

calbin::Result<calbin::GoldenCase> run_golden_case(const ref::Model& model, const CaseSpec& spec,
                                                   uint64_t seed) {
  auto cases = run_golden_chain(model, {spec}, seed);
  if (!cases) {
    return tl::unexpected(cases.error());
  }
  return std::move(cases->front());
}

calbin::Result<calbin::GoldenSet> compute_golden(const ref::Model& model,
                                                 const contract::Model* contract,
                                                 const std::vector<CaseSpec>& specs, uint64_t seed,
                                                 unsigned threads) {
  std::vector<std::vector<CaseSpec>> chains;
  for (const CaseSpec& spec : specs) {
    auto same = std::find_if(chains.begin(), chains.end(),
                             [&](const auto& chain) { return chain[0].stream == spec.stream; });
    if (same == chains.end()) {
      chains.push_back({spec});
    } else {
      same->push_back(spec);
    }
  }
  std::vector<std::optional<calbin::Result<std::vector<calbin::GoldenCase>>>> results(
      chains.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < chains.size(); i = next++) {
      results[i] = run_golden_chain(model, chains[i], seed);
      if (contract != nullptr && *results[i]) {
        if (auto added = add_contract_rows(*contract, **results[i]); !added) {
          results[i] = tl::unexpected(added.error());
        }
      }
    }
  };
  std::vector<std::jthread> pool;
  const size_t thread_count = std::clamp<size_t>(threads, 1, std::max<size_t>(chains.size(), 1));
  for (size_t t = 1; t < thread_count; ++t) {
    pool.emplace_back(worker);
  }
  worker();
  pool.clear();  // joins
  calbin::GoldenSet set{model.config().vocab,
                        kGoldenTopK,
                        kGoldenReference,
                        contract != nullptr ? kContractReference : "",
                        {}};
  for (auto& result : results) {
    if (!*result) {
      return tl::unexpected(result->error());
    }
    for (calbin::GoldenCase& one : **result) {
      set.cases.push_back(std::move(one));
    }
  }
  // Back into the order of `specs`, whatever the chains did.
  std::vector<calbin::GoldenCase> ordered;
  for (const CaseSpec& spec : specs) {
    auto found = std::find_if(set.cases.begin(), set.cases.end(),
                              [&](const auto& c) { return c.name == spec.name; });
    if (found == set.cases.end()) {
      return calbin::fail("golden", spec.name, "case names must be unique");
    }
    ordered.push_back(std::move(*found));
  }
  set.cases = std::move(ordered);
  return set;
}

}  // namespace simdev::gen
