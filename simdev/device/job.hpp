// One submitted execution of a model and its lifecycle on the device clock:
// SUBMITTED -> RUNNING -> COMPLETED | FAILED, or CANCELLED from either of the first two.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "abi/calrt.h"
#include "simdev/device/event_queue.hpp"
#include "simdev/device/handle_table.hpp"

namespace simdev {

struct Job {
  uint64_t serial = 0;  // "job #N" in messages
  ObjectId calbin;
  size_t model_index = 0;
  ObjectId input;
  ObjectId output;
  std::optional<ObjectId> kv;
  uint32_t slot = 0;
  std::vector<uint64_t> csrs;  // snapshot taken at submission: the device reads them then

  CalrtJobState state = CALRT_JOB_SUBMITTED;
  CalrtCode code = CALRT_OK;
  std::string message;
  TimePs submit_ps = 0;
  TimePs start_ps = 0;
  TimePs end_ps = 0;
  std::optional<EventKey> pending_event;  // its start or completion event

  bool final() const {
    return state == CALRT_JOB_COMPLETED || state == CALRT_JOB_FAILED ||
           state == CALRT_JOB_CANCELLED;
  }
};

}  // namespace simdev
