// Entry points: opening, inspecting and resetting devices.
#include <cstring>

#include "simdev/runtime/device_access.hpp"
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"

namespace simdev::runtime {
namespace {

constexpr char kRuntimeVersion[] = "0.9.0-sim";
constexpr char kFirmwareVersion[] = "sim-fw-0.9.0";
constexpr char kDriverVersion[] = "sim-drv-0.9.0";
constexpr char kDeviceName[] = "calculet-sim";

Status open_device(Calrt_Device_Create_Args* args) {
  const int64_t kind = raw_enum(args->kind);
  if (kind == CALRT_DEVICE_PCIE) {
    return fail(CALRT_NOT_FOUND, "no PCIe card at index " + std::to_string(args->index) +
                                     ": this runtime is the simulator (use CALRT_DEVICE_SIM)");
  }
  if (kind != CALRT_DEVICE_SIM) {
    return fail(CALRT_INVALID_ARGUMENT, "device kind " + std::to_string(kind) + " is unknown");
  }
  auto device = Device::create(args->config == nullptr ? "" : args->config);
  if (!device) {
    return tl::unexpected(device.error());
  }
  auto registered = register_device(std::move(*device));
  if (!registered) {
    return fail(CALRT_OUT_OF_RANGE,
                "too many open devices (limit " + std::to_string(kMaxDevices) + ")");
  }
  const ObjectId id = registered->first;
  args->device = to_handle<CalrtDevice>(HandleKind::kDevice, id.index, id);
  return {};
}

Status close_device(CalrtDevice* handle) {
  const auto decoded = decode_handle(reinterpret_cast<uintptr_t>(handle), HandleKind::kDevice);
  auto entry =
      decoded ? unregister_device(decoded->second.index, decoded->second.generation) : nullptr;
  if (!entry) {
    return fail(CALRT_INVALID_HANDLE,
                "device handle " + handle_text(handle) + " was destroyed or never issued");
  }
  std::unique_ptr<Device> device;
  {
    std::unique_lock lock(entry->mutex);
    // Paced waits sleeping on this device leave first; each wakes at once on the notify,
    // so the bound below is a safety net, not a delay.
    entry->closing = true;
    entry->wake.notify_all();
    entry->wake.wait_for(lock, std::chrono::seconds(10), [&] { return entry->sleepers == 0; });
    device = std::move(entry->device);  // in-flight jobs are simply dropped: bounded
  }
  return {};
}

}  // namespace

CalrtError* device_create(Calrt_Device_Create_Args* args) {
  return guarded(args, CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE, "Calrt_Device_Create_Args",
                 [&] { return open_device(args); });
}

CalrtError* device_destroy(Calrt_Device_Destroy_Args* args) {
  return guarded(args, CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Device_Destroy_Args",
                 [&] { return close_device(args->device); });
}

CalrtError* device_status(Calrt_Device_Status_Args* args) {
  return guarded(args, CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE, "Calrt_Device_Status_Args", [&] {
    return with_handle(args->device, HandleKind::kDevice, "device",
                       [&](Device& device, ObjectId, uint32_t) -> Status {
                         const DeviceStatus s = device.status();
                         args->state = s.state;
                         args->runtime_version = kRuntimeVersion;
                         args->firmware_version = kFirmwareVersion;
                         args->driver_version = kDriverVersion;
                         args->device_name = kDeviceName;
                         args->abi_major = CALRT_ABI_MAJOR;
                         args->abi_minor = CALRT_ABI_MINOR;
                         args->abi_patch = CALRT_ABI_PATCH;
                         args->chip_count = s.chip_count;
                         args->parallel_mode = s.parallel_mode ? 1 : 0;
                         args->error_count = s.error_count;
                         args->reset_count = s.reset_count;
                         args->device_time_ns = ps_to_ns(s.now_ps);
                         args->last_error = s.last_error;
                         return {};
                       });
  });
}

CalrtError* device_chip_status(Calrt_Device_ChipStatus_Args* args) {
  return guarded(args, CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE, "Calrt_Device_ChipStatus_Args",
                 [&] {
                   return with_handle(args->device, HandleKind::kDevice, "device",
                                      [&](Device& device, ObjectId, uint32_t) -> Status {
                                        auto s = device.chip_status(args->chip);
                                        if (!s) {
                                          return tl::unexpected(s.error());
                                        }
                                        args->health = s->health;
                                        args->dram_total_bytes = s->dram_total_bytes;
                                        args->dram_used_bytes = s->dram_used_bytes;
                                        args->ecc_corrected = s->ecc_corrected;
                                        args->ecc_uncorrected = s->ecc_uncorrected;
                                        args->busy_time_ns = ps_to_ns(s->busy_ps);
                                        return {};
                                      });
                 });
}

CalrtError* device_reset(Calrt_Device_Reset_Args* args) {
  return guarded(args, CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE, "Calrt_Device_Reset_Args", [&] {
    return with_handle(
        args->device, HandleKind::kDevice, "device",
        [&](Device& device, ObjectId, uint32_t) -> Status {
          const int64_t level = raw_enum(args->level);
          if (level < CALRT_RESET_JOB_ABORT || level > CALRT_RESET_FULL) {
            // The state table answers first, as Device::reset would.
            if (auto allowed = device.require_allowed(DeviceCall::kDeviceReset); !allowed) {
              return allowed;
            }
            return fail(CALRT_INVALID_ARGUMENT,
                        "reset level " + std::to_string(level) + " is unknown");
          }
          auto state = device.reset(static_cast<CalrtResetLevel>(level), args->timeout_ns);
          args->state = device.status().state;
          if (!state) {
            return tl::unexpected(state.error());
          }
          return {};
        });
  });
}

CalrtError* device_set_parallel_mode(Calrt_Device_SetParallelMode_Args* args) {
  return guarded(args, CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE,
                 "Calrt_Device_SetParallelMode_Args", [&] {
                   return with_handle(args->device, HandleKind::kDevice, "device",
                                      [&](Device& device, ObjectId, uint32_t) -> Status {
                                        return device.set_parallel_mode(args->enable != 0);
                                      });
                 });
}

}  // namespace simdev::runtime
