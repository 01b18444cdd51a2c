// Parsing the Device_Create option string against the parameter table.
#include <gtest/gtest.h>

#include "simdev/device/device_config.hpp"

namespace simdev {
namespace {

TEST(DeviceConfig, DefaultsComeFromTheTable) {
  auto config = parse_device_config("");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->chips, 2u);
  EXPECT_EQ(config->dram_usable_bytes(), uint64_t{16} << 30);
  EXPECT_EQ(config->default_timeout_ms, 30000u);
  for (const ParamSpec& spec : device_params()) {
    EXPECT_EQ(config.value().*(spec.field), spec.default_value) << spec.name;
    EXPECT_FALSE(spec.description.empty()) << spec.name;
  }
}

TEST(DeviceConfig, ParsesKeysAndValues) {
  auto config = parse_device_config(" seed=7 ; dram_mib=1024;;pcie_bw_mbps=1000 ");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->seed, 7u);
  EXPECT_EQ(config->dram_mib, 1024u);
  EXPECT_EQ(config->pcie_bw_mbps, 1000u);
}

TEST(DeviceConfig, UnknownKeyNamesKeyAndValue) {
  auto config = parse_device_config("seed=1;dram_gib=4");
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(config.error().message.find("dram_gib=4"), std::string::npos) << config.error().message;
}

TEST(DeviceConfig, BadValuesAreRejected) {
  for (const char* text :
       {"seed=abc", "seed=", "seed", "dram_mib=-1", "chips=9", "chips=0", "dram_mib=12x"}) {
    auto config = parse_device_config(text);
    ASSERT_FALSE(config) << text;
    EXPECT_EQ(config.error().code, CALRT_INVALID_ARGUMENT) << text;
  }
}

}  // namespace
}  // namespace simdev
