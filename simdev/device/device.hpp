// The simulated two-chiplet device: its state machine, objects and virtual clock. Not
// thread-safe by itself; the runtime serialises every call on one device with a mutex.
// Ids handed out are generation-checked: a stale id yields INVALID_HANDLE, never a crash.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abi/calrt.h"
#include "simdev/device/base/engine.hpp"
#include "simdev/device/base/handle_table.hpp"
#include "simdev/device/base/tombstones.hpp"
#include "simdev/device/base/trace_recorder.hpp"
#include "simdev/device/buffer.hpp"
#include "simdev/device/faults/fault_effects.hpp"
#include "simdev/device/faults/fault_plan.hpp"
#include "simdev/device/faults/fault_state.hpp"
#include "simdev/device/faults/operation_faults.hpp"
#include "simdev/device/job.hpp"
#include "simdev/device/model/calbin_image.hpp"
#include "simdev/device/model/kv_handle.hpp"
#include "simdev/device/state_machine.hpp"
#include "simdev/device/timing/device_config.hpp"

namespace simdev {

struct DeviceStatus {
  CalrtDeviceState state = CALRT_DEVICE_OPEN;
  uint32_t chip_count = 0;
  bool parallel_mode = false;
  uint64_t error_count = 0;
  uint64_t reset_count = 0;
  TimePs now_ps = 0;
  CalrtCode last_error = CALRT_OK;
};

struct ChipStatus {
  CalrtChipHealth health = CALRT_CHIP_OK;
  uint64_t dram_total_bytes = 0;
  uint64_t dram_used_bytes = 0;
  uint64_t ecc_corrected = 0;
  uint64_t ecc_uncorrected = 0;
  TimePs busy_ps = 0;
};

struct ConfigureResult {
  TimePs duration_ps = 0;
  std::vector<uint64_t> memory_used_bytes;
};

struct WaitOutcome {
  CalrtWaitResult result = CALRT_WAIT_NOT_READY;
  CalrtJobState state = CALRT_JOB_SUBMITTED;
};

struct KvInfo {
  uint64_t capacity_tokens = 0;
  uint64_t filled_tokens = 0;
};

struct KvCapacity {
  uint64_t total_tokens = 0;
  uint64_t free_tokens = 0;
  uint64_t largest_free_tokens = 0;
  uint64_t bytes_per_token_per_chip = 0;
  uint32_t live_handles = 0;
};

struct TensorMapping {
  void* data = nullptr;
  uint64_t size_bytes = 0;
};

// Rows of one submission: the calbin's batch for its decode model, 1 for every other model
// (calrt.h, Kv_Apply).
uint64_t decode_rows(const calbin::Manifest& manifest, const calbin::Model& model);
// The rows a submission computes: a batch decode's cur_seq_len, clamped to [1, batch]; 1 for
// every other model.
uint64_t live_rows(const calbin::Manifest& manifest, const calbin::Model& model,
                   const std::vector<uint64_t>& csrs);
// Prices a job from its CSR snapshot and inputs (job_execution.cpp); unvalidated, clamped.
JobShape job_shape(const calbin::Manifest& manifest, const calbin::Model& model,
                   const std::vector<uint64_t>& csrs, const TensorBytes& input);
// The same from cur_seq_len and past_kv_cur_seq_len (calrt calibrate prices measured jobs).
JobShape job_shape(const calbin::Manifest& manifest, const calbin::Model& model, uint64_t cur,
                   uint64_t past);

class Device final : private FaultEffects {
 public:
  static constexpr uint32_t kMaxCalbins = 64;
  static constexpr uint32_t kMaxBuffers = 1u << 16;
  static constexpr uint32_t kMaxJobs = 1u << 16;
  static constexpr uint32_t kMaxKvHandles = 1u << 16;
  static constexpr size_t kMaxQueuedJobs = 256;
  // Bytes of message each job reserves at submit, so that finishing it (a cancel, which
  // another thread's wait is blocked on) copies its message without allocating.
  static constexpr size_t kJobMessageReserve = 128;

  static Expected<std::unique_ptr<Device>> create(std::string_view config_text);
  explicit Device(const DeviceConfig& config);

  const DeviceConfig& config() const { return config_; }

  // The state machine's verdict on `call` in the current state (state_machine.hpp):
  // WRONG_STATE or DEVICE_LOST naming the call and the state. Every device method checks it
  // first; the runtime checks it before the accessors that serve the clock, trace, fault
  // and diag extensions, since the device itself uses those too.
  Status require_allowed(DeviceCall call) const;

  // Fault injection (device_faults.cpp; the ABI's fault extension, FAULTS.md). Replacing
  // the plan keeps the hit counters.
  Status set_fault_plan(std::string_view yaml);
  void set_fault_plan(FaultPlanSpec plan);
  // One entry per (kind, site) pair at which a kind can be injected, in a fixed order.
  std::vector<FaultHitCount> fault_hits() const;

  // Diagnostics (device_diag.cpp; the ABI's diag extension). The hang report is JSON: the
  // state and what clears it, each chip's condition and activity, buffers with their CSRs
  // and ping/pong ownership, the KV slot map, the last submissions, injected faults and
  // live object counts. The hash covers the whole device state.
  std::string hang_report() const;
  uint64_t state_hash() const;

  // Device.
  DeviceStatus status() const;
  Expected<ChipStatus> chip_status(uint32_t chip) const;
  Expected<CalrtDeviceState> reset(CalrtResetLevel level, uint64_t timeout_ns);
  Status set_parallel_mode(bool enable);

  // Calbins.
  Expected<ObjectId> calbin_create(const std::string& path, uint64_t timeout_ns);
  Status calbin_destroy(ObjectId id);
  // For Calbin_GetInfo, Calbin_GetModel, Calbin_GetTensor and Calbin_GetCsr (`call`).
  Expected<const CalbinImage*> calbin(ObjectId id, DeviceCall call) const;
  Expected<ConfigureResult> calbin_configure(ObjectId id, uint64_t timeout_ns);

  // Buffers.
  Expected<ObjectId> buffer_create(ObjectId calbin, std::string_view model_name,
                                   CalrtDirection direction, uint32_t slot);
  Status buffer_destroy(ObjectId id);
  Expected<TensorMapping> buffer_map(ObjectId id, uint32_t tensor_index);
  Status buffer_unmap(ObjectId id, uint32_t tensor_index);
  Status buffer_set_csr(ObjectId id, uint32_t csr_index, uint64_t value);
  Expected<uint64_t> buffer_get_csr(ObjectId id, uint32_t csr_index) const;

  // Jobs.
  Expected<ObjectId> job_submit(ObjectId calbin, std::string_view model_name, ObjectId input,
                                ObjectId output);
  // Paced mode sleeps through `sleeper` (the runtime's: it releases the device lock).
  Expected<WaitOutcome> job_wait(ObjectId id, uint64_t timeout_ns, Sleeper* sleeper = nullptr);
  Expected<const Job*> job(ObjectId id) const;
  Status job_cancel(ObjectId id);
  Status job_destroy(ObjectId id);

  // KV.
  Expected<ObjectId> kv_allocate(ObjectId calbin, uint64_t capacity_tokens);
  Status kv_apply(ObjectId kv, ObjectId input, uint32_t row = 0);
  Status kv_free(ObjectId kv);
  Status kv_clear(ObjectId kv);
  Expected<KvInfo> kv_info(ObjectId kv) const;
  Expected<KvCapacity> kv_capacity(ObjectId calbin) const;

  // Clock (the ABI's clock extension).
  bool paced() const { return engine_.paced(); }
  TimePs now() const { return engine_.now(); }
  // The host was busy for duration_ns: virtual time advances by it with events running.
  Status host_spend(uint64_t duration_ns);
  // Paced: fires the events the wall clock has reached (called before every API call).
  Status catch_up() { return engine_.catch_up(); }

  // Trace (the ABI's trace extension).
  Status trace_start(uint64_t capacity_events) { return trace_.start(capacity_events); }
  void trace_stop() { trace_.stop(); }
  size_t trace_drain(std::span<TraceRecord> out) { return trace_.drain(out); }
  uint64_t trace_dropped() const { return trace_.dropped(); }

  // Statistics for tests and traces.
  size_t max_event_queue_depth() const { return engine_.queue().max_depth(); }
  uint64_t buffer_reuse_count() const { return buffer_reuse_count_; }

 private:
  // Lookups: INVALID_HANDLE naming the kind when the id does not resolve.
  Expected<CalbinImage*> find_calbin(ObjectId id) const;
  Expected<Buffer*> find_buffer(ObjectId id) const;
  // find_buffer, plus OUT_OF_RANGE when the buffer has no tensor at tensor_index.
  Expected<Buffer*> find_buffer_tensor(ObjectId id, uint32_t tensor_index) const;
  Expected<Job*> find_job(ObjectId id) const;
  Expected<KvHandle*> find_kv(ObjectId id) const;

  CalrtDeviceState state() const;
  // The calbin, the index of its model with exactly this name, for a call that needs a
  // usable device and a configured calbin.
  struct ConfiguredModel {
    CalbinImage* image = nullptr;
    size_t model_index = 0;
  };
  Expected<ConfiguredModel> configured_model(ObjectId calbin_id, std::string_view model_name,
                                             DeviceCall call) const;
  TimePs timeout_ps(uint64_t timeout_ns) const;
  Status check_owner(const Buffer& buffer, std::string_view action) const;
  uint64_t used_by_other_calbins(ObjectId self, uint32_t chip) const;
  Status load_weights(CalbinImage& image);

  // Job lifecycle (device_jobs.cpp, job_execution.cpp).
  Status validate_submit(ObjectId calbin_id, const CalbinImage& image, size_t model_index,
                         ObjectId input_id, ObjectId output_id);
  Status check_in_flight_limit(ObjectId calbin_id, const CalbinImage& image, uint32_t slot) const;
  struct AppliedKv {
    ObjectId id;
    KvHandle* kv = nullptr;
  };
  Expected<std::vector<AppliedKv>> applied_kv(const Buffer& input, const calbin::Manifest& manifest,
                                              const calbin::Model& model) const;
  void on_job_arrive(ObjectId job_id);
  void pump();
  void start_stage(Stage stage, ObjectId job_id);
  void on_stage_done(Stage stage, ObjectId job_id);
  void record_compute(const Job& job);
  Status find_reuse(const Job& job, ObjectId buffer_id, const TensorBytes& at_submit);
  void fail_job(Job& job, CalrtCode code, const std::string& message);
  void finish(Job& job, CalrtJobState state, CalrtCode code, std::string_view message);
  // Moves the job to `to` when the job table allows it; otherwise leaves it, counts a
  // state machine violation and returns false.
  bool set_job_state(Job& job, CalrtJobState to);
  // Job_Cancel without the state machine's check: Job_Destroy, Calbin_Destroy and resets
  // cancel in states where the host may not call Job_Cancel itself (LOST).
  Status cancel_job(ObjectId id);
  Status begin_compute(Job& job);
  void release_job_resources(Job& job);
  void cancel_all(const std::string& reason);
  void drop_calbin_objects(ObjectId calbin, bool keep_buffers_and_jobs);
  void unconfigure(ObjectId id, CalbinImage& image);
  size_t jobs_in_flight(ObjectId calbin) const;
  size_t jobs_in_flight() const;

  // What the injected faults did to the device: faults_ (faults/fault_state.hpp), acted on
  // through FaultEffects (device_faults.cpp). FAILED for every chip of a lost device.
  CalrtChipHealth chip_health(uint32_t chip) const;
  // faults_'s activity of the chip, with "computing job #N" refined into the segment at the
  // current time.
  std::string chip_activity(uint32_t chip) const;

  // Injection (device_faults.cpp): faults_.inject and faults_.record at the current time.
  std::vector<Injection> inject(FaultSite site, FaultPoint point, uint64_t job_serial);
  void record_injection(const Injection& injection, FaultSite site, uint64_t job_serial,
                        std::string detail);
  // A device-class fault: FAULTED, needing reset `level` (a persistent one: faults_.stuck()).
  void raise_device_fault(CalrtCode code, uint32_t level, bool persistent,
                          const std::string& cause) override;
  // A fault that has broken a part before it shows (a hang, a link down): the next reset
  // must reach `level` although the device is not FAULTED yet.
  void note_latent_fault(uint32_t level, bool persistent, const std::string& cause) override;
  void lose_device(const std::string& cause) override;
  void fail_in_flight(CalrtCode code, const std::string& why) override;
  void fail_job_now(Job& job, CalrtCode code, std::string message) override;
  void stop_chip(uint32_t chip, CalrtChipHealth health, std::string activity) override;
  void correct_ecc(uint32_t chip) override;
  void count_uncorrected(uint32_t chip) override;
  void throttle_chip(uint32_t chip, TimePs until, uint32_t factor) override;
  std::optional<std::string> flip_kv_bit(const Job& job, uint32_t chip, uint64_t draw) override;
  uint32_t chip_count() const override { return faults_.chip_count(); }
  FaultSite site_of(const Job& job) const;
  // The faults at a job's stage start. Returns false when they ended the job; otherwise
  // `duration` is when the stage's event fires (a failing stage sets job.stage_fault).
  bool inject_input_dma(Job& job, TimePs& duration);
  bool inject_compute(Job& job, TimePs& duration);
  bool inject_output_dma(Job& job, TimePs& duration);
  // Applies what a stage's event finds in job.stage_fault.
  void end_stage_with_fault(Job& job);
  // Kv_Allocate / Kv_Clear: the error the operation returns, if a fault makes it fail.
  Status inject_kv(FaultPoint point, KvHandle* kv, const std::string& request);
  // Calbin_Configure's upload: what the faults do to it (device_calbins.cpp applies it).
  UploadFaults inject_upload(const CalbinImage& image);
  // The upload's DMA, ECC or firmware failure: the device FAULTED and the error to return.
  Status fail_upload(CalbinImage& image, const UploadFaults& faults);

  DeviceConfig config_;
  Engine engine_;
  FaultState faults_;  // the plan, the injections, the chips' conditions, what clears a fault
  // Transitions the state machine tables forbid that the device nevertheless attempted
  // (refused and counted; always 0 unless the device has a bug).
  uint64_t state_machine_violations_ = 0;
  HandleTable<CalbinImage> calbins_{kMaxCalbins, &engine_.invariants()};
  HandleTable<Buffer> buffers_{kMaxBuffers, &engine_.invariants()};
  HandleTable<Job> jobs_{kMaxJobs, &engine_.invariants()};
  HandleTable<KvHandle> kvs_{kMaxKvHandles, &engine_.invariants()};
  Tombstones tombstones_;
  struct StageQueue {
    std::deque<ObjectId> waiting;
    std::optional<ObjectId> busy;
  };
  std::array<StageQueue, kStageCount> stages_;
  size_t in_flight_ = 0;  // jobs submitted and not final
  TraceRecorder trace_;
  uint64_t buffer_reuse_count_ = 0;
  std::vector<TimePs> chip_busy_ps_;
  uint64_t next_serial_ = 1;      // calbins, buffers and KV handles
  uint64_t next_job_serial_ = 1;  // jobs: 1, 2, ... in submission order (traces rely on it)
  bool parallel_mode_ = false;
  bool faulted_ = false;
  bool lost_ = false;
  uint64_t error_count_ = 0;
  uint64_t reset_count_ = 0;
  CalrtCode last_error_ = CALRT_OK;
};

}  // namespace simdev
