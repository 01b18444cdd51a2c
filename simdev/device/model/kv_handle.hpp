// One KV handle: a contiguous range of the calbin's KV reservation, its fill level (one
// past the highest slot written) and its contents.
#pragma once

#include <cstdint>
#include <optional>

#include "simdev/device/base/handle_table.hpp"
#include "simdev/device/model/kv_allocator.hpp"
#include "simdev/device/model/kv_store.hpp"

namespace simdev {

struct KvHandle {
  uint64_t serial = 0;  // "kv handle #N" in messages
  ObjectId calbin;
  KvRange range;
  uint64_t filled_tokens = 0;
  KvStore store;
  std::optional<ObjectId> user_job;  // the in-flight job reading and extending it
  uint64_t user_job_serial = 0;
};

}  // namespace simdev
