// The manifest reader: structure only (types, required fields, known enums, sizes that agree
// with shapes, bounded counts). Semantic acceptance is the runner's `check`, which needs this
// reader to load even implausible manifests, so nothing here judges units or addresses.
#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <utility>

#include "calbin/file_io.hpp"
#include "calbin/manifest_fields.hpp"

namespace calbin {
namespace {

using detail::as_u64;
using detail::FieldError;
using detail::Fields;
using detail::join;
using detail::Json;
using detail::quote;
using detail::read_dtype;
using detail::read_shape;
using detail::read_tensor;
using detail::require_size;

constexpr size_t kReserveMax = 256;

MemoryAmount read_amount(const Fields& object) {
  return MemoryAmount{object.u64("value"), object.str("unit")};
}

template <class T, class ReadOne>
std::vector<T> read_list(const Json& array, const std::string& field, ReadOne read_one) {
  std::vector<T> items;
  // Not array.size(): "models": [0, 0, ...] costs 2 bytes of input per element but would
  // reserve a whole Model for each before the first element is found invalid.
  items.reserve(std::min<size_t>(array.size(), kReserveMax));
  for (size_t i = 0; i < array.size(); ++i) {
    items.push_back(read_one(Fields(array[i], join(field, i))));
  }
  return items;
}

template <class T, class ReadOne>
std::vector<T> read_list(const Fields& object, std::string_view key, ReadOne read_one) {
  return read_list<T>(object.array_or_empty(key), object.at(key), read_one);
}

std::vector<uint64_t> read_addresses(const Fields& object, std::string_view key) {
  const Json& array = object.array(key);
  std::vector<uint64_t> addresses;
  addresses.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    addresses.push_back(as_u64(array[i], join(object.at(key), i)));
  }
  return addresses;
}

PingPongSlot read_slot(const Fields& object) {
  PingPongSlot slot;
  slot.slot = object.str("slot");
  if (slot.slot != "ping" && slot.slot != "pong") {
    throw FieldError{object.at("slot"), "unknown ping/pong slot " + quote(slot.slot)};
  }
  slot.input_addresses = read_addresses(object, "input_addresses");
  slot.output_addresses = read_addresses(object, "output_addresses");
  return slot;
}

Op read_op(const Fields& object) {
  Op op;
  op.type = object.str("type");
  op.name = object.str("name", "");
  op.layer = object.i32("layer", -1);
  op.shape = read_shape(object);
  op.dtype = read_dtype(object, "dtype");
  require_size(object, op.shape, op.dtype, Layout{});
  op.flops = object.u64("flops");
  op.bytes = object.u64("bytes");
  op.weight_bytes = object.u64("weight_bytes", 0);
  op.experts = object.u32("experts", 0);
  op.kv_bytes = object.u64("kv_bytes", 0);
  op.kv_slots = object.u64("kv_slots", 0);
  // Both are parts of `bytes`; the sum is compared without overflowing.
  if (op.weight_bytes > op.bytes || op.kv_bytes > op.bytes - op.weight_bytes) {
    throw FieldError{object.at("weight_bytes"), "weight_bytes " + std::to_string(op.weight_bytes) +
                                                    " + kv_bytes " + std::to_string(op.kv_bytes) +
                                                    " exceed bytes " + std::to_string(op.bytes)};
  }
  return op;
}

ChipOps read_chip_ops(const Fields& object) {
  ChipOps chip_ops;
  chip_ops.chip = object.u32("chip");
  chip_ops.ops = read_list<Op>(object, "ops", read_op);
  return chip_ops;
}

Csr read_csr(const Fields& object) {
  return Csr{object.str("name"), object.u32("index"), object.u64("address")};
}

Model read_model(const Fields& object) {
  Model model;
  model.name = object.str("name");
  const std::string type = object.str("type");
  const std::optional<ModelType> parsed = parse_model_type(type);
  if (!parsed) {
    throw FieldError{object.at("type"), "unknown model type " + quote(type)};
  }
  model.type = *parsed;
  model.metadata_type = object.str("metadata_type");
  model.inputs = read_list<TensorDesc>(object.array("inputs"), object.at("inputs"), read_tensor);
  model.outputs = read_list<TensorDesc>(object.array("outputs"), object.at("outputs"), read_tensor);
  model.csrs = read_list<Csr>(object, "csrs", read_csr);
  model.ping_pong = read_list<PingPongSlot>(object, "ping_pong", read_slot);
  model.ping_pong_may_alias = object.boolean("ping_pong_may_alias", false);
  model.workspace_bytes = object.u64("workspace_bytes");
  model.ops = read_list<ChipOps>(object, "ops", read_chip_ops);
  return model;
}

LlmInfo read_llm(const Fields& object) {
  LlmInfo llm;
  llm.vocab = object.u32("vocab");
  llm.context = object.u32("context");
  llm.batch = object.u32("batch");
  llm.layers = object.u32("layers");
  llm.hidden = object.u32("hidden");
  llm.q_heads = object.u32("q_heads");
  llm.kv_heads = object.u32("kv_heads");
  llm.head_dim = object.u32("head_dim");
  llm.ffn = object.u32("ffn");
  llm.experts = object.u32("experts", 0);
  llm.active_experts = object.u32("active_experts", 0);
  llm.norm_topk_prob = object.boolean("norm_topk_prob", false);
  llm.prefill_chunk = object.u32("prefill_chunk", 0);
  llm.rope_theta = object.f64("rope_theta", llm.rope_theta);
  llm.rms_eps = object.f64("rms_eps", llm.rms_eps);
  llm.k_dtype = read_dtype(object, "k_dtype");
  llm.v_dtype = read_dtype(object, "v_dtype");
  llm.partition = object.str("partition");
  llm.tokenizer_context = object.u32("tokenizer_context", 0);
  // A shape with a zero in it describes no model; every size, buffer and plan derived from it
  // would be zero as well and "fit" anywhere.
  const std::pair<const char*, uint32_t> sizes[] = {
      {"vocab", llm.vocab},       {"context", llm.context},   {"batch", llm.batch},
      {"layers", llm.layers},     {"hidden", llm.hidden},     {"q_heads", llm.q_heads},
      {"kv_heads", llm.kv_heads}, {"head_dim", llm.head_dim}, {"ffn", llm.ffn},
  };
  for (const auto& [key, value] : sizes) {
    if (value == 0) throw FieldError{object.at(key), "0: must be at least 1"};
  }
  if (llm.q_heads % llm.kv_heads != 0) {
    throw FieldError{object.at("q_heads"), std::to_string(llm.q_heads) +
                                               " is not a multiple of kv_heads " +
                                               std::to_string(llm.kv_heads)};
  }
  if (llm.active_experts > llm.experts) {
    throw FieldError{
        object.at("active_experts"),
        std::to_string(llm.active_experts) + " exceeds experts " + std::to_string(llm.experts)};
  }
  return llm;
}

Provenance read_provenance(const Fields& object) {
  return Provenance{object.str("generator", ""),     object.str("compiler_commit", ""),
                    object.str("kernel_commit", ""), object.str("command", ""),
                    object.str("config", ""),        object.str("input_onnx_sha256", "")};
}

FileEntry read_file_entry(const Fields& object) {
  return FileEntry{object.str("path"), object.u64("size"), object.str("sha256")};
}

ParamBlock read_param_block(const Fields& object) {
  return ParamBlock{object.str("name"), object.str("file"), object.u32("chip_mask")};
}

Reservation read_reservation(const Fields& object) {
  return Reservation{object.str("name"), object.u32("chip"), object.u64("base"),
                     read_amount(object.object("size"))};
}

void read_schema(const Fields& root) {
  const Json& schema = root.require("schema");
  if (!schema.is_number_integer() || schema.get<int64_t>() != kSchemaVersion) {
    throw FieldError{"schema", "unsupported schema version " + detail::describe(schema) +
                                   " (this reader supports " + std::to_string(kSchemaVersion) +
                                   ")"};
  }
}

void read_header(const Fields& root, Manifest& manifest) {
  manifest.schema = kSchemaVersion;
  manifest.calbin_version = root.str("calbin_version");
  manifest.architecture = root.str("architecture");
  manifest.runtime_abi = root.str("runtime_abi");
  manifest.chips = root.u32("chips");
  if (manifest.chips == 0 || manifest.chips > kMaxChips) {
    throw FieldError{"chips", "chip count " + std::to_string(manifest.chips) + " is outside 1.." +
                                  std::to_string(kMaxChips)};
  }
  manifest.chip_mask = root.u32("chip_mask");
  manifest.timing_only = root.boolean("timing_only", false);
  manifest.device_memory_required = read_amount(root.object("device_memory_required"));
}

void require_unique_model_names(const std::vector<Model>& models) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < models.size(); ++i) {
    if (!seen.insert(models[i].name).second) {
      throw FieldError{join(join("models", i), "name"),
                       "duplicate model name " + quote(models[i].name)};
    }
  }
}

Manifest read_root(const Fields& root) {
  read_schema(root);
  Manifest manifest;
  read_header(root, manifest);
  manifest.llm = read_llm(root.object("llm"));
  if (root.has("provenance")) {
    manifest.provenance = read_provenance(root.object("provenance"));
  }
  manifest.files = read_list<FileEntry>(root.array("files"), "files", read_file_entry);
  manifest.param_blocks = read_list<ParamBlock>(root, "param_blocks", read_param_block);
  manifest.reservations = read_list<Reservation>(root, "reservations", read_reservation);
  manifest.weights = read_list<WeightTensor>(root, "weights", detail::read_weight);
  manifest.models = read_list<Model>(root.array("models"), "models", read_model);
  require_unique_model_names(manifest.models);

  if (root.has("golden")) {
    manifest.golden = GoldenRef{root.object("golden").str("index")};
  }
  return manifest;
}

}  // namespace

Result<Manifest> parse_manifest(std::string_view json_text, std::string_view file_label) {
  const std::string file(file_label);
  if (json_text.size() > kMaxManifestBytes) {
    return fail(file, "",
                "manifest is " + std::to_string(json_text.size()) +
                    " bytes, more than the limit of " + std::to_string(kMaxManifestBytes));
  }
  try {
    const Json document = detail::parse_json_text(json_text);
    return read_root(Fields(document, ""));
  } catch (const FieldError& error) {
    return fail(file, error.field, error.message);
  } catch (const std::exception& error) {
    // Defensive: nlohmann or the allocator; the API never lets an exception escape.
    return fail(file, "", std::string("unexpected error: ") + error.what());
  }
}

namespace {

// The last few manifests this process parsed, by their exact text. A runner and the runtime
// it loads in process both read the calbin's manifest, and a daemon reads it for every
// client: a timing-only reference manifest is 2 MB of JSON, about 45 ms of parsing each
// time, much of a short bench's start-up. A hit needs the same bytes (compared in full, not
// by a hash someone could collide), so the result is the parse's own. Failures are not kept.
class ParsedManifests {
 public:
  std::optional<Manifest> find(const std::string& text) {
    std::lock_guard lock(mutex_);
    for (const Entry& entry : entries_) {
      if (entry.text == text) {
        return entry.manifest;
      }
    }
    return std::nullopt;
  }
  void keep(std::string text, const Manifest& manifest) {
    if (text.size() > kMaxKeptBytes) {
      return;
    }
    std::lock_guard lock(mutex_);
    bytes_ += text.size();
    entries_.push_front({std::move(text), manifest});
    while (entries_.size() > kMaxEntries || bytes_ > kMaxKeptBytes) {
      bytes_ -= entries_.back().text.size();
      entries_.pop_back();
    }
  }

 private:
  static constexpr size_t kMaxEntries = 2;
  static constexpr size_t kMaxKeptBytes = size_t{8} << 20;
  struct Entry {
    std::string text;
    Manifest manifest;
  };
  std::mutex mutex_;
  std::deque<Entry> entries_;
  size_t bytes_ = 0;
};

ParsedManifests& parsed_manifests() {
  static ParsedManifests* const parsed = new ParsedManifests;  // never destroyed: no exit order
  return *parsed;
}

}  // namespace

Result<Manifest> read_manifest(const std::filesystem::path& calbin_dir) {
  const std::filesystem::path path = calbin_dir / kManifestFileName;
  // The manifest is a file of the calbin like the others: a symlink out of the directory is
  // refused before a byte is read (a parse error would show the outside file's first bytes).
  if (std::error_code error; std::filesystem::is_symlink(path, error)) {
    if (Result<std::filesystem::path> inside = resolve_inside(calbin_dir, kManifestFileName);
        !inside) {
      return fail(path.string(), "", inside.error().message);
    }
  }
  Result<std::string> text = detail::read_file_bounded(path, kMaxManifestBytes);
  if (!text) {
    return tl::unexpected(text.error());
  }
  if (std::optional<Manifest> known = parsed_manifests().find(*text)) {
    return std::move(*known);
  }
  Result<Manifest> manifest = parse_manifest(*text, path.string());
  if (manifest) {
    parsed_manifests().keep(std::move(*text), *manifest);
  }
  return manifest;
}

}  // namespace calbin
