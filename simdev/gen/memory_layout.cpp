#include "simdev/gen/memory_layout.hpp"

#include <algorithm>
#include <string>

namespace simdev::gen {
namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Lays both slots of every model out back to back; the descriptors carry the ping address.
uint64_t assign_io(uint64_t io_base, std::vector<calbin::Model>& models) {
  uint64_t cursor = io_base;
  auto take = [&cursor](uint64_t bytes) {
    const uint64_t address = align_up(cursor, kIoAlignment);
    cursor = address + bytes;
    return address;
  };
  for (calbin::Model& model : models) {
    for (calbin::PingPongSlot& slot : model.ping_pong) {
      slot.input_addresses.clear();
      slot.output_addresses.clear();
      for (const calbin::TensorDesc& input : model.inputs) {
        slot.input_addresses.push_back(take(input.bytes));
      }
      for (const calbin::TensorDesc& output : model.outputs) {
        slot.output_addresses.push_back(take(output.bytes));
      }
    }
    for (size_t i = 0; i < model.inputs.size(); ++i) {
      model.inputs[i].address = model.ping_pong.at(0).input_addresses[i];
    }
    for (size_t i = 0; i < model.outputs.size(); ++i) {
      model.outputs[i].address = model.ping_pong.at(0).output_addresses[i];
    }
  }
  return align_up(cursor, kIoAlignment) - io_base;
}

// Each model's CSRs are 8-byte registers at the start of the command region.
void assign_csrs(uint64_t command_base, std::vector<calbin::Model>& models) {
  uint64_t address = command_base;
  for (calbin::Model& model : models) {
    for (calbin::Csr& csr : model.csrs) {
      csr.address = address;
      address += 8;
    }
  }
}

}  // namespace

uint64_t kv_cache_bytes_per_chip(const ModelConfig& c) {
  constexpr uint64_t kBf16Bytes = 2;
  return uint64_t{c.layers} * (c.kv_heads / c.chips) * 2 * c.head_dim * c.context * c.batch *
         kBf16Bytes;
}

calbin::Result<MemoryPlan> plan_memory(const ModelConfig& config, uint64_t param_bytes,
                                       std::vector<calbin::Model>& models) {
  uint64_t workspace = 0;
  for (const calbin::Model& model : models) {
    workspace = std::max(workspace, model.workspace_bytes);
  }
  struct Region {
    const char* name;
    uint64_t bytes;
  };
  std::vector<Region> regions = {
      {"params", param_bytes},    {"kv_cache", kv_cache_bytes_per_chip(config)},
      {"workspace", workspace},   {"io", 0},
      {"command", kCommandBytes}, {"guard", kGuardBytes}};
  std::vector<uint64_t> bases;
  uint64_t cursor = 0;
  for (Region& region : regions) {
    bases.push_back(cursor);
    if (std::string_view(region.name) == "io") {
      region.bytes = assign_io(cursor, models);
    } else if (std::string_view(region.name) == "command") {
      assign_csrs(cursor, models);
    }
    cursor = align_up(cursor + region.bytes, kReservationAlignment);
  }
  MemoryPlan plan;
  for (uint32_t chip = 0; chip < config.chips; ++chip) {
    for (size_t i = 0; i < regions.size(); ++i) {
      plan.reservations.push_back({regions[i].name, chip, bases[i], {regions[i].bytes, "B"}});
    }
  }
  constexpr uint64_t kMiB = 1024 * 1024;
  plan.device_memory_required = {(cursor + kMiB - 1) / kMiB, "MiB"};
  if (plan.device_memory_required.value == 0) {
    return calbin::fail("preset", "device_memory_required", "the memory plan is empty");
  }
  return plan;
}

}  // namespace simdev::gen
