// Writing a golden set: the arrays first, the golden.json index last, so an index on disk
// never names an array that is not there yet.
#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "calbin/file_io.hpp"
#include "calbin/golden.hpp"
#include "calbin/npy.hpp"

namespace calbin {
namespace fs = std::filesystem;
namespace {

using OrderedJson = nlohmann::ordered_json;

// Case names become file-name prefixes; refuse anything that could leave the directory.
bool is_safe_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

Result<void> check_count(const std::string& label, const std::string& field, size_t count,
                         uint64_t needed, const std::string& why) {
  if (count != needed) {
    return fail(label, field,
                "holds " + std::to_string(count) + " values but " + why + " needs " +
                    std::to_string(needed));
  }
  return {};
}

Result<void> check_case(const std::string& label, const GoldenSet& set, size_t i) {
  const GoldenCase& c = set.cases[i];
  const std::string at = "cases[" + std::to_string(i) + "].";
  if (!is_safe_name(c.name)) {
    return fail(label, at + "name", "case name \"" + c.name + "\" cannot be a file-name prefix");
  }
  const uint64_t steps = c.decode_steps;
  const uint64_t pairs = steps * set.top_k;
  Result<void> ok = check_count(label, at + "tokens", c.tokens.size(), c.prompt_len, "prompt_len");
  ok = ok.and_then([&] {
    return check_count(label, at + "prefill_logits", c.prefill_logits.size(), set.vocab, "vocab");
  });
  ok = ok.and_then([&] {
    return check_count(label, at + "greedy", c.greedy.size(), steps + 1, "decode_steps + 1");
  });
  ok = ok.and_then([&] {
    return check_count(label, at + "top_ids", c.top_ids.size(), pairs, "decode_steps x top_k");
  });
  ok = ok.and_then([&] {
    return check_count(label, at + "top_logits", c.top_logits.size(), pairs,
                       "decode_steps x top_k");
  });
  if (ok && !c.decode_logits.empty()) {
    ok = check_count(label, at + "decode_logits", c.decode_logits.size(), steps * set.vocab,
                     "decode_steps x vocab");
  }
  if (ok) {
    ok = check_count(label, at + "contract_logits", c.contract_logits.size(),
                     uint64_t{c.contract_rows.size()} * set.vocab, "contract_rows x vocab");
  }
  if (ok && !c.contract_probes.empty()) {
    ok = check_count(label, at + "contract_probes", c.contract_probes.size(),
                     uint64_t{c.contract_rows.size()} * c.probe_points * c.probe_width,
                     "contract_rows x probe_points x probe_width");
  }
  for (size_t r = 0; ok && r < c.contract_rows.size(); ++r) {
    const int32_t row = c.contract_rows[r];
    if (row < 0 || uint64_t(row) >= c.prompt_len + steps ||
        (r > 0 && row <= c.contract_rows[r - 1])) {
      ok = fail(label, at + "contract_rows[" + std::to_string(r) + "]",
                std::to_string(row) + " is not an increasing token index below prompt_len + " +
                    "decode_steps");
    }
  }
  return ok;
}

// Writes one case's arrays and returns its index entry; names are appended to `written`.
Result<OrderedJson> write_case(const fs::path& dir, const GoldenSet& set, const GoldenCase& c,
                               std::vector<std::string>& written) {
  const auto steps = static_cast<int64_t>(c.decode_steps);
  const auto vocab = static_cast<int64_t>(set.vocab);
  const auto top_k = static_cast<int64_t>(set.top_k);
  OrderedJson entry{{"name", c.name},
                    {"prompt_len", c.prompt_len},
                    {"decode_steps", c.decode_steps},
                    {"long_case", c.long_case}};
  Result<void> ok;
  auto put = [&](const char* key, const std::vector<int64_t>& shape, const auto& values) {
    if (!ok) {
      return;
    }
    const std::string name = c.name + "." + key + ".npy";
    if constexpr (std::is_same_v<std::decay_t<decltype(values)>, std::vector<float>>) {
      ok = write_npy_f32(dir / name, shape, values);
    } else {
      ok = write_npy_i32(dir / name, shape, values);
    }
    entry[key] = name;
    written.push_back(name);
  };
  put("tokens", {static_cast<int64_t>(c.prompt_len)}, c.tokens);
  put("prefill_logits", {vocab}, c.prefill_logits);
  put("greedy", {steps + 1}, c.greedy);
  put("top_ids", {steps, top_k}, c.top_ids);
  put("top_logits", {steps, top_k}, c.top_logits);
  if (!c.decode_logits.empty()) {
    put("decode_logits", {steps, vocab}, c.decode_logits);
  }
  if (!c.contract_rows.empty()) {
    const auto rows = static_cast<int64_t>(c.contract_rows.size());
    put("contract_rows", {rows}, c.contract_rows);
    put("contract_logits", {rows, vocab}, c.contract_logits);
    if (!c.contract_probes.empty()) {
      put("contract_probes", {rows, c.probe_points, c.probe_width}, c.contract_probes);
    }
  }
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  return entry;
}

}  // namespace

Result<std::vector<std::string>> write_golden(const fs::path& dir, const GoldenSet& set) {
  const fs::path index_path = dir / kGoldenIndexName;
  const std::string label = index_path.string();
  std::set<std::string_view> names;
  for (size_t i = 0; i < set.cases.size(); ++i) {
    if (Result<void> ok = check_case(label, set, i); !ok) {
      return tl::unexpected(ok.error());
    }
    if (!names.insert(set.cases[i].name).second) {
      // Two cases of one name would overwrite each other's arrays.
      return fail(label, "cases[" + std::to_string(i) + "].name",
                  "duplicate case name \"" + set.cases[i].name + "\"");
    }
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return fail(dir.string(), "", "cannot create directory: " + error.message());
  }
  std::vector<std::string> written;
  OrderedJson cases = OrderedJson::array();
  for (const GoldenCase& c : set.cases) {
    Result<OrderedJson> entry = write_case(dir, set, c, written);
    if (!entry) {
      return tl::unexpected(entry.error());
    }
    cases.push_back(std::move(*entry));
  }
  // Schema 2 adds the contract rows; a set without them stays schema 1, which every reader
  // of the format accepts.
  const bool contract = std::any_of(set.cases.begin(), set.cases.end(),
                                    [](const GoldenCase& c) { return !c.contract_rows.empty(); });
  OrderedJson index{{"schema", contract ? 2 : 1},
                    {"vocab", set.vocab},
                    {"top_k", set.top_k},
                    {"reference", set.reference}};
  if (contract) {
    index["contract_reference"] = set.contract_reference;
  }
  index["cases"] = std::move(cases);
  const std::string text = index.dump(2, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
  if (Result<void> ok = detail::write_file_atomic(index_path, text); !ok) {
    return tl::unexpected(ok.error());
  }
  written.emplace_back(kGoldenIndexName);
  return written;
}

}  // namespace calbin
