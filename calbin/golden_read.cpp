// Reading a golden set: the golden.json index, then every array it names, each checked
// against the shape its case implies (golden.hpp lists them).
#include "calbin/file_io.hpp"
#include "calbin/golden.hpp"
#include "calbin/json_fields.hpp"
#include "calbin/manifest.hpp"
#include "calbin/npy.hpp"

namespace calbin {
namespace fs = std::filesystem;
namespace {

using detail::FieldError;
using detail::Fields;
using detail::Json;

// The array file names of one case, as the index gives them (relative to the golden dir).
struct CaseFiles {
  std::string tokens;
  std::string prefill_logits;
  std::string greedy;
  std::string top_ids;
  std::string top_logits;
  std::string decode_logits;  // empty when not stored
  std::string contract_rows;  // schema 2; empty when not stored
  std::string contract_logits;
  std::string contract_probes;  // optional beside the two above
};

struct Index {
  GoldenSet set;  // without the arrays
  std::vector<CaseFiles> files;
};

Index parse_index(const Json& document) {
  const Fields root(document, "");
  const uint64_t schema = root.u64("schema");
  if (schema != 1 && schema != 2) {
    throw FieldError{"schema", "unsupported golden schema " + std::to_string(schema) +
                                   " (this reader supports 1 and 2)"};
  }
  Index index;
  index.set.vocab = root.u32("vocab");
  index.set.top_k = root.u32("top_k");
  index.set.reference = root.str("reference", "");
  if (schema >= 2) {
    index.set.contract_reference = root.str("contract_reference", "");
  }
  const Json& cases = root.array("cases");
  for (size_t i = 0; i < cases.size(); ++i) {
    const Fields entry(cases[i], detail::join("cases", i));
    GoldenCase golden_case;
    golden_case.name = entry.str("name");
    golden_case.prompt_len = entry.u32("prompt_len");
    golden_case.decode_steps = entry.u32("decode_steps");
    golden_case.long_case = entry.boolean("long_case", false);
    index.set.cases.push_back(std::move(golden_case));
    CaseFiles files{entry.str("tokens"),
                    entry.str("prefill_logits"),
                    entry.str("greedy"),
                    entry.str("top_ids"),
                    entry.str("top_logits"),
                    entry.str("decode_logits", ""),
                    "",
                    "",
                    ""};
    if (schema >= 2) {
      files.contract_rows = entry.str("contract_rows", "");
      files.contract_logits = entry.str("contract_logits", "");
      files.contract_probes = entry.str("contract_probes", "");
      if (files.contract_rows.empty() != files.contract_logits.empty() ||
          (files.contract_rows.empty() && !files.contract_probes.empty())) {
        throw FieldError{detail::join("cases", i),
                         "contract_rows and contract_logits come together, and "
                         "contract_probes needs them; one is missing"};
      }
    }
    index.files.push_back(std::move(files));
  }
  return index;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + "]";
}

// What one array must look like, and why, for the error message.
struct Expected {
  std::string field;  // e.g. "cases[2].top_ids"
  std::vector<int64_t> shape;
  std::string why;  // e.g. "[decode_steps, top_k]"
};

// Reads one array into target, checking its dtype (by T) and its shape.
template <class T>
Result<void> load_into(std::vector<T>& target, const fs::path& dir, const std::string& index_label,
                       const std::string& name, const Expected& expected) {
  Result<fs::path> path = resolve_inside(dir, name);
  if (!path) {
    return fail(index_label, expected.field, detail::quote(name) + ": " + path.error().message);
  }
  std::vector<int64_t> shape;
  Result<std::vector<T>> values = [&] {
    if constexpr (std::is_same_v<T, float>) {
      return read_npy_f32(*path, &shape);
    } else {
      return read_npy_i32(*path, &shape);
    }
  }();
  if (!values) {
    return tl::unexpected(values.error());
  }
  if (shape != expected.shape) {
    return fail(path->string(), expected.field,
                "shape " + shape_text(shape) + " but the case needs " + shape_text(expected.shape) +
                    " " + expected.why);
  }
  target = std::move(*values);
  return {};
}

// The contract rows: a 1-D int32 array of increasing token indices below L + N, then their
// logits, one row each.
Result<void> load_contract(const fs::path& dir, const std::string& label, const GoldenSet& set,
                           size_t i, const CaseFiles& files, GoldenCase& out) {
  const std::string at = detail::join("cases", i);
  std::vector<int64_t> shape;
  auto path = resolve_inside(dir, files.contract_rows);
  if (!path) {
    return fail(label, detail::join(at, "contract_rows"),
                detail::quote(files.contract_rows) + ": " + path.error().message);
  }
  auto rows = read_npy_i32(*path, &shape);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  if (shape.size() != 1) {
    return fail(path->string(), detail::join(at, "contract_rows"),
                "shape " + shape_text(shape) + " but the rows are a 1-D array");
  }
  const uint64_t limit = uint64_t{out.prompt_len} + out.decode_steps;
  for (size_t r = 0; r < rows->size(); ++r) {
    const int32_t row = (*rows)[r];
    if (row < 0 || uint64_t(row) >= limit || (r > 0 && row <= (*rows)[r - 1])) {
      return fail(path->string(), detail::join(at, "contract_rows") + "[" + std::to_string(r) + "]",
                  std::to_string(row) + " is not an increasing token index below prompt_len + " +
                      "decode_steps = " + std::to_string(limit));
    }
  }
  out.contract_rows = std::move(*rows);
  Result<void> done =
      load_into(out.contract_logits, dir, label, files.contract_logits,
                Expected{detail::join(at, "contract_logits"),
                         {static_cast<int64_t>(out.contract_rows.size()), set.vocab},
                         "[contract rows, vocab]"});
  if (!done || files.contract_probes.empty()) {
    return done;
  }
  // [rows, points, hidden]: the index does not state the model's hidden size, the array
  // does; the smoke checks it against the device's probes.
  auto probes_path = resolve_inside(dir, files.contract_probes);
  if (!probes_path) {
    return fail(label, detail::join(at, "contract_probes"),
                detail::quote(files.contract_probes) + ": " + probes_path.error().message);
  }
  auto probes = read_npy_f32(*probes_path, &shape);
  if (!probes) {
    return tl::unexpected(probes.error());
  }
  if (shape.size() != 3 || shape[0] != static_cast<int64_t>(out.contract_rows.size()) ||
      shape[1] < 1 || shape[2] < 1 || shape[1] > 65535) {
    return fail(probes_path->string(), detail::join(at, "contract_probes"),
                "shape " + shape_text(shape) + " but the case needs [" +
                    std::to_string(out.contract_rows.size()) + ", points, hidden]");
  }
  out.contract_probes = std::move(*probes);
  out.probe_points = static_cast<uint32_t>(shape[1]);
  out.probe_width = static_cast<uint32_t>(shape[2]);
  return {};
}

Result<void> load_case(const fs::path& dir, const std::string& label, const GoldenSet& set,
                       size_t i, const CaseFiles& files, GoldenCase& out) {
  const std::string at = detail::join("cases", i);
  const int64_t steps = out.decode_steps;
  const int64_t vocab = set.vocab;
  const int64_t top_k = set.top_k;
  auto expect = [&](const char* key, std::vector<int64_t> shape, const char* why) {
    return Expected{detail::join(at, key), std::move(shape), why};
  };
  Result<void> done = load_into(out.tokens, dir, label, files.tokens,
                                expect("tokens", {out.prompt_len}, "[prompt_len]"));
  if (done) {
    done = load_into(out.prefill_logits, dir, label, files.prefill_logits,
                     expect("prefill_logits", {vocab}, "[vocab]"));
  }
  if (done) {
    done = load_into(out.greedy, dir, label, files.greedy,
                     expect("greedy", {steps + 1}, "[decode_steps + 1]"));
  }
  if (done) {
    done = load_into(out.top_ids, dir, label, files.top_ids,
                     expect("top_ids", {steps, top_k}, "[decode_steps, top_k]"));
  }
  if (done) {
    done = load_into(out.top_logits, dir, label, files.top_logits,
                     expect("top_logits", {steps, top_k}, "[decode_steps, top_k]"));
  }
  if (done && !files.decode_logits.empty()) {
    done = load_into(out.decode_logits, dir, label, files.decode_logits,
                     expect("decode_logits", {steps, vocab}, "[decode_steps, vocab]"));
  }
  if (done && !files.contract_rows.empty()) {
    done = load_contract(dir, label, set, i, files, out);
  }
  return done;
}

}  // namespace

Result<GoldenSet> read_golden(const fs::path& dir) {
  return read_golden_index(dir / kGoldenIndexName);
}

Result<GoldenSet> read_golden_index(const fs::path& index_path) {
  const fs::path dir = index_path.parent_path();
  const std::string label = index_path.string();
  Result<std::string> text = detail::read_file_bounded(index_path, kMaxManifestBytes);
  if (!text) {
    return tl::unexpected(text.error());
  }
  Index index;
  try {
    index = parse_index(detail::parse_json_text(*text));
  } catch (const FieldError& error) {
    return fail(label, error.field, error.message);
  } catch (const std::exception& error) {
    return fail(label, "", std::string("unexpected error: ") + error.what());
  }
  // A smoke reports and selects cases by name: two of one name would make `--cases` and the
  // report ambiguous.
  for (size_t i = 0; i < index.set.cases.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (index.set.cases[j].name == index.set.cases[i].name) {
        return fail(label, "cases[" + std::to_string(i) + "].name",
                    "\"" + index.set.cases[i].name + "\" is also the name of cases[" +
                        std::to_string(j) + "]");
      }
    }
  }
  for (size_t i = 0; i < index.set.cases.size(); ++i) {
    Result<void> loaded = load_case(dir, label, index.set, i, index.files[i], index.set.cases[i]);
    if (!loaded) {
      return tl::unexpected(loaded.error());
    }
  }
  return std::move(index.set);
}

}  // namespace calbin
