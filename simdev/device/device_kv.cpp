// Device: KV handles carved from a configured calbin's KV reservation.
#include "simdev/device/device.hpp"

namespace simdev {
namespace {

std::string kv_label(const KvHandle& kv) { return "kv handle #" + std::to_string(kv.serial); }

Status check_unused(const KvHandle& kv, std::string_view action) {
  if (kv.user_job) {
    return fail(CALRT_BUSY, "cannot " + std::string(action) + " " + kv_label(kv) +
                                ": in-flight job #" + std::to_string(kv.user_job_serial) +
                                " uses it");
  }
  return {};
}

}  // namespace

Expected<ObjectId> Device::kv_allocate(ObjectId calbin_id, uint64_t capacity_tokens) {
  if (auto allowed = require_allowed(DeviceCall::kKvAllocate); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_calbin(calbin_id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  CalbinImage& image = **found;
  if (!image.configured) {
    return fail(CALRT_NOT_CONFIGURED,
                "calbin #" + std::to_string(image.serial) + " is not configured");
  }
  if (capacity_tokens == 0) {
    return fail(CALRT_INVALID_ARGUMENT, "KV capacity_tokens = 0");
  }
  if (capacity_tokens > image.manifest.llm.context) {
    return fail(CALRT_OUT_OF_RANGE, "KV capacity_tokens = " + std::to_string(capacity_tokens) +
                                        " > context " + std::to_string(image.manifest.llm.context));
  }
  // A valid request reaches the device: the fault plan's `kv` site (FAULTS.md).
  if (auto injected = inject_kv(FaultPoint::kKvAllocate, nullptr,
                                "Kv_Allocate of " + std::to_string(capacity_tokens) +
                                    " tokens in calbin #" + std::to_string(image.serial));
      !injected) {
    return tl::unexpected(injected.error());
  }
  const auto range = image.kv_allocator->allocate(capacity_tokens);
  if (!range) {
    return fail(CALRT_KV_EXHAUSTED,
                "KV reservation of calbin #" + std::to_string(image.serial) + " has no room for " +
                    std::to_string(capacity_tokens) + " tokens: " +
                    std::to_string(image.kv_allocator->free_tokens()) + " tokens free, largest " +
                    "contiguous " + std::to_string(image.kv_allocator->largest_free_tokens()));
  }
  auto kv = std::make_unique<KvHandle>();
  kv->serial = next_serial_++;
  kv->calbin = calbin_id;
  kv->range = *range;
  if (image.dims) {
    kv->store = KvStore(*image.dims);  // no memory yet: it grows with the fill level
  }
  auto id = kvs_.insert(std::move(kv));
  if (!id) {
    image.kv_allocator->release(*range);
    return fail(CALRT_OUT_OF_RANGE,
                "too many live KV handles (limit " + std::to_string(kMaxKvHandles) + ")");
  }
  return *id;
}

Status Device::kv_apply(ObjectId kv_id, ObjectId input_id, uint32_t row) {
  if (auto allowed = require_allowed(DeviceCall::kKvApply); !allowed) {
    return allowed;
  }
  auto kv = find_kv(kv_id);
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  auto buffer = find_buffer(input_id);
  if (!buffer) {
    return tl::unexpected(buffer.error());
  }
  if ((*buffer)->direction != CALRT_INPUT) {
    return fail(CALRT_INVALID_ARGUMENT, "cannot apply " + kv_label(**kv) + " to output buffer #" +
                                            std::to_string((*buffer)->serial));
  }
  if (!((*buffer)->calbin == (*kv)->calbin)) {
    return fail(CALRT_INVALID_ARGUMENT, "cannot apply " + kv_label(**kv) + " to buffer #" +
                                            std::to_string((*buffer)->serial) +
                                            " of another calbin");
  }
  const CalbinImage* image = calbins_.find((*buffer)->calbin);
  const uint64_t rows =
      image != nullptr && (*buffer)->model_index < image->manifest.models.size()
          ? decode_rows(image->manifest, image->manifest.models[(*buffer)->model_index])
          : 1;
  if (row >= rows) {
    return fail(CALRT_INVALID_ARGUMENT, "cannot apply " + kv_label(**kv) + " to row " +
                                            std::to_string(row) + " of buffer #" +
                                            std::to_string((*buffer)->serial) + ": its model has " +
                                            std::to_string(rows) + " row(s)");
  }
  if (auto free = check_owner(**buffer, "apply a KV handle to"); !free) {
    return free;
  }
  if ((*buffer)->kv.size() <= row) (*buffer)->kv.resize(row + 1);
  (*buffer)->kv[row] = kv_id;
  return {};
}

Status Device::kv_free(ObjectId kv_id) {
  if (auto allowed = require_allowed(DeviceCall::kKvFree); !allowed) {
    return allowed;
  }
  auto kv = find_kv(kv_id);
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  if (auto unused = check_unused(**kv, "free"); !unused) {
    return unused;
  }
  if (auto image = calbins_.find((*kv)->calbin); image && image->kv_allocator) {
    image->kv_allocator->release((*kv)->range);
  }
  tombstones_.bury(kv_id, kv_label(**kv) + " was freed");
  kvs_.erase(kv_id);  // buffers it was applied to keep a stale id and lose it
  return {};
}

Status Device::kv_clear(ObjectId kv_id) {
  if (auto allowed = require_allowed(DeviceCall::kKvClear); !allowed) {
    return allowed;
  }
  auto kv = find_kv(kv_id);
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  if (auto unused = check_unused(**kv, "clear"); !unused) {
    return unused;
  }
  if (auto injected = inject_kv(FaultPoint::kKvClear, *kv, "Kv_Clear of " + kv_label(**kv));
      !injected) {
    return injected;  // the contents stay as they were (with the flipped bit, for ECC)
  }
  (*kv)->store.clear();
  (*kv)->filled_tokens = 0;
  return {};
}

Expected<KvInfo> Device::kv_info(ObjectId kv_id) const {
  if (auto allowed = require_allowed(DeviceCall::kKvInfo); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto kv = find_kv(kv_id);
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  return KvInfo{(*kv)->range.tokens, (*kv)->filled_tokens};
}

Expected<KvCapacity> Device::kv_capacity(ObjectId calbin_id) const {
  if (auto allowed = require_allowed(DeviceCall::kKvCapacity); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_calbin(calbin_id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  const CalbinImage& image = **found;
  if (!image.configured) {
    return fail(CALRT_NOT_CONFIGURED,
                "calbin #" + std::to_string(image.serial) + " is not configured");
  }
  KvCapacity c;
  c.total_tokens = image.kv_allocator->total_tokens();
  c.free_tokens = image.kv_allocator->free_tokens();
  c.largest_free_tokens = image.kv_allocator->largest_free_tokens();
  c.bytes_per_token_per_chip = image.kv.bytes_per_token_per_chip;
  c.live_handles = static_cast<uint32_t>(image.kv_allocator->live_count());
  return c;
}

}  // namespace simdev
