// What each fault kind does at the device operations other than a job's compute (FAULTS.md):
// a job's input and output DMA, a KV-cache operation, and a configure's parameter upload. One
// function per operation, each the single dispatch over the kinds that operation knows; like
// compute_faults.hpp, they act on the device only through FaultEffects and return the detail
// the injection record carries. The Device asks its plan which faults fire and calls these.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "simdev/device/base/status.hpp"
#include "simdev/device/faults/fault_effects.hpp"
#include "simdev/device/faults/fault_plan.hpp"
#include "simdev/device/job.hpp"

namespace simdev {

// A job's input or output DMA (`where` names it): dma_h2d (input) and dma_d2h (output) fail
// the stage at its end with DMA_ERROR, which the stage's event applies; corrupted_output
// (output) scales a sixteenth of the staged output values by 2^32.
enum class DmaDirection { kInput, kOutput };
std::string apply_dma_fault(const Injection& injection, Job& job, const std::string& where,
                            DmaDirection direction, FaultEffects& device);

// A KV operation (`request`: "Kv_Clear of kv #3"): the first refusal the operation returns.
struct KvFaults {
  std::optional<Error> refusal;
};
// flip_kv_bit: flips one bit of the handle's KV on a chip ("layer 1 key slot 3 bit 5"), nullopt
// when the operation has no handle or the handle no contents.
using KvBitFlip = std::function<std::optional<std::string>(uint32_t chip, uint64_t draw)>;
std::string apply_kv_fault(const Injection& injection, const std::string& request,
                           const KvBitFlip& flip_kv_bit, FaultEffects& device, KvFaults& out);

// A configure's parameter upload: what the faults do to it; the Device applies the result
// (slowness, a hang, or a failure that flips a weight bit and faults the device).
struct UploadFaults {
  uint64_t slow_factor = 1;
  bool hang = false;
  bool hang_persistent = false;
  std::optional<Error> failure;  // DMA_ERROR, ECC_UNCORRECTABLE, FIRMWARE_CRASH
  uint32_t failure_level = 0;
  bool failure_persistent = false;
  std::optional<uint32_t> ecc_chip;  // ECC_UNCORRECTABLE: the chip whose weights flip
  uint64_t ecc_draw = 0;
};
std::string apply_upload_fault(const Injection& injection, const std::string& where,
                               FaultEffects& device, UploadFaults& out);

// Silent data corruption of staged outputs (see operation_faults.cpp); the detail text.
std::string corrupt_outputs(TensorBytes& outputs, uint64_t draw);

}  // namespace simdev
