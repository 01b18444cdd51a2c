// The corpus of broken calbins: each member is made from the good generated calbin by one
// defect, and `check` must reject it by exactly the intended check and no other.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "calbin/acceptance/checks.hpp"

namespace calbin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGoodCalbin = CALRT_TEST_CALBIN;
const fs::path kGoodService = CALRT_TEST_SERVICE_MANIFEST;

// A scratch copy of the good calbin (and service manifest) that a mutation may damage.
class Scratch {
 public:
  explicit Scratch(const std::string& name) {
    root_ = fs::temp_directory_path() /
            ("calrt-corpus-" + name + "-" +
             std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    fs::copy(kGoodCalbin, dir(), fs::copy_options::recursive);
    fs::copy_file(kGoodService, service());
  }
  ~Scratch() { fs::remove_all(root_); }

  fs::path dir() const { return root_ / "calbin"; }
  fs::path service() const { return root_ / "service.yaml"; }
  fs::path root() const { return root_; }

  json manifest() const {
    std::ifstream in(dir() / "manifest.json");
    return json::parse(in);
  }
  void write_manifest(const json& j) const { write(dir() / "manifest.json", j.dump(2)); }
  void edit(const std::function<void(json&)>& change) const {
    json j = manifest();
    change(j);
    write_manifest(j);
  }
  std::string read_text(const fs::path& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write(const fs::path& path, const std::string& text) const {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  void replace_in_service(const std::string& from, const std::string& to) const {
    std::string text = read_text(service());
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    write(service(), text.replace(at, from.size(), to));
  }

 private:
  fs::path root_;
};

json& model_of_type(json& j, const std::string& type) {
  for (json& model : j["models"]) {
    if (model["type"] == type) {
      return model;
    }
  }
  throw std::runtime_error("no model of type " + type);
}

json& reservation(json& j, const std::string& name, int chip) {
  for (json& r : j["reservations"]) {
    if (r["name"] == name && r["chip"] == chip) {
      return r;
    }
  }
  throw std::runtime_error("no reservation " + name);
}

json& file_entry(json& j, const std::string& path) {
  for (json& f : j["files"]) {
    if (f["path"] == path) {
      return f;
    }
  }
  throw std::runtime_error("no file " + path);
}

std::string first_golden_file(const json& j) {
  for (const json& f : j["files"]) {
    const std::string path = f["path"];
    if (path.rfind("golden/", 0) == 0 && path.find(".npy") != std::string::npos) {
      return path;
    }
  }
  throw std::runtime_error("no golden file");
}

// Adds a top_ids output to the decode model, in the logits' buffer (the service manifest
// names the logits by index, so they stay outputs[0]).
void add_ranked_ids(json& j, const std::vector<int64_t>& shape, const std::string& dtype) {
  json& outputs = model_of_type(j, "decode")["outputs"];
  json ids = outputs[0];
  ids["name"] = "top_ids";
  ids["role"] = "top_ids";
  ids["layout"] = {{"kind", "row_major"}};
  ids["shape"] = shape;
  ids["dtype"] = dtype;
  ids["bytes"] = shape[0] * shape[1] * (dtype == "int32" ? 4 : 2);
  outputs.push_back(ids);
}

struct Member {
  std::string name;
  std::string intended_check;
  std::function<void(const Scratch&)> damage;
};

std::vector<Member> corpus() {
  return {
      {"malformed_json", "manifest.parse",
       [](const Scratch& s) {
         const std::string text = s.read_text(s.dir() / "manifest.json");
         s.write(s.dir() / "manifest.json", text.substr(0, text.size() / 2));
       }},
      {"duplicate_json_key", "manifest.parse",
       [](const Scratch& s) {
         std::string text = s.read_text(s.dir() / "manifest.json");
         const size_t at = text.find("\"vocab\":");
         ASSERT_NE(at, std::string::npos);
         s.write(s.dir() / "manifest.json", text.insert(at, "\"vocab\": 151936, "));
       }},
      {"functional_without_weights", "params.in_file",
       [](const Scratch& s) { s.edit([](json& j) { j["weights"] = json::array(); }); }},
      {"tensor_bigger_than_buffer", "manifest.parse",
       [](const Scratch& s) {
         s.edit([](json& j) { model_of_type(j, "decode")["outputs"][0]["bytes"] = 16; });
       }},
      {"path_traversal", "files.confined",
       [](const Scratch& s) {
         s.write(s.root() / "outside.bin", "x");
         s.edit([](json& j) {
           j["files"].push_back({{"path", "../outside.bin"}, {"size", 1}, {"sha256", "00"}});
         });
       }},
      {"symlink_outside", "files.confined",
       [](const Scratch& s) {
         s.write(s.root() / "outside.bin", "x");
         fs::create_symlink(s.root() / "outside.bin", s.dir() / "link.bin");
         s.edit([](json& j) {
           j["files"].push_back({{"path", "link.bin"}, {"size", 1}, {"sha256", "00"}});
         });
       }},
      {"missing_file", "files.present",
       [](const Scratch& s) { fs::remove(s.dir() / first_golden_file(s.manifest())); }},
      {"truncated_param_block", "files.size",
       [](const Scratch& s) {
         const fs::path p = s.dir() / "param_blk1.bin";
         fs::resize_file(p, fs::file_size(p) / 2);
       }},
      {"corrupt_param_block", "files.sha256",
       [](const Scratch& s) {
         const fs::path p = s.dir() / "param_blk2.bin";
         std::string bytes = s.read_text(p);
         bytes[bytes.size() / 3] = static_cast<char>(bytes[bytes.size() / 3] ^ 0x5a);
         s.write(p, bytes);
       }},
      {"unknown_model_type", "models.types",
       [](const Scratch& s) { s.edit([](json& j) { j["models"][0]["type"] = "embedding"; }); }},
      {"prefill_labelled_decode", "models.metadata",
       [](const Scratch& s) {
         s.edit([](json& j) { model_of_type(j, "prefill")["metadata_type"] = "llm_decode"; });
       }},
      {"model_name_substring_of_another", "models.names",
       [](const Scratch& s) {
         s.edit([](json& j) {
           // A kv_update model whose name extends the decode model's: a substring lookup
           // for the decode model would be ambiguous.
           json extra = model_of_type(j, "decode");
           extra["name"] = extra["name"].get<std::string>() + "_v2";
           extra["type"] = "kv_update";
           extra["metadata_type"] = "llm_kv_update";
           j["models"].push_back(extra);
         });
       }},
      {"token_shape_not_chunk", "llm.shapes",
       [](const Scratch& s) {
         s.edit([](json& j) {
           json& tokens = model_of_type(j, "prefill")["inputs"][0];
           tokens["shape"] = {1, tokens["shape"][1].get<int>() / 2};
         });
       }},
      {"param_block_on_missing_chip", "chips.mask",
       [](const Scratch& s) { s.edit([](json& j) { j["param_blocks"][1]["chip_mask"] = 4; }); }},
      // Each of these passed `check` before chips.mask looked past the param blocks.
      {"weight_shard_on_missing_chip", "chips.mask",
       [](const Scratch& s) {
         s.edit([](json& j) { j["weights"][3]["shard"]["chip_mask"] = 4; });
       }},
      {"input_tensor_on_missing_chip", "chips.mask",
       [](const Scratch& s) {
         s.edit([](json& j) { model_of_type(j, "prefill")["inputs"][0]["chip_mask"] = 7; });
       }},
      // A ranked decode's ids (calrt.h, CALRT_ROLE_TOP_IDS) must be int32, [batch, K].
      {"ranked_ids_not_int32", "llm.shapes",
       [](const Scratch& s) { s.edit([](json& j) {
                                add_ranked_ids(j, {1, 8}, "bf16");
                              }); }},
      {"ranked_rows_not_batch", "llm.shapes",
       [](const Scratch& s) { s.edit([](json& j) {
                                add_ranked_ids(j, {2, 8}, "int32");
                              }); }},
      {"logits_on_no_chip", "chips.mask",
       [](const Scratch& s) {
         s.edit([](json& j) { model_of_type(j, "decode")["outputs"][0]["chip_mask"] = 0; });
       }},
      // Each of these passed `check` before golden.index existed.
      {"golden_index_missing", "golden.index",
       [](const Scratch& s) {
         s.edit([](json& j) { j["golden"]["index"] = "golden/other.json"; });
       }},
      {"golden_index_escapes", "golden.index",
       [](const Scratch& s) {
         s.edit([](json& j) { j["golden"]["index"] = "../golden/golden.json"; });
       }},
      {"golden_index_is_a_directory", "golden.index",
       [](const Scratch& s) { s.edit([](json& j) { j["golden"]["index"] = "golden"; }); }},
      {"reservation_overflows_64_bits", "reservations.bounds",
       [](const Scratch& s) {
         s.edit([](json& j) { reservation(j, "guard", 1)["base"] = UINT64_MAX - 4095; });
       }},
      {"overlapping_reservations", "reservations.overlap",
       [](const Scratch& s) {
         s.edit([](json& j) {
           reservation(j, "guard", 0)["base"] = reservation(j, "params", 0)["base"];
         });
       }},
      {"tensor_leaves_reservation", "tensors.in_reservation",
       [](const Scratch& s) {
         s.edit([](json& j) {
           const json& io = reservation(j, "io", 0);
           const uint64_t end = io["base"].get<uint64_t>() + io["size"]["value"].get<uint64_t>();
           model_of_type(j, "decode")["outputs"][0]["address"] = end - 16;
         });
       }},
      {"param_offset_past_file", "params.in_file",
       [](const Scratch& s) {
         s.edit([](json& j) {
           json& w = j["weights"][3];
           w["offset"] = file_entry(j, w["file"])["size"];
         });
       }},
      {"param_offset_overflows", "params.in_file",
       [](const Scratch& s) {
         s.edit([](json& j) { j["weights"][1]["offset"] = UINT64_MAX - 1; });
       }},
      {"ping_pong_alias", "pingpong.aliasing",
       [](const Scratch& s) {
         s.edit([](json& j) {
           json& model = model_of_type(j, "decode");
           model["ping_pong"][1]["input_addresses"] = model["ping_pong"][0]["input_addresses"];
         });
       }},
      {"device_memory_16777216_MB", "memory.unit",
       [](const Scratch& s) {
         s.edit([](json& j) {
           j["device_memory_required"] = {{"value", 16777216}, {"unit", "MB"}};
         });
       }},
      {"device_memory_without_unit", "memory.unit",
       [](const Scratch& s) {
         s.edit([](json& j) { j["device_memory_required"]["unit"] = "units"; });
       }},
      {"workspace_beyond_dram", "memory.capacity",
       [](const Scratch& s) {
         s.edit(
             [](json& j) { model_of_type(j, "prefill")["workspace_bytes"] = uint64_t{32} << 30; });
       }},
      {"malformed_service_manifest", "service.parse",
       [](const Scratch& s) { s.write(s.service(), "schema: [1\n"); }},
      {"duplicate_service_key", "service.parse",
       [](const Scratch& s) { s.replace_in_service("vocab: 1000", "vocab: 1000\nvocab: 151936"); }},
      {"csr_index_out_of_range", "service.tensors",
       [](const Scratch& s) {
         s.replace_in_service("current: cur_seq_len[0]", "current: cur_seq_len[7]");
       }},
      {"substring_only_model_name", "service.models",
       [](const Scratch& s) { s.replace_in_service("_prefill_c256", "_prefill"); }},
      {"vocab_mismatch", "service.dimensions",
       [](const Scratch& s) { s.replace_in_service("vocab: 1000", "vocab: 151936"); }},
      {"chip_mask_mismatch", "service.chip_mask",
       [](const Scratch& s) { s.replace_in_service("chip_mask: 3", "chip_mask: 1"); }},
      {"logits_dtype_mismatch", "service.dtypes",
       [](const Scratch& s) { s.replace_in_service("logits_dtype: bf16", "logits_dtype: f32"); }},
      {"token_index_out_of_range", "service.tensors",
       [](const Scratch& s) { s.replace_in_service("token: inputs[0]", "token: inputs[7]"); }},
      {"runtime_abi_mismatch", "service.versions",
       [](const Scratch& s) { s.replace_in_service("runtime_abi: 0.7.6", "runtime_abi: 0.8.0"); }},
  };
}

CheckReport check(const Scratch& s) {
  CheckOptions options;
  options.calbin_dir = s.dir();
  options.service_manifest = s.service();
  return run_checks(options);
}

std::string describe(const CheckReport& report) {
  std::string text;
  for (const CheckResult& c : report.checks) {
    text += std::string(to_string(c.status)) + " " + c.id + "\n";
    for (const std::string& m : c.messages) {
      text += "    " + m + "\n";
    }
  }
  return text;
}

TEST(Corpus, TheGoodCalbinPassesEveryCheck) {
  Scratch s("good");
  const CheckReport report = check(s);
  EXPECT_TRUE(report.passed()) << describe(report);
  for (const CheckResult& c : report.checks) {
    EXPECT_EQ(c.status, CheckStatus::kPass) << describe(report);
  }
  EXPECT_EQ(report.checks.size(), check_catalog().size());
}

TEST(Corpus, CoversEveryCheckAtLeastOnce) {
  std::set<std::string> covered;
  for (const Member& m : corpus()) {
    covered.insert(m.intended_check);
  }
  for (const auto& [id, title] : check_catalog()) {
    EXPECT_TRUE(covered.count(id)) << "no corpus member for " << id;
  }
  EXPECT_GE(corpus().size(), 20u);
}

// gtest would otherwise print the parameter as raw bytes.
void PrintTo(const Member& member, std::ostream* out) { *out << member.name; }

class CorpusMember : public ::testing::TestWithParam<Member> {};

TEST_P(CorpusMember, FailsExactlyTheIntendedCheck) {
  const Member& member = GetParam();
  Scratch s(member.name);
  member.damage(s);
  const CheckReport report = check(s);
  EXPECT_FALSE(report.passed());
  EXPECT_EQ(report.failed_ids(), std::vector<std::string>{member.intended_check})
      << describe(report);
  const CheckResult* failed = report.find(member.intended_check);
  ASSERT_NE(failed, nullptr);
  ASSERT_FALSE(failed->messages.empty());
}

INSTANTIATE_TEST_SUITE_P(Broken, CorpusMember, ::testing::ValuesIn(corpus()),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace calbin
