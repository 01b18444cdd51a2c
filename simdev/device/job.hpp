// One submitted execution of a model and its lifecycle on the device clock:
// SUBMITTED -> RUNNING | FAILED | CANCELLED; RUNNING -> COMPLETED | FAILED | CANCELLED |
// TIMED_OUT (the job watchdog ended it); the last four are final. The table is
// job_transition_allowed() (state_machine.hpp, STATE_MACHINE.md); the device refuses and
// counts any other move. While RUNNING a job passes the pipeline stages input DMA, compute
// and output DMA.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abi/calrt.h"
#include "simdev/device/base/event_queue.hpp"
#include "simdev/device/base/handle_table.hpp"
#include "simdev/device/state_machine.hpp"
#include "simdev/device/timing/cost_model.hpp"

namespace simdev {

enum class Stage : uint32_t { kH2d = 0, kCompute = 1, kD2h = 2 };
inline constexpr size_t kStageCount = 3;

using TensorBytes = std::vector<std::vector<uint8_t>>;

struct Job {
  uint64_t serial = 0;  // "job #N" in messages
  ObjectId id;          // its own id in the device's job table
  ObjectId calbin;
  size_t model_index = 0;
  ObjectId input;
  ObjectId output;
  std::vector<ObjectId> kv;  // by row: the handles of the rows it computes
  uint32_t slot = 0;
  std::vector<uint64_t> csrs;  // snapshot taken at submission: the device reads them then
  JobCost cost;                // from the CSR snapshot; validated when compute starts

  // Buffer contents at submission. The input is what the device computes on; both are
  // compared again later, so that a host write through a mapping kept past unmap (the
  // reference's buffer-reuse bug class) is reported instead of silently corrupting results.
  TensorBytes input_at_submit;
  TensorBytes output_at_submit;
  TensorBytes staged_outputs;  // results in device memory, copied out by the output DMA
  // The last token's residual stream at the CALRT_EXT_PROBE points, [points][probe_width];
  // empty unless the job ran a functional step.
  std::vector<float> probes;
  size_t probe_width = 0;

  CalrtJobState state = CALRT_JOB_SUBMITTED;
  CalrtCode code = CALRT_OK;
  std::string message;
  std::optional<Stage> stage;  // the stage it occupies or waits for, while RUNNING
  TimePs submit_ps = 0;
  TimePs start_ps = 0;
  TimePs h2d_end_ps = 0;
  TimePs compute_start_ps = 0;
  TimePs compute_end_ps = 0;
  TimePs end_ps = 0;
  std::optional<EventKey> pending_event;  // its arrival or stage-completion event

  // An injected fault or the job watchdog decided at the start of the current stage that
  // the stage's event ends the job like this instead of completing it (device_faults.cpp).
  struct StageFault {
    CalrtJobState state = CALRT_JOB_FAILED;
    CalrtCode code = CALRT_INTERNAL;
    uint32_t reset_level = CALRT_RESET_JOB_ABORT;
    bool persistent = false;
    bool watchdog = false;  // the watchdog stopped a compute that was still running
    std::string message;
  };
  std::optional<StageFault> stage_fault;
  // A hang or a D2D link failure was injected into its compute: the part stays broken when
  // the job is cancelled, so cancelling it leaves the device FAULTED.
  bool latent_fault = false;

  bool final() const { return calrt_job_state_final(state) != 0; }
};

// How messages name a job.
inline std::string job_label(const Job& job) { return "job #" + std::to_string(job.serial); }

// job_label(job) + suffix written into `text` (cut to fit) instead of allocated: for a cancel,
// which another thread's wait is blocked on until it returns.
inline std::string_view job_label_into(const Job& job, std::string_view suffix,
                                       std::span<char> text) {
  char digits[20];  // any uint64_t
  const char* const number = std::to_chars(digits, digits + sizeof digits, job.serial).ptr;
  char* out = text.data();
  char* const last = text.data() + text.size();
  for (const std::string_view piece :
       {std::string_view("job #"), std::string_view(digits, number - digits), suffix}) {
    out = std::copy_n(piece.data(), std::min<size_t>(piece.size(), last - out), out);
  }
  return {text.data(), static_cast<size_t>(out - text.data())};
}

}  // namespace simdev
