#include "runner/core/baseline.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include "calbin/sha256.hpp"

namespace runner {

std::string golden_fingerprint(const calbin::GoldenSet& golden, const std::vector<size_t>& cases) {
  std::vector<uint8_t> bytes;
  auto append = [&bytes](const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
  };
  for (const size_t i : cases) {
    const calbin::GoldenCase& c = golden.cases.at(i);
    append(c.name.data(), c.name.size() + 1);
    append(c.tokens.data(), c.tokens.size() * sizeof(int32_t));
    append(c.greedy.data(), c.greedy.size() * sizeof(int32_t));
    append(c.prefill_logits.data(), c.prefill_logits.size() * sizeof(float));
  }
  return calbin::sha256_hex(bytes);
}

namespace {

// metrics.<phase>.<key>.value, or the error naming it.
tl::expected<double, std::string> value_at(const nlohmann::json& metrics, const std::string& phase,
                                           const std::string& key, const std::string& field) {
  const nlohmann::json* node = &metrics;
  for (const std::string& k : {phase, key, field}) {
    if (k.empty()) continue;
    if (!node->is_object() || !node->contains(k)) {
      return tl::unexpected("metrics." + (phase.empty() ? "" : phase + ".") + key + "." + field +
                            ": missing");
    }
    node = &(*node)[k];
  }
  if (!node->is_number()) {
    return tl::unexpected("metrics." + (phase.empty() ? "" : phase + ".") + key + "." + field +
                          ": " + node->dump() + " is not a number");
  }
  return node->get<double>();
}

tl::expected<Fp32Distance, std::string> phase_of(const nlohmann::json& m,
                                                 const std::string& phase) {
  Fp32Distance d;
  const std::pair<const char*, double*> fields[] = {{"cosine_min", &d.cosine},
                                                    {"max_abs_error_max", &d.max_abs_error},
                                                    {"top_k_overlap_min", &d.top_k_overlap},
                                                    {"mean_rel_rms", &d.rel_rms}};
  for (const auto& [key, out] : fields) {
    auto v = value_at(m, phase, key, "value");
    if (!v) return tl::unexpected(v.error());
    *out = *v;
  }
  return d;
}

}  // namespace

tl::expected<Baseline, std::string> read_baseline(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    return tl::unexpected(path.string() + ": cannot read the baseline report");
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return tl::unexpected(path.string() + ": not JSON: " + e.what());
  }
  auto fail = [&](const std::string& why) { return tl::unexpected(path.string() + ": " + why); };
  if (!doc.is_object() || doc.value("command", std::string()) != "smoke") {
    return fail("command: not a calrt smoke report");
  }
  if (!doc.contains("metrics") || !doc["metrics"].is_object()) return fail("metrics: missing");
  const nlohmann::json& m = doc["metrics"];
  Baseline b;
  b.path = path;
  if (!m.contains("golden_fingerprint") || !m["golden_fingerprint"].is_string()) {
    return fail("metrics.golden_fingerprint: missing (a report of an older calrt?)");
  }
  b.golden_fingerprint = m["golden_fingerprint"].get<std::string>();
  auto prefill = phase_of(m, "prefill");
  if (!prefill) return fail(prefill.error());
  auto decode = phase_of(m, "decode");
  if (!decode) return fail(decode.error());
  auto gain = value_at(m, "", "mean_gain", "gain");
  if (!gain) return fail(gain.error());
  auto greedy = value_at(m, "", "greedy_agreement", "value");
  if (!greedy) return fail(greedy.error());
  b.prefill = *prefill;
  b.decode = *decode;
  b.run.gain_bias = std::abs(*gain - 1.0);
  b.run.greedy = *greedy;
  return b;
}

Thresholds against_baseline(const Thresholds& t, const Fp32Distance& b) {
  Thresholds s = t;
  const Fp32Openings o = fp32_openings();
  s.max_mean_rel_rms = b.rel_rms * o.rel_rms.scale + o.rel_rms.slack;
  s.max_abs_error = b.max_abs_error * o.max_abs.scale + o.max_abs.slack;
  s.min_cosine = 1.0 - ((1.0 - b.cosine) * o.cosine.scale + o.cosine.slack);
  s.min_top_k_overlap = b.top_k_overlap - o.top_k.slack;
  s.max_gain_bias = b.gain_bias * o.gain_bias.scale + o.gain_bias.slack;
  s.min_greedy = b.greedy - o.greedy.slack;
  return s;
}

}  // namespace runner
