// The device config: the parameter table, the Device_Create option string, the YAML config
// file and its shipped default, to_yaml and the derived rates.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "simdev/device/timing/device_config.hpp"
#include "tests/simdev/device/text_match.hpp"

namespace simdev {
namespace {

namespace fs = std::filesystem;

const fs::path kShippedYaml = fs::path(SIMDEV_CONFIG_DIR) / "calculet-default.yaml";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A scratch file per test process; removed with the directory at exit.
class ConfigFiles : public ::testing::Test {
 protected:
  static const fs::path& dir() {
    static const fs::path* const path = [] {
      auto* p = new fs::path(fs::temp_directory_path() /
                             ("device_config_test-" + std::to_string(::getpid())));
      fs::create_directories(*p);
      std::atexit([] {
        std::error_code ignored;
        fs::remove_all(dir(), ignored);
      });
      return p;
    }();
    return *path;
  }

  fs::path write(const std::string& name, const std::string& text) {
    const fs::path path = dir() / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

TEST(DeviceConfig, TableDefaultsAreTheStructDefaults) {
  auto parsed = parse_device_config("");
  ASSERT_TRUE(parsed) << parsed.error().message;
  const DeviceConfig built_in;
  EXPECT_EQ(*parsed, built_in);
  std::set<std::string_view> names;
  for (const ParamSpec& spec : device_params()) {
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate " << spec.name;
    EXPECT_EQ(spec.get(built_in), spec.default_value) << spec.name;
    EXPECT_GE(spec.default_value, spec.min_value) << spec.name;
    EXPECT_LE(spec.default_value, spec.max_value) << spec.name;
    EXPECT_FALSE(spec.description.empty()) << spec.name;
    EXPECT_TRUE(spec.is_enum() || !spec.unit.empty() || spec.name == "seed") << spec.name;
    EXPECT_NE(spec.tag, ParamTag::kMeasured) << spec.name << ": nothing is calibrated yet";
    EXPECT_EQ(find_device_param(spec.name), &spec);
  }
  EXPECT_EQ(built_in.clock, ClockMode::kVirtual);
  EXPECT_EQ(built_in.dram_usable_bytes(), uint64_t{16} << 30);
  EXPECT_EQ(built_in.dram_bw_mbps, 400000u);
  // The names other device code reads.
  EXPECT_EQ(built_in.chips, 2u);
  EXPECT_EQ(built_in.default_timeout_ms, 30000u);
  EXPECT_EQ(built_in.job_watchdog_ms, 10000u);
  EXPECT_TRUE(parse_device_config("job_watchdog_ms=17179869184"));  // 2^34 ms: the bound
  EXPECT_EQ(built_in.submit_overhead_ns, 20000u);
  EXPECT_EQ(built_in.pcie_latency_ns, 2000u);
  EXPECT_EQ(built_in.seed, 1u);
}

TEST(DeviceConfig, DerivedRates) {
  const DeviceConfig c;
  // 16 cores x 4096 INT8 MACs x 2 ops x 2 GHz = 262.144 TOPS; BF16 half of it.
  EXPECT_EQ(c.peak_int8_ops_per_s().per_second(), uint64_t{262144} * 1000000000);
  EXPECT_EQ(c.peak_bf16_ops_per_s().per_second(), uint64_t{131072} * 1000000000);
  EXPECT_EQ(c.dram_bytes_per_s().per_second(), uint64_t{400} * 1000000000);
  // Gen4 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.507... GB/s; 80 % of it achieved.
  EXPECT_EQ(c.pcie_link_bytes_per_s().per_second(), 31507692307u);
  EXPECT_EQ(c.pcie_bytes_per_s().per_second(), 25206153846u);
  DeviceConfig gen3 = c;
  gen3.pcie_gen = 3;
  gen3.pcie_lanes = 8;
  EXPECT_EQ(gen3.pcie_link_bytes_per_s().per_second(), 7876923076u);
  DeviceConfig gen5 = c;
  gen5.pcie_gen = 5;
  EXPECT_EQ(gen5.pcie_link_bytes_per_s().per_second(), 63015384615u);
  EXPECT_EQ(c.sram_bytes_per_chip(), uint64_t{32} << 20);
}

TEST(DeviceConfig, ParsesKeysAndValues) {
  auto config =
      parse_device_config(" seed=7 ; dram_mib=1024;;pcie_gen=5; clock = paced;pcie_lanes=8 ");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->seed, 7u);
  EXPECT_EQ(config->dram_mib, 1024u);
  EXPECT_EQ(config->pcie_gen, 5u);
  EXPECT_EQ(config->pcie_lanes, 8u);
  EXPECT_EQ(config->clock, ClockMode::kPaced);
  EXPECT_EQ(to_string(config->clock), "paced");
}

TEST(DeviceConfig, UnknownKeyNamesKeyAndValue) {
  auto config = parse_device_config("seed=1;dram_gib=4");
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code, CALRT_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(config.error().message, "dram_gib=4")) << config.error().message;
  // The removed throughput keys are unknown now; their replacements are listed.
  auto old = parse_device_config("peak_int8_gops=1");
  ASSERT_FALSE(old);
  EXPECT_TRUE(contains(old.error().message, "int8_macs_per_cycle_per_core")) << old.error().message;
}

TEST(DeviceConfig, BadValuesAreRejectedNamingKeyAndValue) {
  for (const char* text :
       {"seed=abc", "seed=", "seed", "dram_mib=-1", "chips=9", "chips=0", "dram_mib=12x",
        "pcie_gen=6", "pcie_gen=2", "pcie_lanes=12", "pcie_lanes=32", "clock=fast",
        "compute_efficiency_pct=0", "compute_efficiency_pct=101", "seed=1;seed=2",
        "seed=99999999999999999999", "dram_mib=0x10", "config=", "config",
        // 0 would end every job at once; above 2^34 ms the watchdog overflows picoseconds.
        "job_watchdog_ms=0", "job_watchdog_ms=17179869185"}) {
    auto config = parse_device_config(text);
    ASSERT_FALSE(config) << text;
    EXPECT_EQ(config.error().code, CALRT_INVALID_ARGUMENT) << text;
    const std::string key = std::string(text).substr(0, std::string(text).find('='));
    EXPECT_TRUE(contains(config.error().message, key)) << text << ": " << config.error().message;
  }
  auto lanes = parse_device_config("pcie_lanes=12");
  EXPECT_TRUE(contains(lanes.error().message, "pcie_lanes=12")) << lanes.error().message;
  auto clock = parse_device_config("clock=fast");
  EXPECT_TRUE(contains(clock.error().message, "virtual, paced")) << clock.error().message;
}

TEST(DeviceConfig, DescribeListsEveryParameterAndTheDerivedRates) {
  const std::string text = describe(DeviceConfig{});
  for (const ParamSpec& spec : device_params()) {
    EXPECT_TRUE(contains(text, std::string(spec.name) + "=")) << spec.name;
  }
  EXPECT_TRUE(contains(text, "clock=virtual (assumed)"));
  EXPECT_TRUE(contains(text, "chips=2 chips (spec)"));
  EXPECT_TRUE(contains(text, "peak_int8_ops_per_s=262144000000000"));
  EXPECT_TRUE(contains(text, "pcie_bytes_per_s=25206153846"));
}

// The shipped file is the documentation of the defaults: it must hold exactly the built-in
// values, every table entry in its section, and be what to_yaml writes (comments included).
TEST(DeviceConfigFile, ShippedDefaultEqualsTheBuiltInDefaults) {
  auto loaded = load_device_config_file(kShippedYaml);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(*loaded, DeviceConfig{});
  const YAML::Node root = YAML::LoadFile(kShippedYaml.string());
  EXPECT_EQ(root["schema"].as<std::string>(), kDeviceConfigSchema);
  for (const ParamSpec& spec : device_params()) {
    const YAML::Node node = spec.section.empty()
                                ? root[std::string(spec.name)]
                                : root[std::string(spec.section)][std::string(spec.name)];
    ASSERT_TRUE(node.IsScalar()) << spec.section << "." << spec.name << " missing";
    EXPECT_EQ(node.Scalar(), spec.format(DeviceConfig{})) << spec.name;
  }
  EXPECT_EQ(read_text(kShippedYaml), to_yaml(DeviceConfig{}))
      << kShippedYaml << " drifted from the table; regenerate it from to_yaml(DeviceConfig{})";
}

// Every parameter has a row in the README table with its unit, default and tag.
TEST(DeviceConfigFile, ReadmeTableListsEveryParameter) {
  const std::string readme = read_text(SIMDEV_DEVICE_README);
  ASSERT_FALSE(readme.empty());
  for (const ParamSpec& spec : device_params()) {
    const std::string row = "| " + std::string(spec.name) + " | " + std::string(spec.unit) + " | " +
                            spec.format(DeviceConfig{}) + " | " + std::string(to_string(spec.tag)) +
                            " |";
    EXPECT_TRUE(contains(readme, row)) << "README.md lacks the row " << row;
  }
}

TEST_F(ConfigFiles, ToYamlRoundTripsThroughTheLoader) {
  DeviceConfig config;
  config.clock = ClockMode::kPaced;
  config.seed = 18446744073709551615u;
  config.chips = 1;
  config.compute_cores = 8;
  config.pcie_gen = 5;
  config.pcie_lanes = 4;
  config.dram_mib = 8192;
  config.op_overhead_ns = 0;
  config.d2d_bw_mbps = 123456;
  const fs::path path = write("roundtrip.yaml", to_yaml(config));
  auto loaded = load_device_config_file(path);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(*loaded, config);
  EXPECT_EQ(to_yaml(*loaded), to_yaml(config));
}

TEST_F(ConfigFiles, ConfigKeyLoadsTheFileThenTheOtherKeysOverride) {
  const fs::path path = write("partial.yaml",
                              "schema: simdev-device-config/1\n"
                              "seed: 5\n"
                              "pcie:\n"
                              "  pcie_gen: 3\n"
                              "dram:\n"
                              "  dram_mib: 2048\n");
  // Wherever config= stands, the file comes first and the other keys win.
  for (const std::string& text :
       {"config=" + path.string() + ";seed=9", "seed=9; config = " + path.string()}) {
    auto config = parse_device_config(text);
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_EQ(config->seed, 9u) << text;
    EXPECT_EQ(config->pcie_gen, 3u) << text;
    EXPECT_EQ(config->dram_mib, 2048u) << text;
    EXPECT_EQ(config->pcie_lanes, 16u) << text << ": keys the file omits keep their defaults";
  }
  auto shipped = parse_device_config("config=" + kShippedYaml.string());
  ASSERT_TRUE(shipped) << shipped.error().message;
  EXPECT_EQ(*shipped, DeviceConfig{});
  auto twice = parse_device_config("config=" + path.string() + ";config=" + path.string());
  ASSERT_FALSE(twice);
  EXPECT_TRUE(contains(twice.error().message, "repeated")) << twice.error().message;
}

struct BadFile {
  const char* name;
  const char* text;
  std::vector<std::string> expect;  // parts the message must contain besides the path
};

TEST_F(ConfigFiles, FileErrorsNameFileLineKeyAndValue) {
  const std::vector<BadFile> cases = {
      {"syntax.yaml",
       "schema: simdev-device-config/1\npcie: [1, 2\nseed: 3\n",
       {":3:", "YAML syntax"}},
      {"unknown.yaml",
       "schema: simdev-device-config/1\nwarp_speed: 9\n",
       {":2:", "warp_speed", "\"9\"", "unknown key"}},
      {"misplaced.yaml",
       "schema: simdev-device-config/1\npcie:\n  dram_mib: 4\n",
       {":3:", "pcie.dram_mib", "section dram"}},
      {"type.yaml",
       "schema: simdev-device-config/1\ndram:\n  dram_mib: lots\n",
       {":3:", "dram.dram_mib", "\"lots\"", "unsigned decimal"}},
      {"map.yaml",
       "schema: simdev-device-config/1\ndram:\n  dram_mib: {a: 1}\n",
       {":3:", "dram.dram_mib", "a mapping"}},
      {"range.yaml",
       "schema: simdev-device-config/1\npcie:\n  pcie_gen: 6\n",
       {":3:", "pcie.pcie_gen", "\"6\"", "[3, 5]"}},
      {"duplicate.yaml",
       "schema: simdev-device-config/1\nd2d:\n  d2d_bw_mbps: 1\n  d2d_bw_mbps: 2\n",
       {":4:", "d2d.d2d_bw_mbps", "repeated key", "\"2\""}},
      {"section.yaml",
       "schema: simdev-device-config/1\nd2d:\n  d2d_bw_mbps: 1\nd2d:\n  d2d_latency_ns: 2\n",
       {":4:", "d2d", "repeated section"}},
      {"schema.yaml", "schema: simdev-device-config/2\n", {"schema", "simdev-device-config/2"}},
      {"noschema.yaml", "seed: 1\n", {"schema", "missing"}},
      {"enum.yaml", "schema: simdev-device-config/1\nclock: fast\n", {":2:", "clock", "\"fast\""}},
      {"lanes.yaml", "schema: simdev-device-config/1\npcie:\n  pcie_lanes: 6\n", {"pcie_lanes=6"}},
      {"empty.yaml", "", {"mapping"}},
      {"null.yaml", "schema: simdev-device-config/1\nseed:\n", {":2:", "seed", "nothing"}},
  };
  for (const BadFile& bad : cases) {
    const fs::path path = write(bad.name, bad.text);
    auto loaded = load_device_config_file(path);
    ASSERT_FALSE(loaded) << bad.name;
    EXPECT_EQ(loaded.error().code, CALRT_INVALID_ARGUMENT) << bad.name;
    const std::string& message = loaded.error().message;
    EXPECT_TRUE(contains(message, path.string())) << bad.name << ": " << message;
    for (const std::string& part : bad.expect) {
      EXPECT_TRUE(contains(message, part)) << bad.name << ": \"" << part << "\" not in " << message;
    }
    // Through Device_Create's string the message also names the config key and path.
    auto via_string = parse_device_config("config=" + path.string());
    ASSERT_FALSE(via_string) << bad.name;
    EXPECT_TRUE(contains(via_string.error().message, "config=" + path.string()))
        << via_string.error().message;
  }
}

TEST_F(ConfigFiles, MissingAndUnreadableFilesAreInvalidArguments) {
  const fs::path missing = dir() / "does-not-exist.yaml";
  auto loaded = load_device_config_file(missing);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, CALRT_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(loaded.error().message, missing.string())) << loaded.error().message;
  EXPECT_TRUE(contains(loaded.error().message, "no such file")) << loaded.error().message;
  auto directory = load_device_config_file(dir());
  ASSERT_FALSE(directory);
  EXPECT_TRUE(contains(directory.error().message, "not a regular file"))
      << directory.error().message;
  auto via_string = parse_device_config("seed=2;config=" + missing.string());
  ASSERT_FALSE(via_string);
  EXPECT_TRUE(contains(via_string.error().message, missing.string()));
}

}  // namespace
}  // namespace simdev
