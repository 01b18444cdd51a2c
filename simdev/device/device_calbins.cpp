// Device: loading, configuring and unloading calbins.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include "calbin/acceptance/checks.hpp"
#include "simdev/device/device.hpp"
#include "simdev/device/timing/cost_model.hpp"

namespace simdev {
namespace {

#define CALRT_STRINGIFY_(x) #x
#define CALRT_STRINGIFY(x) CALRT_STRINGIFY_(x)
constexpr const char* kRuntimeAbi = CALRT_STRINGIFY(CALRT_ABI_MAJOR) "." CALRT_STRINGIFY(
    CALRT_ABI_MINOR) "." CALRT_STRINGIFY(CALRT_ABI_PATCH);

// "MAJOR.MINOR" or "MAJOR.MINOR.PATCH": a calbin runs on a runtime of its ABI major whose
// minor is at least its own (minor versions only add).
bool abi_matches(std::string_view runtime_abi) {
  std::vector<unsigned> parts;
  for (const char* at = runtime_abi.data(); at <= runtime_abi.data() + runtime_abi.size();) {
    unsigned part = 0;
    const auto [end, error] = std::from_chars(at, runtime_abi.data() + runtime_abi.size(), part);
    if (error != std::errc{} || end == at) return false;
    parts.push_back(part);
    if (end == runtime_abi.data() + runtime_abi.size()) break;
    if (*end != '.') return false;
    at = end + 1;
  }
  return (parts.size() == 2 || parts.size() == 3) && parts[0] == CALRT_ABI_MAJOR &&
         parts[1] <= CALRT_ABI_MINOR;
}

Expected<std::unique_ptr<CalbinImage>> read_image(const std::string& path,
                                                  const DeviceConfig& config) {
  const auto device_chips = static_cast<uint32_t>(config.chips);
  auto manifest = calbin::read_manifest(path);
  if (!manifest) {
    return fail(CALRT_CALBIN_INVALID, manifest.error().to_string());
  }
  if (auto verified = calbin::verify_files(path, *manifest); !verified) {
    return fail(CALRT_CALBIN_INVALID, verified.error().to_string());
  }
  if (manifest->chips == 0 || manifest->chips > device_chips) {
    return fail(CALRT_CALBIN_MISMATCH,
                "calbin \"" + path + "\" needs " + std::to_string(manifest->chips) +
                    " chips; the device has " + std::to_string(device_chips));
  }
  if (!abi_matches(manifest->runtime_abi)) {
    return fail(CALRT_CALBIN_MISMATCH, "calbin \"" + path + "\" targets runtime ABI \"" +
                                           manifest->runtime_abi + "\"; this runtime is " +
                                           kRuntimeAbi);
  }
  // Refused here, before configure writes anything, with the check's own words.
  if (auto violation = calbin::memory_plan_violation(
          *manifest, (std::filesystem::path(path) / calbin::kManifestFileName).string())) {
    return fail(CALRT_CALBIN_INVALID, "calbin memory plan: " + *violation);
  }
  auto kv = kv_geometry(*manifest);
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  auto image = std::make_unique<CalbinImage>();
  image->dir = path;
  image->manifest = std::move(*manifest);
  image->kv = *kv;
  for (const calbin::Model& model : image->manifest.models) {
    image->cost_plans.emplace_back(image->manifest, model, config);
  }
  return image;
}

}  // namespace

Expected<ObjectId> Device::calbin_create(const std::string& path, uint64_t timeout_ns) {
  if (auto allowed = require_allowed(DeviceCall::kCalbinCreate); !allowed) {
    return tl::unexpected(allowed.error());
  }
  (void)timeout_ns;  // reading the manifest takes no device time
  auto image = read_image(path, config_);
  if (!image) {
    return tl::unexpected(image.error());
  }
  (*image)->serial = next_serial_++;
  auto id = calbins_.insert(std::move(*image));
  if (!id) {
    return fail(CALRT_OUT_OF_RANGE,
                "too many calbins loaded (limit " + std::to_string(kMaxCalbins) + ")");
  }
  return *id;
}

Status Device::calbin_destroy(ObjectId id) {
  if (auto allowed = require_allowed(DeviceCall::kCalbinDestroy); !allowed) {
    return allowed;
  }
  auto image = find_calbin(id);
  if (!image) {
    return tl::unexpected(image.error());
  }
  drop_calbin_objects(id, /*keep_buffers_and_jobs=*/false);
  tombstones_.bury(id, "calbin #" + std::to_string((*image)->serial) + " was destroyed");
  calbins_.erase(id);
  return {};
}

Expected<const CalbinImage*> Device::calbin(ObjectId id, DeviceCall call) const {
  if (auto allowed = require_allowed(call); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto image = find_calbin(id);
  if (!image) {
    return tl::unexpected(image.error());
  }
  return *image;
}

Status Device::load_weights(CalbinImage& image) {
  if (image.manifest.timing_only) {
    return {};  // timing-only calbins carry op lists and sizes, no weights
  }
  auto dims = model_dims(image.manifest);
  if (!dims) {
    return tl::unexpected(dims.error());
  }
  if (config_.numerics_mutant == NumericsMutant::v_cache_bf16) {
    dims->v_int8 = false;  // the mutant keeps the declared int8 V-cache in BF16
  }
  std::shared_ptr<Workers> workers = Workers::shared(config_.host_threads);
  // The chips load side by side; the first failure in chip order is the one reported.
  std::vector<Expected<ChipWeights>> chips(image.manifest.chips, ChipWeights{});
  workers->run(chips.size(), [&](size_t c) {
    chips[c] = load_chip_weights(image.dir, image.manifest, *dims, static_cast<uint32_t>(c),
                                 config_.numerics_mutant == NumericsMutant::int4_nibbles_swapped);
  });
  std::vector<ChipWeights> weights;
  for (auto& chip : chips) {
    if (!chip) {
      return tl::unexpected(chip.error());
    }
    weights.push_back(std::move(*chip));
  }
  image.dims = *dims;
  image.weights = std::move(weights);
  image.workers = std::move(workers);
  return {};
}

Expected<ConfigureResult> Device::calbin_configure(ObjectId id, uint64_t timeout_ns) {
  if (auto allowed = require_allowed(DeviceCall::kCalbinConfigure); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_calbin(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  CalbinImage& image = **found;
  if (image.configured) {
    return fail(CALRT_WRONG_STATE,
                "calbin #" + std::to_string(image.serial) + " is already configured");
  }
  auto terms = memory_terms(image.manifest, image.kv);
  if (!terms) {
    return tl::unexpected(terms.error());
  }
  ConfigureResult result;
  for (uint32_t c = 0; c < terms->size(); ++c) {
    const auto& chip_terms = (*terms)[c];
    auto fits =
        check_capacity(c, chip_terms, config_.dram_usable_bytes(), used_by_other_calbins(id, c));
    if (!fits) {
      return tl::unexpected(fits.error());
    }
    result.memory_used_bytes.push_back(chip_terms.total());
  }
  uint64_t param_bytes = 0;
  for (const auto& t : *terms) {
    param_bytes += t.params;
  }
  result.duration_ps = configure_ps(param_bytes, image.manifest.param_blocks.size(), config_);
  const std::string label = "configure of calbin #" + std::to_string(image.serial);
  const UploadFaults faults = inject_upload(image);
  if (lost_) {
    return fail(CALRT_DEVICE_LOST, label + ": the device was lost during the parameter upload");
  }
  if (faults.slow_factor > 1) {
    result.duration_ps = result.duration_ps > kTimeNever / faults.slow_factor
                             ? kTimeNever
                             : result.duration_ps * faults.slow_factor;
  }
  // An upload that does not finish in time leaves the chips mid-upload with half-written
  // DRAM: only a chip reset recovers them. A hang never finishes; the watchdog stops it.
  const TimePs limit = timeout_ps(timeout_ns);
  const TimePs watchdog = config_.job_watchdog_ms * kPsPerMs;
  if (faults.hang || result.duration_ps > limit) {
    const TimePs stop = faults.hang ? std::min(limit, watchdog) : limit;
    engine_.advance_to(saturating_add(engine_.now(), stop));
    const std::string why =
        faults.hang ? label + ": the parameter upload hung (fault plan: job_hang); " +
                          (stop == limit ? "the call's timeout" : "the job watchdog") + " of " +
                          std::to_string(ps_to_ns(stop)) + " ns ended it"
                    : label + " needs " + std::to_string(ps_to_ns(result.duration_ps)) +
                          " ns of upload > timeout " + std::to_string(ps_to_ns(limit)) + " ns";
    for (uint32_t c = 0; c < chip_count(); ++c) {
      stop_chip(c, CALRT_CHIP_HUNG,
                "stopped in the parameter upload of calbin #" + std::to_string(image.serial));
    }
    raise_device_fault(CALRT_DEVICE_HUNG, CALRT_RESET_CHIP, faults.hang && faults.hang_persistent,
                       why);
    return fail(CALRT_DEVICE_HUNG, why);
  }
  if (auto loaded = load_weights(image); !loaded) {
    return tl::unexpected(loaded.error());
  }
  engine_.advance_to(saturating_add(engine_.now(), result.duration_ps));
  if (faults.failure) {
    return tl::unexpected(fail_upload(image, faults).error());
  }
  image.memory_used_bytes = result.memory_used_bytes;
  image.kv_allocator = std::make_unique<KvAllocator>(image.kv.total_tokens, engine_.invariants());
  image.configured = true;
  return result;
}

void Device::unconfigure(ObjectId id, CalbinImage& image) {
  // The chip lost its DRAM contents: weights, KV reservation and every KV handle go.
  drop_calbin_objects(id, /*keep_buffers_and_jobs=*/true);
  image.configured = false;
  image.weights.clear();
  image.workers.reset();
  image.dims.reset();
  image.kv_allocator.reset();
  image.memory_used_bytes.clear();
}

void Device::drop_calbin_objects(ObjectId calbin_id, bool keep_buffers_and_jobs) {
  std::vector<ObjectId> doomed;
  jobs_.for_each([&](ObjectId id, const Job& job) {
    if (job.calbin == calbin_id) {
      doomed.push_back(id);
    }
  });
  for (ObjectId id : doomed) {
    (void)cancel_job(id);
    if (!keep_buffers_and_jobs) {
      tombstones_.bury(
          id, "job #" + std::to_string(jobs_.find(id)->serial) + " was released with its calbin");
      jobs_.erase(id);
    }
  }
  doomed.clear();
  kvs_.for_each([&](ObjectId id, const KvHandle& kv) {
    if (kv.calbin == calbin_id) {
      doomed.push_back(id);
    }
  });
  for (ObjectId id : doomed) {
    tombstones_.bury(id, "kv handle #" + std::to_string(kvs_.find(id)->serial) +
                             " was released with its calbin's configuration");
    kvs_.erase(id);
  }
  if (keep_buffers_and_jobs) {
    return;
  }
  doomed.clear();
  buffers_.for_each([&](ObjectId id, const Buffer& buffer) {
    if (buffer.calbin == calbin_id) {
      doomed.push_back(id);
    }
  });
  for (ObjectId id : doomed) {
    tombstones_.bury(id, "buffer #" + std::to_string(buffers_.find(id)->serial) +
                             " was released with its calbin");
    buffers_.erase(id);
  }
}

}  // namespace simdev
