// Diagnostics: the hang report (what a host collects before it resets a stuck device) and
// the state hash (what a re-run of the same seed must reproduce).
#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi/calrt.hpp"
#include "simdev/device/device.hpp"

namespace simdev {
namespace {

using Json = nlohmann::ordered_json;

// Jobs the report lists: the most recent by serial, enough to show a ping/pong pair and
// what led up to it without growing with the length of a run.
constexpr size_t kReportedSubmissions = 8;

const char* chip_health_name(CalrtChipHealth health) {
  switch (health) {
    case CALRT_CHIP_OK:
      return "OK";
    case CALRT_CHIP_DEGRADED:
      return "DEGRADED";
    case CALRT_CHIP_HUNG:
      return "HUNG";
    case CALRT_CHIP_FAILED:
      return "FAILED";
    default:
      return "?";
  }
}

const char* stage_name(const std::optional<Stage>& stage) {
  if (!stage) {
    return nullptr;
  }
  switch (*stage) {
    case Stage::kH2d:
      return "input_dma";
    case Stage::kCompute:
      return "compute";
    case Stage::kD2h:
      return "output_dma";
  }
  return "?";
}

Json serial_or_null(uint64_t serial) { return serial == 0 ? Json(nullptr) : Json(serial); }

// The live objects of a table ordered by serial: index order depends on which slots were
// freed before, serial order only on the sequence of calls.
template <class T>
std::vector<const T*> by_serial(const HandleTable<T>& table) {
  std::vector<const T*> out;
  table.for_each([&](ObjectId, const T& object) { out.push_back(&object); });
  std::sort(out.begin(), out.end(), [](const T* a, const T* b) { return a->serial < b->serial; });
  return out;
}

// FNV-1a over a canonical byte stream: integers as 8 little-endian bytes, strings and arrays
// length-prefixed, so that no two different states serialise to the same bytes.
class StateHasher {
 public:
  void u64(uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      byte(static_cast<uint8_t>(value >> (8 * i)));
    }
  }
  void flag(bool value) { u64(value ? 1 : 0); }
  void text(std::string_view value) {
    u64(value.size());
    raw(value.data(), value.size());
  }
  // Element bytes as the host stores them: the simulator's hashes compare runs on one
  // architecture family (little-endian, IEEE floats).
  template <class T>
  void array(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    u64(values.size());
    raw(values.data(), values.size() * sizeof(T));
  }
  void bits(const std::vector<bool>& values) {
    u64(values.size());
    for (bool value : values) {
      byte(value ? 1 : 0);
    }
  }
  uint64_t value() const { return hash_; }

 private:
  void byte(uint8_t b) {
    hash_ ^= b;
    hash_ *= 0x100000001b3ull;
  }
  void raw(const void* data, size_t size) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < size; ++i) {
      byte(bytes[i]);
    }
  }
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

void hash_matrix(StateHasher& h, const Int8Matrix& m) {
  h.u64(m.rows);
  h.u64(m.cols);
  h.array(m.values);
  h.array(m.scales);
}

void hash_weights(StateHasher& h, const ChipWeights& w) {
  h.u64(w.chip);
  h.array(w.embedding);
  h.array(w.final_norm);
  h.array(w.lm_head);
  h.u64(w.layers.size());
  for (const LayerWeights& layer : w.layers) {
    for (const auto* vector : {&layer.attn_norm, &layer.q_norm, &layer.k_norm, &layer.ffn_norm}) {
      h.array(*vector);
    }
    for (const Int8Matrix* matrix : {&layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj}) {
      hash_matrix(h, *matrix);
    }
    const auto hash_mlp = [&h](const MlpWeights& mlp) {
      for (const Int8Matrix* matrix : {&mlp.gate_proj, &mlp.up_proj, &mlp.down_proj}) {
        hash_matrix(h, *matrix);
      }
    };
    hash_mlp(layer.mlp);
    h.array(layer.router);
    h.u64(layer.experts.size());
    for (const MlpWeights& expert : layer.experts) hash_mlp(expert);
  }
  h.u64(w.loaded_bytes);
}

void hash_kv_store(StateHasher& h, const KvStore& store) {
  h.u64(store.chip_count());
  for (size_t c = 0; c < store.chip_count(); ++c) {
    const ChipKv& chip = store.chip(c);
    h.u64(chip.slot_stride);
    h.u64(chip.slots);
    h.u64(chip.layers.size());
    for (const LayerKv& layer : chip.layers) {
      h.array(layer.keys);
      h.array(layer.values);
      h.array(layer.values_s8);
      h.array(layer.value_scales);
    }
  }
}

void hash_tensors(StateHasher& h, const TensorBytes& tensors) {
  h.u64(tensors.size());
  for (const auto& tensor : tensors) {
    h.array(tensor);
  }
}

}  // namespace

std::string Device::hang_report() const {
  // Objects refer to each other by id; the report names them by serial, as messages do.
  auto calbin_serial = [&](ObjectId id) -> uint64_t {
    const CalbinImage* image = calbins_.find(id);
    return image != nullptr ? image->serial : 0;
  };
  auto kv_serial = [&](const std::optional<ObjectId>& id) -> uint64_t {
    const KvHandle* kv = id ? kvs_.find(*id) : nullptr;
    return kv != nullptr ? kv->serial : 0;
  };
  auto model_of = [&](ObjectId calbin, size_t model_index) -> const calbin::Model* {
    const CalbinImage* image = calbins_.find(calbin);
    return image != nullptr && model_index < image->manifest.models.size()
               ? &image->manifest.models[model_index]
               : nullptr;
  };

  Json report;
  report["device"] = {
      {"state", device_state_name(state())},
      {"now_ns", ps_to_ns(engine_.now())},
      {"needs_reset", reset_level_name(faults_.needs_reset())},
      {"stuck", faults_.stuck()},
      {"cause", faults_.cause()},
      {"last_error", calrt::code_name(last_error_)},
      {"error_count", error_count_},
      {"reset_count", reset_count_},
      {"parallel_mode", parallel_mode_},
  };

  Json chips = Json::array();
  for (size_t c = 0; c < faults_.chips().size(); ++c) {
    const FaultState::ChipCondition& chip = faults_.chips()[c];
    const auto index = static_cast<uint32_t>(c);
    const bool throttled = chip.throttled_until_ps > engine_.now();
    chips.push_back({
        {"chip", c},
        {"health", chip_health_name(chip_health(index))},
        {"activity", chip_activity(index)},
        {"stopped", chip.stopped},
        {"busy_ns", ps_to_ns(c < chip_busy_ps_.size() ? chip_busy_ps_[c] : 0)},
        {"ecc_corrected", chip.ecc_corrected},
        {"ecc_uncorrected", chip.ecc_uncorrected},
        {"throttle_factor", throttled ? chip.throttle_factor : 1},
        {"throttled_until_ns", throttled ? Json(ps_to_ns(chip.throttled_until_ps)) : Json(nullptr)},
    });
  }
  report["chips"] = std::move(chips);

  Json buffers = Json::array();
  for (const Buffer* buffer : by_serial(buffers_)) {
    const calbin::Model* model = model_of(buffer->calbin, buffer->model_index);
    Json csrs = Json::array();
    for (size_t i = 0; i < buffer->csrs.size(); ++i) {
      const bool named = model != nullptr && i < model->csrs.size();
      csrs.push_back({{"name", named ? model->csrs[i].name : "csr" + std::to_string(i)},
                      {"value", buffer->csrs[i]}});
    }
    Json mapped = Json::array();
    for (size_t i = 0; i < buffer->mapped.size(); ++i) {
      if (buffer->mapped[i]) {
        mapped.push_back(i);
      }
    }
    buffers.push_back({
        {"serial", buffer->serial},
        {"calbin", serial_or_null(calbin_serial(buffer->calbin))},
        {"model", model != nullptr ? model->name : "?"},
        {"direction", buffer->direction == CALRT_INPUT ? "input" : "output"},
        {"slot", buffer->slot},
        {"owner_job", buffer->owner_job ? Json(buffer->owner_job_serial) : Json(nullptr)},
        {"mapped", std::move(mapped)},
        {"kv", serial_or_null(kv_serial(buffer->kv_at(0)))},
        {"csrs", std::move(csrs)},
    });
  }
  report["buffers"] = std::move(buffers);

  Json kv_map = Json::array();
  for (const KvHandle* kv : by_serial(kvs_)) {
    kv_map.push_back({
        {"serial", kv->serial},
        {"calbin", serial_or_null(calbin_serial(kv->calbin))},
        {"first_token", kv->range.begin},
        {"tokens", kv->range.tokens},
        {"filled", kv->filled_tokens},
        {"user_job", kv->user_job ? Json(kv->user_job_serial) : Json(nullptr)},
    });
  }
  report["kv"] = std::move(kv_map);

  const std::vector<const Job*> jobs = by_serial(jobs_);
  Json submissions = Json::array();
  for (size_t i = jobs.size() > kReportedSubmissions ? jobs.size() - kReportedSubmissions : 0;
       i < jobs.size(); ++i) {
    const Job& job = *jobs[i];
    const calbin::Model* model = model_of(job.calbin, job.model_index);
    const char* stage = stage_name(job.stage);
    submissions.push_back({
        {"serial", job.serial},
        {"model", model != nullptr ? model->name : "?"},
        {"state", job_state_name(job.state)},
        {"stage", stage != nullptr ? Json(stage) : Json(nullptr)},
        {"code", calrt::code_name(job.code)},
        {"message", job.message},
        {"pending_fault", job.stage_fault ? Json(job.stage_fault->message) : Json(nullptr)},
        {"slot", job.slot},
        {"csrs", job.csrs},
        {"submit_ns", ps_to_ns(job.submit_ps)},
        {"start_ns", ps_to_ns(job.start_ps)},
        {"end_ns", job.final() ? Json(ps_to_ns(job.end_ps)) : Json(nullptr)},
    });
  }
  report["submissions"] = std::move(submissions);

  Json injections = Json::array();
  for (const FaultState::InjectionRecord& record : faults_.injections()) {
    injections.push_back({
        {"kind", to_string(record.kind)},
        {"site", to_string(record.site)},
        {"job", serial_or_null(record.job_serial)},
        {"at_ns", ps_to_ns(record.at_ps)},
        {"detail", record.detail},
    });
  }
  report["injections"] = std::move(injections);

  report["live"] = {
      {"calbins", calbins_.live_count()},
      {"buffers", buffers_.live_count()},
      {"jobs", jobs_.live_count()},
      {"kv", kvs_.live_count()},
  };
  report["state_machine_violations"] = state_machine_violations_;
  const Invariants& invariants = engine_.invariants();
  report["invariants"] = {{"strict", invariants.strict()},
                          {"failures", invariants.failures()},
                          {"first_failure", invariants.first_failure()}};
  // Messages quote host input (paths, names): invalid UTF-8 is replaced, never thrown.
  return report.dump(2, ' ', false, Json::error_handler_t::replace);
}

uint64_t Device::state_hash() const {
  // Object ids are left out: their generations come from a process-wide counter, so two
  // devices fed the same calls get different ids. Serials are per device and stand in.
  auto calbin_serial = [&](ObjectId id) -> uint64_t {
    const CalbinImage* image = calbins_.find(id);
    return image != nullptr ? image->serial : 0;
  };
  auto buffer_serial = [&](ObjectId id) -> uint64_t {
    const Buffer* buffer = buffers_.find(id);
    return buffer != nullptr ? buffer->serial : 0;
  };
  auto kv_serial = [&](const std::optional<ObjectId>& id) -> uint64_t {
    const KvHandle* kv = id ? kvs_.find(*id) : nullptr;
    return kv != nullptr ? kv->serial : 0;
  };
  auto job_serial = [&](const std::optional<ObjectId>& id) -> uint64_t {
    const Job* job = id ? jobs_.find(*id) : nullptr;
    return job != nullptr ? job->serial : 0;
  };

  StateHasher h;
  for (const ParamSpec& param : device_params()) {
    // The host's thread count changes how fast a step runs, never what the device holds.
    if (param.name == std::string_view("host_threads")) continue;
    h.text(param.name);
    h.u64(param.get(config_));
  }
  h.u64(engine_.now());
  h.u64(engine_.queue().size());
  h.u64(engine_.queue().next_time().value_or(kTimeNever));
  h.u64(state());
  h.flag(faulted_);
  h.flag(lost_);
  h.flag(parallel_mode_);
  h.u64(error_count_);
  h.u64(reset_count_);
  h.u64(last_error_);
  h.u64(next_serial_);
  h.u64(next_job_serial_);
  h.u64(in_flight_);
  h.u64(buffer_reuse_count_);
  h.u64(faults_.needs_reset());
  h.flag(faults_.stuck());
  h.text(faults_.cause());
  h.u64(state_machine_violations_);
  h.array(chip_busy_ps_);
  h.u64(faults_.chips().size());
  for (const FaultState::ChipCondition& chip : faults_.chips()) {
    h.u64(chip.health);
    h.text(chip.activity);
    h.flag(chip.stopped);
    h.u64(chip.throttled_until_ps);
    h.u64(chip.throttle_factor);
    h.u64(chip.ecc_corrected);
    h.u64(chip.ecc_corrected_since_reset);
    h.u64(chip.ecc_uncorrected);
  }
  h.text(to_yaml(faults_.plan()));
  for (const auto& by_site : faults_.hit_counts()) {
    for (uint64_t count : by_site) {
      h.u64(count);
    }
  }
  h.u64(faults_.injections().size());
  for (const FaultState::InjectionRecord& record : faults_.injections()) {
    h.u64(static_cast<uint64_t>(record.kind));
    h.u64(static_cast<uint64_t>(record.site));
    h.u64(record.job_serial);
    h.u64(record.at_ps);
    h.text(record.detail);
  }

  for (const CalbinImage* image : by_serial(calbins_)) {
    h.u64(image->serial);
    // The manifest lists every file with its SHA-256: it identifies the calbin wherever
    // its directory lives.
    h.text(calbin::to_json(image->manifest));
    h.flag(image->configured);
    h.array(image->memory_used_bytes);
    h.u64(image->weights.size());
    for (const ChipWeights& weights : image->weights) {
      hash_weights(h, weights);
    }
    const KvAllocator* allocator = image->kv_allocator.get();
    h.flag(allocator != nullptr);
    if (allocator != nullptr) {
      h.u64(allocator->total_tokens());
      h.u64(allocator->free_tokens());
      h.u64(allocator->largest_free_tokens());
      h.u64(allocator->free_range_count());
      h.u64(allocator->live_count());
    }
  }
  for (const Buffer* buffer : by_serial(buffers_)) {
    h.u64(buffer->serial);
    h.u64(calbin_serial(buffer->calbin));
    h.u64(buffer->model_index);
    h.u64(buffer->direction);
    h.u64(buffer->slot);
    hash_tensors(h, buffer->tensors);
    h.bits(buffer->mapped);
    h.array(buffer->csrs);
    for (const auto& row : buffer->kv) h.u64(kv_serial(row));
    h.u64(buffer->owner_job ? buffer->owner_job_serial : 0);
  }
  for (const KvHandle* kv : by_serial(kvs_)) {
    h.u64(kv->serial);
    h.u64(calbin_serial(kv->calbin));
    h.u64(kv->range.begin);
    h.u64(kv->range.tokens);
    h.u64(kv->filled_tokens);
    h.u64(kv->user_job ? kv->user_job_serial : 0);
    hash_kv_store(h, kv->store);
  }
  for (const Job* job : by_serial(jobs_)) {
    h.u64(job->serial);
    h.u64(calbin_serial(job->calbin));
    h.u64(job->model_index);
    h.u64(buffer_serial(job->input));
    h.u64(buffer_serial(job->output));
    for (const ObjectId row : job->kv) h.u64(kv_serial(row));
    h.u64(job->slot);
    h.array(job->csrs);
    hash_tensors(h, job->input_at_submit);
    hash_tensors(h, job->output_at_submit);
    hash_tensors(h, job->staged_outputs);
    h.u64(job->state);
    h.u64(job->code);
    h.text(job->message);
    h.u64(job->stage ? static_cast<uint64_t>(*job->stage) + 1 : 0);
    for (TimePs t : {job->submit_ps, job->start_ps, job->h2d_end_ps, job->compute_start_ps,
                     job->compute_end_ps, job->end_ps}) {
      h.u64(t);
    }
    h.flag(job->latent_fault);
    h.flag(job->stage_fault.has_value());
    if (job->stage_fault) {
      const Job::StageFault& fault = *job->stage_fault;
      h.u64(fault.state);
      h.u64(fault.code);
      h.u64(fault.reset_level);
      h.flag(fault.persistent);
      h.flag(fault.watchdog);
      h.text(fault.message);
    }
    h.flag(job->pending_event.has_value());
    if (job->pending_event) {
      h.u64(job->pending_event->time_ps);
      h.u64(static_cast<uint64_t>(job->pending_event->band));
      h.u64(job->pending_event->sequence);
    }
  }
  for (const StageQueue& queue : stages_) {
    h.u64(queue.waiting.size());
    for (ObjectId id : queue.waiting) {
      h.u64(job_serial(id));
    }
    h.u64(job_serial(queue.busy));
  }
  return h.value();
}

}  // namespace simdev
