#include "calbin/acceptance/service_manifest.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

namespace calbin {
namespace {

constexpr size_t kMaxServiceManifestBytes = size_t{1} << 20;
// Aliases let a small file name one node many times; the duplicate-key walk stops here.
constexpr size_t kMaxNodesWalked = 1'000'000;

struct KeyProblem {
  std::string field;
  std::string message;
};

// yaml-cpp keeps both pairs of a key given twice and its lookups return the first, so the
// second would be ignored without a word: refused, naming the key's path and line.
std::optional<KeyProblem> find_duplicate_key(const YAML::Node& node, const std::string& path,
                                             size_t& budget) {
  if (budget == 0) {
    return KeyProblem{path, "the document expands to more than " + std::to_string(kMaxNodesWalked) +
                                " nodes (through aliases)"};
  }
  --budget;
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& pair : node) {
      const bool scalar = pair.first.IsScalar();
      const std::string name = scalar ? pair.first.Scalar() : "?";
      const std::string here = path.empty() ? name : path + "." + name;
      if (scalar && !seen.insert(name).second) {
        return KeyProblem{here, "key given twice in one mapping, at line " +
                                    std::to_string(pair.first.Mark().line + 1)};
      }
      if (auto problem = find_duplicate_key(pair.second, here, budget)) return problem;
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      if (auto problem =
              find_duplicate_key(node[i], path + "[" + std::to_string(i) + "]", budget)) {
        return problem;
      }
    }
  }
  return std::nullopt;
}

// Reads YAML nodes and remembers the file, so every error can name file, key and value.
class Reader {
 public:
  explicit Reader(std::string_view file) : file_(file) {}

  Result<YAML::Node> child(const YAML::Node& parent, const std::string& key,
                           const std::string& path) const {
    const YAML::Node node = parent[key];
    if (!node.IsDefined() || node.IsNull()) {
      return fail(file_, path + key, "is required but missing");
    }
    return node;
  }

  Result<std::string> text(const YAML::Node& parent, const std::string& key,
                           const std::string& path = "") const {
    auto node = child(parent, key, path);
    if (!node) {
      return tl::unexpected(node.error());
    }
    if (!node->IsScalar()) {
      return fail(file_, path + key, "must be a scalar");
    }
    return node->Scalar();
  }

  Result<uint32_t> count(const YAML::Node& parent, const std::string& key,
                         const std::string& path = "") const {
    auto value = text(parent, key, path);
    if (!value) {
      return tl::unexpected(value.error());
    }
    uint64_t number = 0;
    const char* end = value->data() + value->size();
    auto [ptr, ec] = std::from_chars(value->data(), end, number);
    if (ec != std::errc() || ptr != end || number > std::numeric_limits<uint32_t>::max()) {
      return fail(file_, path + key, "\"" + *value + "\" is not an unsigned 32-bit integer");
    }
    return static_cast<uint32_t>(number);
  }

  Result<std::optional<Dtype>> optional_dtype(const YAML::Node& parent,
                                              const std::string& key) const {
    if (!parent[key].IsDefined()) {
      return std::optional<Dtype>{};
    }
    auto value = text(parent, key);
    if (!value) {
      return tl::unexpected(value.error());
    }
    auto dtype = parse_dtype(*value);
    if (!dtype) {
      return fail(file_, key, "unknown dtype \"" + *value + "\"");
    }
    return std::optional<Dtype>{*dtype};
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// Splits "name[3]" into name and index.
std::optional<std::pair<std::string, uint32_t>> split_indexed(const std::string& text) {
  const size_t open = text.find('[');
  if (open == std::string::npos || open == 0 || text.size() < open + 3 || text.back() != ']') {
    return std::nullopt;
  }
  const std::string digits = text.substr(open + 1, text.size() - open - 2);
  uint32_t index = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return std::make_pair(text.substr(0, open), index);
}

Result<TensorRef> tensor_ref(const Reader& reader, const YAML::Node& tensors,
                             const std::string& key) {
  auto value = reader.text(tensors, key, "tensors.");
  if (!value) {
    return tl::unexpected(value.error());
  }
  auto parts = split_indexed(*value);
  if (!parts || (parts->first != "inputs" && parts->first != "outputs")) {
    return fail(reader.file(), "tensors." + key,
                "\"" + *value + "\" is not of the form inputs[N] or outputs[N]");
  }
  return TensorRef{parts->first == "outputs", parts->second};
}

Result<CsrRef> csr_ref(const Reader& reader, const YAML::Node& csr, const std::string& key) {
  auto value = reader.text(csr, key, "csr.");
  if (!value) {
    return tl::unexpected(value.error());
  }
  auto parts = split_indexed(*value);
  if (!parts) {
    return fail(reader.file(), "csr." + key, "\"" + *value + "\" is not of the form NAME[N]");
  }
  return CsrRef{parts->first, parts->second};
}

Result<void> read_scalars(const Reader& reader, const YAML::Node& root, ServiceManifest& out) {
  auto schema = reader.count(root, "schema");
  if (!schema) {
    return tl::unexpected(schema.error());
  }
  if (*schema != kServiceSchemaVersion) {
    return fail(reader.file(), "schema",
                "version " + std::to_string(*schema) + " is not supported (expected " +
                    std::to_string(kServiceSchemaVersion) + ")");
  }
  auto architecture = reader.text(root, "architecture");
  auto calbin_version = reader.text(root, "calbin_version");
  auto runtime_abi = reader.text(root, "runtime_abi");
  auto context = reader.count(root, "context");
  auto batch = reader.count(root, "batch");
  auto vocab = reader.count(root, "vocab");
  for (const auto* r : {&architecture, &calbin_version, &runtime_abi}) {
    if (!*r) {
      return tl::unexpected(r->error());
    }
  }
  for (const auto* r : {&context, &batch, &vocab}) {
    if (!*r) {
      return tl::unexpected(r->error());
    }
  }
  out.architecture = *architecture;
  out.calbin_version = *calbin_version;
  out.runtime_abi = *runtime_abi;
  out.context = *context;
  out.batch = *batch;
  out.vocab = *vocab;
  return {};
}

Result<void> read_optionals(const Reader& reader, const YAML::Node& root, ServiceManifest& out) {
  if (root["chip_mask"].IsDefined()) {
    auto mask = reader.count(root, "chip_mask");
    if (!mask) {
      return tl::unexpected(mask.error());
    }
    out.chip_mask = *mask;
  }
  auto kv = reader.optional_dtype(root, "kv_dtype");
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  auto logits = reader.optional_dtype(root, "logits_dtype");
  if (!logits) {
    return tl::unexpected(logits.error());
  }
  out.kv_dtype = *kv;
  out.logits_dtype = *logits;
  if (root["decode_top_k"].IsDefined()) {
    auto k = reader.count(root, "decode_top_k");
    if (!k) {
      return tl::unexpected(k.error());
    }
    if (*k == 0) {
      return fail(reader.file(), "decode_top_k", "is 0; a ranked decode gives at least 1 id");
    }
    out.decode_top_k = *k;
  }
  return {};
}

Result<void> read_sections(const Reader& reader, const YAML::Node& root, ServiceManifest& out) {
  auto models = reader.child(root, "models", "");
  auto tensors = reader.child(root, "tensors", "");
  auto csr = reader.child(root, "csr", "");
  for (const auto* r : {&models, &tensors, &csr}) {
    if (!*r) {
      return tl::unexpected(r->error());
    }
  }
  auto prefill = reader.text(*models, "prefill", "models.");
  auto decode = reader.text(*models, "decode", "models.");
  auto token = tensor_ref(reader, *tensors, "token");
  auto position = tensor_ref(reader, *tensors, "position");
  auto logits = tensor_ref(reader, *tensors, "logits");
  auto current = csr_ref(reader, *csr, "current");
  auto past = csr_ref(reader, *csr, "past_current");
  if (!prefill) return tl::unexpected(prefill.error());
  if (!decode) return tl::unexpected(decode.error());
  if (!token) return tl::unexpected(token.error());
  if (!position) return tl::unexpected(position.error());
  if (!logits) return tl::unexpected(logits.error());
  if (!current) return tl::unexpected(current.error());
  if (!past) return tl::unexpected(past.error());
  out.prefill_model = *prefill;
  out.decode_model = *decode;
  out.token = *token;
  out.position = *position;
  out.logits = *logits;
  out.current = *current;
  out.past_current = *past;
  return {};
}

}  // namespace

Result<ServiceManifest> parse_service_manifest(std::string_view yaml_text,
                                               std::string_view file_label) {
  const Reader reader(file_label);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return fail(std::string(file_label), "",
                "malformed YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                    std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) {
    return fail(std::string(file_label), "", "the document must be a mapping");
  }
  size_t budget = kMaxNodesWalked;
  if (auto duplicate = find_duplicate_key(root, "", budget)) {
    return fail(std::string(file_label), duplicate->field, duplicate->message);
  }
  ServiceManifest out;
  try {
    for (auto step : {read_scalars, read_optionals, read_sections}) {
      if (auto ok = step(reader, root, out); !ok) {
        return tl::unexpected(ok.error());
      }
    }
  } catch (const YAML::Exception& e) {
    return fail(std::string(file_label), "", std::string("unexpected YAML structure: ") + e.msg);
  }
  return out;
}

Result<ServiceManifest> read_service_manifest(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    return fail(path.string(), "", "cannot read: " + ec.message());
  }
  if (size > kMaxServiceManifestBytes) {
    return fail(path.string(), "",
                "is " + std::to_string(size) + " bytes; the limit is " +
                    std::to_string(kMaxServiceManifestBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return fail(path.string(), "", "read error");
  }
  return parse_service_manifest(text.str(), path.string());
}

}  // namespace calbin
