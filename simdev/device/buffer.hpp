// An input or output buffer: every tensor of one model, sized by its descriptor, plus (for
// inputs) the CSR values and the applied KV handle. From submission until the job is final
// the buffer is owned by the job.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "abi/calrt.h"
#include "simdev/device/base/handle_table.hpp"

namespace simdev {

struct Buffer {
  uint64_t serial = 0;  // "buffer #N" in messages
  ObjectId calbin;
  size_t model_index = 0;
  CalrtDirection direction = CALRT_INPUT;
  uint32_t slot = 0;
  std::vector<std::vector<uint8_t>> tensors;
  std::vector<bool> mapped;
  std::vector<uint64_t> csrs;  // by position in the model's CSR list
  // The applied KV handles by decode row (Kv_Apply's `row`); only a batch decode model's
  // input has more than row 0.
  std::vector<std::optional<ObjectId>> kv;
  std::optional<ObjectId> owner_job;
  uint64_t owner_job_serial = 0;

  std::optional<ObjectId> kv_at(size_t row) const {
    return row < kv.size() ? kv[row] : std::nullopt;
  }

  bool any_mapped() const {
    for (bool m : mapped) {
      if (m) {
        return true;
      }
    }
    return false;
  }
};

}  // namespace simdev
