// CFG: configure and memory accounting. abi/CONFORMANCE.md#cfg-configure-and-memory-accounting
#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "abi/calrt_ext.hpp"
#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

std::vector<uint64_t> dram_used(const calrt::Device& device, uint32_t chips) {
  std::vector<uint64_t> used;
  for (uint32_t chip = 0; chip < chips; ++chip) {
    const calrt::ChipStatus status = device.chip_status(chip);
    require(status.dram_used_bytes <= status.dram_total_bytes,
            fmt::format("chip {}: dram_used_bytes {} exceeds dram_total_bytes {}", chip,
                        status.dram_used_bytes, status.dram_total_bytes));
    used.push_back(status.dram_used_bytes);
  }
  return used;
}

void cfg_configure(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::calbin);
  const calrt::ConfigureResult result = f.calbin.configure(kClauseWait);
  const calrt::DeviceStatus status = f.device.status();
  expect_equal(result.memory_used_bytes.size(), status.chip_count, "configure chip_count");
  for (uint32_t chip = 0; chip < result.memory_used_bytes.size(); ++chip) {
    if ((ctx.manifest.chip_mask >> chip) & 1u) {
      require(result.memory_used_bytes[chip] > 0,
              fmt::format("configure reports no memory used on chip {} of the chip mask", chip));
    }
  }
  require(f.calbin.info().configured, "Calbin_GetInfo says not configured after configure");
  require(status.state == calrt::DeviceState::configured,
          fmt::format("device is {} after configure, expected CONFIGURED",
                      calrt::to_string(status.state)));
}

void cfg_memory(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::calbin);
  const uint32_t chips = f.device.status().chip_count;
  const std::vector<uint64_t> before = dram_used(f.device, chips);
  const calrt::ConfigureResult result = f.calbin.configure(kClauseWait);
  const std::vector<uint64_t> after = dram_used(f.device, chips);
  for (uint32_t chip = 0; chip < chips && chip < result.memory_used_bytes.size(); ++chip) {
    require(after[chip] - before[chip] == result.memory_used_bytes[chip],
            fmt::format("chip {}: dram_used_bytes grew by {}, configure reported {}", chip,
                        after[chip] - before[chip], result.memory_used_bytes[chip]));
  }
  f.calbin.destroy();
  const std::vector<uint64_t> released = dram_used(f.device, chips);
  require(released == before, "dram_used_bytes did not fall back after Calbin_Destroy");
  const calrt::DeviceState state = f.device.status().state;
  require(state == calrt::DeviceState::open,
          fmt::format("device is {} after destroying its only calbin, expected OPEN",
                      calrt::to_string(state)));
}

void cfg_twice(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  const uint32_t chips = f.device.status().chip_count;
  const std::vector<uint64_t> before = dram_used(f.device, chips);
  auto args = args_of<Calrt_Calbin_Configure_Args>();
  args.calbin = f.calbin.get();
  args.timeout_ns = kClauseWaitNs;
  expect_code(CONF_CALL(ctx, Calbin_Configure, args), CALRT_WRONG_STATE,
              "Calbin_Configure of a configured calbin");
  require(dram_used(f.device, chips) == before, "a refused configure changed dram_used_bytes");
}

void cfg_not_configured(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::calbin);
  const std::string name = ctx.manifest.models.front().name;
  auto buffer = args_of<Calrt_Buffer_Create_Args>();
  buffer.calbin = f.calbin.get();
  buffer.model_name = name.c_str();
  buffer.direction = CALRT_INPUT;
  expect_code(CONF_CALL(ctx, Buffer_Create, buffer), CALRT_NOT_CONFIGURED,
              "Buffer_Create before configure");
  auto kv = args_of<Calrt_Kv_Allocate_Args>();
  kv.calbin = f.calbin.get();
  kv.capacity_tokens = 1;
  expect_code(CONF_CALL(ctx, Kv_Allocate, kv), CALRT_NOT_CONFIGURED,
              "Kv_Allocate before configure");
  auto capacity = args_of<Calrt_Kv_Capacity_Args>();
  capacity.calbin = f.calbin.get();
  expect_code(CONF_CALL(ctx, Kv_Capacity, capacity), CALRT_NOT_CONFIGURED,
              "Kv_Capacity before configure");
}

// The device time configure reports is some time, and no more than the device's clock moved
// during the call (when the runtime offers its clock): 0 is no answer, and a figure larger
// than the clock's own advance cannot be device time.
void cfg_configure_time(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::calbin);
  const calrt::DeviceClock clock = calrt::DeviceClock::of(f.device);
  const std::chrono::nanoseconds before = clock ? clock.now() : std::chrono::nanoseconds(0);
  const calrt::ConfigureResult result = f.calbin.configure(kClauseWait);
  const std::chrono::nanoseconds after = clock ? clock.now() : std::chrono::nanoseconds(0);
  require(result.configure_time.count() > 0, "Calbin_Configure reports configure_time_ns 0");
  if (clock) {
    require(result.configure_time <= after - before,
            fmt::format("Calbin_Configure reports {} ns, but the device clock moved {} ns during "
                        "the call",
                        result.configure_time.count(), (after - before).count()));
  }
}

}  // namespace

std::vector<Clause> clauses_cfg() {
  return {
      {"CFG.1", "CFG", "configure reports time and memory", cfg_configure},
      {"CFG.2", "CFG", "memory accounting", cfg_memory},
      {"CFG.3", "CFG", "configure twice", cfg_twice},
      {"CFG.4", "CFG", "not configured", cfg_not_configured},
      {"CFG.5", "CFG", "configure time is plausible", cfg_configure_time},
  };
}

}  // namespace runner
