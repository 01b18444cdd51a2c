#include "simdev/gen/config_file.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "calbin/file_io.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Config files are a few kilobytes; anything far larger is not one.
constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;

calbin::Result<std::string> read_text(const fs::path& path) {
  return calbin::detail::read_file_bounded(path, kMaxConfigBytes);
}

// "Qwen3-0.6B" -> "qwen3_0_6b": lower case, one '_' for each run of other characters.
std::string model_name(const std::string& text) {
  std::string name;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!name.empty() && name.back() != '_') {
      name += '_';
    }
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

void name_models(ModelConfig& c, const std::string& name) {
  c.calbin_version_prefix = name;
  c.prefill_model = name + "_prefill_c" + std::to_string(c.prefill_chunk);
  c.decode_model = name + "_decode";
}

class JsonConfig {
 public:
  JsonConfig(const fs::path& path, const Json& doc) : path_(path), doc_(doc) {}

  calbin::Result<uint32_t> count(const char* key) const {
    if (!doc_.contains(key)) return calbin::fail(path_.string(), key, "missing");
    return count_of(key, doc_.at(key));
  }
  calbin::Result<uint32_t> count_or(const char* key, uint32_t fallback) const {
    if (!doc_.contains(key) || doc_.at(key).is_null()) return fallback;
    return count_of(key, doc_.at(key));
  }
  calbin::Result<double> number_or(const char* key, double fallback) const {
    if (!doc_.contains(key) || doc_.at(key).is_null()) return fallback;
    const Json& v = doc_.at(key);
    if (!v.is_number() || !(v.get<double>() > 0)) {
      return calbin::fail(path_.string(), key, v.dump() + " is not a positive number");
    }
    return v.get<double>();
  }
  calbin::Result<bool> boolean_or(const char* key, bool fallback) const {
    if (!doc_.contains(key) || doc_.at(key).is_null()) return fallback;
    const Json& v = doc_.at(key);
    if (!v.is_boolean()) return calbin::fail(path_.string(), key, v.dump() + ": not true/false");
    return v.get<bool>();
  }
  // A field that must be absent, null, or `allowed` (as JSON).
  calbin::Result<void> only(const char* key, const std::set<std::string>& allowed,
                            const std::string& why) const {
    if (!doc_.contains(key) || doc_.at(key).is_null()) return {};
    const std::string value = doc_.at(key).dump();
    if (allowed.contains(value)) return {};
    return calbin::fail(path_.string(), key, value + ": " + why);
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    return doc_.contains(key) && doc_.at(key).is_string() ? doc_.at(key).get<std::string>()
                                                          : fallback;
  }

 private:
  calbin::Result<uint32_t> count_of(const char* key, const Json& v) const {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 30)) {
      return calbin::fail(path_.string(), key, v.dump() + " is not a positive integer");
    }
    return static_cast<uint32_t>(v.get<int64_t>());
  }

  fs::path path_;
  const Json& doc_;
};

// Stores the value of a Result, or returns its error from the enclosing function.
#define CONFIG_TRY(target, expr)                                  \
  do {                                                            \
    auto config_read = (expr);                                    \
    if (!config_read) return tl::unexpected(config_read.error()); \
    (target) = *config_read;                                      \
  } while (0)

calbin::Result<ModelConfig> read_hf_config(const fs::path& path) {
  auto text = read_text(path);
  if (!text) return tl::unexpected(text.error());
  Json doc;
  try {
    doc = Json::parse(*text);
  } catch (const Json::parse_error& e) {
    return calbin::fail(path.string(), "", std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object()) return calbin::fail(path.string(), "", "not a JSON object");
  const JsonConfig j(path, doc);
  const std::string type = j.string_or("model_type", "");
  if (type != "qwen3" && type != "qwen3_moe" && type != "llama") {
    return calbin::fail(path.string(), "model_type",
                        "'" + type + "': supported are qwen3, qwen3_moe and llama");
  }
  const bool moe = type == "qwen3_moe";
  // What the device's model (calbin/MODEL.md) does not have is refused, not approximated.
  const std::string not_modelled = "not modelled by the simulator (calbin/MODEL.md)";
  if (auto r = j.only("rope_scaling", {}, "RoPE scaling is " + not_modelled); !r) {
    return tl::unexpected(r.error());
  }
  for (const char* key : {"attention_bias", "mlp_bias", "use_sliding_window"}) {
    if (auto r = j.only(key, {"false"}, "biases and sliding windows are " + not_modelled); !r) {
      return tl::unexpected(r.error());
    }
  }
  if (auto r = j.only("hidden_act", {"\"silu\""}, "only SiLU is modelled"); !r) {
    return tl::unexpected(r.error());
  }
  if (moe) {
    if (auto r = j.only("decoder_sparse_step", {"1"}, "every layer must be MoE"); !r) {
      return tl::unexpected(r.error());
    }
    if (auto r = j.only("mlp_only_layers", {"[]"}, "every layer must be MoE"); !r) {
      return tl::unexpected(r.error());
    }
  }

  ModelConfig c;
  c.architecture = type;
  // Hugging Face's default is false; Qwen3-MoE checkpoints set it true.
  if (moe) CONFIG_TRY(c.norm_topk_prob, j.boolean_or("norm_topk_prob", false));
  CONFIG_TRY(c.layers, j.count("num_hidden_layers"));
  CONFIG_TRY(c.hidden, j.count("hidden_size"));
  CONFIG_TRY(c.q_heads, j.count("num_attention_heads"));
  CONFIG_TRY(c.kv_heads, j.count_or("num_key_value_heads", c.q_heads));
  if (c.hidden % c.q_heads != 0 && !doc.contains("head_dim")) {
    return calbin::fail(path.string(), "head_dim",
                        "missing, and hidden_size " + std::to_string(c.hidden) +
                            " is not a multiple of num_attention_heads " +
                            std::to_string(c.q_heads));
  }
  CONFIG_TRY(c.head_dim, j.count_or("head_dim", c.hidden / c.q_heads));
  CONFIG_TRY(c.vocab, j.count("vocab_size"));
  if (moe) {
    CONFIG_TRY(c.ffn, j.count("moe_intermediate_size"));
    CONFIG_TRY(c.experts, j.count("num_experts"));
    CONFIG_TRY(c.active_experts, j.count("num_experts_per_tok"));
  } else {
    CONFIG_TRY(c.ffn, j.count("intermediate_size"));
  }
  CONFIG_TRY(c.tokenizer_context, j.count_or("max_position_embeddings", 32768));
  CONFIG_TRY(c.rope_theta, j.number_or("rope_theta", 10000.0));
  CONFIG_TRY(c.rms_eps, j.number_or("rms_norm_eps", 1e-6));
  CONFIG_TRY(c.tied_embeddings, j.boolean_or("tie_word_embeddings", false));
  c.chips = kDefaultConfigChips;
  c.prefill_chunk = kDefaultConfigChunk;
  c.context = std::min(kDefaultConfigContext, c.tokenizer_context);
  c.context -= c.context % c.prefill_chunk;
  c.batch = 1;
  const std::string dir = path.parent_path().filename().string();
  name_models(c, model_name(dir.empty() ? type : dir));
  return c;
}

// `quant: {experts: w8a8_dynamic | w4af16, group_size: N}`: the quant table's entries a
// functional calbin can vary (calbin/MODEL.md); every other module is fixed by MODEL.md.
calbin::Result<void> read_quant(const fs::path& path, const YAML::Node& node, ModelConfig& c) {
  if (!node.IsMap()) return calbin::fail(path.string(), "quant", "not a mapping");
  for (const auto& item : node) {
    const std::string key = item.first.as<std::string>();
    const std::string field = "quant." + key;
    const YAML::Node& value = item.second;
    const std::string shown = value.IsScalar() ? "'" + value.Scalar() + "'" : "a non-scalar";
    if (key == "experts") {
      const std::string scheme = value.IsScalar() ? value.Scalar() : "";
      if (scheme != "w8a8_dynamic" && scheme != "w4af16") {
        return calbin::fail(path.string(), field, shown + " is not w8a8_dynamic or w4af16");
      }
      c.quant.experts = scheme == "w4af16" ? calbin::Dtype::kInt4 : calbin::Dtype::kInt8;
    } else if (key == "group_size") {
      int64_t v = 0;
      if (!value.IsScalar() || !YAML::convert<int64_t>::decode(value, v) || v < 2 || v % 2 != 0 ||
          v > (1 << 20)) {
        return calbin::fail(path.string(), field, shown + " is not an even integer of 2 or more");
      }
      c.quant.group_size = static_cast<uint32_t>(v);
    } else {
      return calbin::fail(path.string(), field, "unknown key (known: experts, group_size)");
    }
  }
  return {};
}

calbin::Result<ModelConfig> read_yaml_config(const fs::path& path) {
  auto text = read_text(path);
  if (!text) return tl::unexpected(text.error());
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return calbin::fail(
        path.string(), "",
        "YAML syntax error at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) return calbin::fail(path.string(), "", "not a YAML mapping");
  ModelConfig c;
  if (const YAML::Node base = root["hf_config"]) {
    if (!base.IsScalar()) return calbin::fail(path.string(), "hf_config", "not a path");
    auto from = read_hf_config(path.parent_path() / base.as<std::string>());
    if (!from) return from;
    c = *from;
  }
  std::map<std::string, uint32_t*> counts = {
      {"layers", &c.layers},
      {"hidden", &c.hidden},
      {"q_heads", &c.q_heads},
      {"kv_heads", &c.kv_heads},
      {"head_dim", &c.head_dim},
      {"ffn", &c.ffn},
      {"experts", &c.experts},
      {"active_experts", &c.active_experts},
      {"vocab", &c.vocab},
      {"context", &c.context},
      {"batch", &c.batch},
      {"prefill_chunk", &c.prefill_chunk},
      {"chips", &c.chips},
      {"logits_tile_d0", &c.logits_tile_d0},
      {"decode_top_k", &c.decode_top_k},
      {"tokenizer_context", &c.tokenizer_context},
  };
  std::map<std::string, double*> reals = {
      {"rope_theta", &c.rope_theta}, {"rms_eps", &c.rms_eps}, {"outlier_gain", &c.outlier_gain}};
  std::string name;
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node& value = item.second;
    const std::string shown = value.IsScalar() ? "'" + value.Scalar() + "'" : "a non-scalar";
    if (key == "hf_config") continue;
    if (key == "name") {
      name = value.IsScalar() ? model_name(value.Scalar()) : "";
      if (name.empty()) {
        return calbin::fail(path.string(), "name", shown + " has no letter or digit");
      }
    } else if (const auto count = counts.find(key); count != counts.end()) {
      int64_t v = 0;
      if (!value.IsScalar() || !YAML::convert<int64_t>::decode(value, v) ||
          v < (key == "experts" || key == "active_experts" || key == "decode_top_k" ? 0 : 1) ||
          v > (1 << 30)) {
        return calbin::fail(path.string(), key, shown + " is not a positive integer");
      }
      *count->second = static_cast<uint32_t>(v);
    } else if (key == "norm_topk_prob") {
      bool v = false;
      if (!value.IsScalar() || !YAML::convert<bool>::decode(value, v)) {
        return calbin::fail(path.string(), key, shown + " is not true or false");
      }
      c.norm_topk_prob = v;
    } else if (key == "v_cache") {
      const auto dtype = value.IsScalar() ? calbin::parse_dtype(value.Scalar()) : std::nullopt;
      if (!dtype || (*dtype != calbin::Dtype::kBf16 && *dtype != calbin::Dtype::kInt8)) {
        return calbin::fail(path.string(), key, shown + " is not bf16 or int8");
      }
      c.v_cache = *dtype;
    } else if (key == "weight_init") {
      const std::string v = value.IsScalar() ? value.Scalar() : "";
      if (v != "gaussian" && v != "trained") {
        return calbin::fail(path.string(), key, shown + " is not gaussian or trained");
      }
      c.weight_init =
          v == "trained" ? ModelConfig::WeightInit::kTrained : ModelConfig::WeightInit::kGaussian;
    } else if (key == "quant") {
      if (auto ok = read_quant(path, value, c); !ok) return tl::unexpected(ok.error());
    } else if (const auto real = reals.find(key); real != reals.end()) {
      double v = 0;
      if (!value.IsScalar() || !YAML::convert<double>::decode(value, v) || !(v > 0)) {
        return calbin::fail(path.string(), key, shown + " is not a positive number");
      }
      *real->second = v;
    } else {
      std::string known = "name, hf_config, v_cache, norm_topk_prob, quant, weight_init";
      for (const auto& [k, _] : counts) known += ", " + k;
      for (const auto& [k, _] : reals) known += ", " + k;
      return calbin::fail(path.string(), key, "unknown key (known: " + known + ")");
    }
  }
  if (name.empty() && !root["hf_config"]) {
    return calbin::fail(path.string(), "name", "missing (or give hf_config)");
  }
  if (c.experts > 0) c.architecture = "qwen3_moe";
  if (c.experts == 0 && c.quant.experts != calbin::Dtype::kInt8) {
    return calbin::fail(path.string(), "quant.experts",
                        "'w4af16' but the model is dense (experts: 0); only experts take int4");
  }
  name_models(c, name.empty() ? c.calbin_version_prefix : name);
  return c;
}

}  // namespace

calbin::Result<ModelConfig> read_model_config(const fs::path& path) {
  const std::string ext = path.extension().string();
  auto config = ext == ".json" ? read_hf_config(path)
                : ext == ".yaml" || ext == ".yml"
                    ? read_yaml_config(path)
                    : calbin::fail(path.string(), "",
                                   "expected a Hugging Face config .json or the project's .yaml");
  if (!config) return config;
  if (auto checked = check_config(*config); !checked) {
    calbin::Error error = checked.error();
    error.file = path.string();
    return tl::unexpected(error);
  }
  return config;
}

}  // namespace simdev::gen
