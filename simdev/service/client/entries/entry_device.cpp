// Entries: opening, inspecting, resetting and closing devices. A device is one session of
// the daemon; when the connection is lost, Device_Status still answers (state LOST),
// Device_Destroy releases the client side, and Device_Reset reconnects.
#include <vector>

#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/entries/entry_support.hpp"

namespace simdev::service::client {
namespace {

void fill_status(Calrt_Device_Status_Args* args, ClientDevice& device, const DeviceStatus::Out& s,
                 CalrtDeviceState state) {
  std::lock_guard lock(device.mutex);
  fill_outs<DeviceStatus>(s, *args, device.strings);
  args->state = state;
}

// What a lost device reports: the last status it gave, its state LOST.
void fill_lost_status(Calrt_Device_Status_Args* args, ClientDevice& device) {
  DeviceStatus::Out s;
  {
    std::lock_guard lock(device.mutex);
    if (device.last_status) {
      s = *device.last_status;
    } else {
      s.runtime_version = s.firmware_version = s.driver_version = s.device_name = "unknown";
      if (device.connection) {
        s.abi_major = device.connection->welcome().abi_major;
        s.abi_minor = device.connection->welcome().abi_minor;
        s.abi_patch = device.connection->welcome().abi_patch;
      }
    }
  }
  s.last_error = CALRT_DEVICE_LOST;
  fill_status(args, device, s, CALRT_DEVICE_LOST_STATE);
}

Expected<DeviceStatus::Out> fetch_status(ClientDevice& device) {
  uint64_t wire = 0;
  {
    std::lock_guard lock(device.mutex);
    wire = device.wire;
  }
  auto response = round_trip<DeviceStatus>(device, DeviceStatus::In{WireHandle{wire}});
  if (!response) {
    return tl::unexpected(response.error());
  }
  if (Status ok = status_of(*response); !ok) {
    return tl::unexpected(ok.error());
  }
  std::lock_guard lock(device.mutex);
  device.last_status = response->out;
  return response->out;
}

// Device_Reset of a lost device: a new session at the endpoint, the same config, and the
// client's calbins loaded again under their old handles (unconfigured, as after FULL).
Status reconnect(ClientDevice& device, Calrt_Device_Reset_Args* args) {
  std::lock_guard serial(device.reconnect_mutex);
  if (device.lost()) {
    auto attached =
        attach(device.config, device.kind, device.index, args->timeout_ns, /*retry=*/true);
    if (!attached) {
      return fail(attached.error().code, "Device_Reset: " + attached.error().message);
    }
    auto& [connection, wire, virtual_clock] = *attached;
    std::vector<std::pair<LocalId, std::string>> paths;
    {
      std::lock_guard lock(device.mutex);
      device.calbins.for_each(
          [&](LocalId id, ClientCalbin& calbin) { paths.emplace_back(id, calbin.path); });
    }
    std::vector<std::pair<LocalId, uint64_t>> recreated;
    for (const auto& [id, path] : paths) {
      CalbinCreate::In in;
      in.device = WireHandle{wire};
      in.path = path;
      auto response = round_trip<CalbinCreate>(*connection, in);
      // A calbin that cannot be loaded again keeps its handle; the daemon refuses its id 0.
      const bool ok = response && response->code == CALRT_OK;
      recreated.emplace_back(id, ok ? response->out.calbin.id : 0);
    }
    std::shared_ptr<Connection> old;
    {
      std::lock_guard lock(device.mutex);
      old = std::move(device.connection);
      device.connection = connection;
      device.wire = wire;
      device.virtual_clock = virtual_clock;
      // The lost session's buffers, jobs and KV handles died with it.
      device.buffers.clear();
      device.jobs.clear();
      device.kvs.clear();
      for (const auto& [id, calbin_wire] : recreated) {
        if (auto calbin = device.calbins.find(id)) calbin->wire = calbin_wire;
      }
      device.last_status.reset();
      device.held = HeldCalls{};
    }
    if (old) old->close();
  }
  auto status = fetch_status(device);
  if (!status) {
    return tl::unexpected(status.error());
  }
  args->state = static_cast<CalrtDeviceState>(status->state);
  return {};
}

}  // namespace

CalrtError* device_create(Calrt_Device_Create_Args* args) {
  return guarded(
      args, CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE, "Calrt_Device_Create_Args", [&]() -> Status {
        auto config = parse_service_config(args->config);
        if (!config) {
          return tl::unexpected(config.error());
        }
        const uint32_t kind = wire_enum(args->kind);
        auto attached = attach(*config, kind, args->index, args->timeout_ns, false);
        if (!attached) {
          return tl::unexpected(attached.error());
        }
        auto device = std::make_shared<ClientDevice>();
        device->kind = kind;
        device->index = args->index;
        device->config = std::move(*config);
        device->connection = attached->connection;
        device->wire = attached->wire;
        device->virtual_clock = attached->virtual_clock;
        uint32_t slot = 0;
        const auto id = register_device(device, &slot);
        if (!id) {
          (void)round_trip<DeviceDestroy>(*device->connection,
                                          DeviceDestroy::In{WireHandle{device->wire}});
          device->connection->close();
          return fail(CALRT_OUT_OF_RANGE,
                      "too many open devices (limit " + std::to_string(kMaxDevices) + ")");
        }
        {
          std::lock_guard lock(device->mutex);
          device->slot = slot;
          device->id = *id;
        }
        args->device = to_handle<CalrtDevice>(HandleKind::kDevice, slot, *id);
        return {};
      });
}

CalrtError* device_destroy(Calrt_Device_Destroy_Args* args) {
  return guarded(
      args, CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Device_Destroy_Args", [&]() -> Status {
        const auto decoded =
            decode_handle(reinterpret_cast<uintptr_t>(args->device), HandleKind::kDevice);
        auto device = decoded && decoded->second.index == 0
                          ? unregister_device(decoded->first, decoded->second.generation)
                          : nullptr;
        if (!device) {
          return fail(CALRT_INVALID_HANDLE, "device handle " + handle_text(args->device) +
                                                " was destroyed or never issued");
        }
        std::shared_ptr<Connection> connection;
        uint64_t wire = 0;
        {
          std::lock_guard lock(device->mutex);
          connection = std::move(device->connection);
          wire = device->wire;
        }
        if (connection) {
          // Detaching is the daemon's business; the client side goes whatever it answers.
          if (!connection->lost()) {
            (void)round_trip<DeviceDestroy>(*connection, DeviceDestroy::In{WireHandle{wire}});
          }
          connection->close();
        }
        std::lock_guard lock(device->mutex);
        device->jobs.clear();
        device->kvs.clear();
        device->buffers.clear();
        device->calbins.clear();
        return {};
      });
}

CalrtError* device_status(Calrt_Device_Status_Args* args) {
  return guarded(
      args, CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE, "Calrt_Device_Status_Args", [&]() -> Status {
        auto device = resolve_device(args->device, "device");
        if (!device) {
          return tl::unexpected(device.error());
        }
        auto status = fetch_status(**device);
        if (!status) {
          if (status.error().code != CALRT_DEVICE_LOST) {
            return tl::unexpected(status.error());
          }
          fill_lost_status(args, **device);
          return {};
        }
        fill_status(args, **device, *status, static_cast<CalrtDeviceState>(status->state));
        return {};
      });
}

CalrtError* device_chip_status(Calrt_Device_ChipStatus_Args* args) {
  return guarded(args, CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE, "Calrt_Device_ChipStatus_Args",
                 [&]() -> Status {
                   auto device = resolve_device(args->device, "device");
                   if (!device) {
                     return tl::unexpected(device.error());
                   }
                   auto in = wire_in<DeviceChipStatus>(*args);
                   in.device = WireHandle{(*device)->wire_id()};
                   return forward<DeviceChipStatus>(**device, in,
                                                    [&](const DeviceChipStatus::Out& out) {
                                                      fill_outs<DeviceChipStatus>(out, *args);
                                                      return Status{};
                                                    });
                 });
}

CalrtError* device_reset(Calrt_Device_Reset_Args* args) {
  return guarded(args, CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE, "Calrt_Device_Reset_Args",
                 [&]() -> Status {
                   auto device = resolve_device(args->device, "device");
                   if (!device) {
                     return tl::unexpected(device.error());
                   }
                   const int64_t level = raw_enum(args->level);
                   if ((*device)->lost()) {
                     if (level < CALRT_RESET_JOB_ABORT || level > CALRT_RESET_FULL) {
                       return fail(CALRT_INVALID_ARGUMENT,
                                   "reset level " + std::to_string(level) + " is unknown");
                     }
                     return reconnect(**device, args);
                   }
                   auto in = wire_in<DeviceReset>(*args);
                   in.device = WireHandle{(*device)->wire_id()};
                   auto response = round_trip<DeviceReset>(**device, in);
                   if (!response) {
                     return tl::unexpected(response.error());
                   }
                   // The state after the reset is reported even when the reset failed.
                   if (response->out.state != 0) {
                     args->state = static_cast<CalrtDeviceState>(response->out.state);
                   }
                   return status_of(*response);
                 });
}

CalrtError* device_set_parallel_mode(Calrt_Device_SetParallelMode_Args* args) {
  return guarded(args, CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE,
                 "Calrt_Device_SetParallelMode_Args", [&]() -> Status {
                   auto device = resolve_device(args->device, "device");
                   if (!device) {
                     return tl::unexpected(device.error());
                   }
                   auto in = wire_in<DeviceSetParallelMode>(*args);
                   in.device = WireHandle{(*device)->wire_id()};
                   return forward<DeviceSetParallelMode>(**device, in);
                 });
}

}  // namespace simdev::service::client
