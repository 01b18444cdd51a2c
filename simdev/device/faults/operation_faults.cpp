#include "simdev/device/faults/operation_faults.hpp"

#include "simdev/device/base/random_stream.hpp"

namespace simdev {
namespace {

// Silent data corruption that a numeric check cannot miss. Each 16-bit word of the outputs
// (a BF16 value: sign 15, exponent 14..7, mantissa 6..0) is picked with probability 1/16,
// and the bits of its exponent are flipped so that it grows by 32 (shrinks by 32 when
// that would overflow): the value is scaled by 2^32. A single exponent bit would not do:
// flipping the top one turns values in [1, 2) into Inf/NaN, which a careless comparison
// (NaN > tolerance is false) lets pass, and flipping a lower one shrinks the values near 1
// to almost nothing, which a cosine barely notices. Scaled by 2^32 a value stays finite
// even squared in float, the picked sixteenth of the values carries nearly all the energy
// (the cosine with the true logits drops to about 0.25 whatever their scale), the argmax
// moves and the max error is in the millions. At least one word changes, even in a tiny
// output.
uint16_t scaled_by_2_32(uint16_t word) {
  const uint32_t exponent = (word >> 7) & 0xFFu;
  const uint32_t shifted = exponent <= 222 ? exponent + 32 : exponent - 32;
  return static_cast<uint16_t>((word & 0x807Fu) | (shifted << 7));
}

}  // namespace

std::string corrupt_outputs(TensorBytes& outputs, uint64_t draw) {
  RandomStream pick(draw, "corrupted_output");
  uint64_t words = 0;
  uint64_t changed = 0;
  const auto corrupt = [](std::vector<uint8_t>& tensor, size_t word) {
    const auto value = static_cast<uint16_t>(tensor[2 * word] | (tensor[2 * word + 1] << 8));
    const uint16_t bad = scaled_by_2_32(value);
    tensor[2 * word] = static_cast<uint8_t>(bad & 0xFFu);
    tensor[2 * word + 1] = static_cast<uint8_t>(bad >> 8);
  };
  for (auto& tensor : outputs) {
    for (size_t w = 0; w < tensor.size() / 2; ++w) {
      ++words;
      if (pick.below(16) == 0) {
        corrupt(tensor, w);
        ++changed;
      }
    }
  }
  if (changed == 0 && words > 0) {
    uint64_t target = draw % words;
    for (auto& tensor : outputs) {
      const uint64_t here = tensor.size() / 2;
      if (target < here) {
        corrupt(tensor, target);
        changed = 1;
        break;
      }
      target -= here;
    }
  }
  return "scaled " + std::to_string(changed) + " of " + std::to_string(words) +
         " 16-bit output values by 2^32 (exponent bits flipped)";
}

namespace {

std::string correct_ecc(const FaultSpec& spec, FaultEffects& device) {
  device.correct_ecc(spec.chip);
  return "chip " + std::to_string(spec.chip) + " corrected an ECC error";
}

std::string lose(const std::string& where, FaultEffects& device) {
  device.lose_device(where);
  return "the device is lost";
}

constexpr const char* kNoEffect = "no effect at this operation";

}  // namespace

std::string apply_dma_fault(const Injection& injection, Job& job, const std::string& where,
                            DmaDirection direction, FaultEffects& device) {
  const FaultSpec& spec = *injection.spec;
  const bool input = direction == DmaDirection::kInput;
  switch (injection.kind) {
    case FaultKind::kDmaH2d:
    case FaultKind::kDmaD2h:
      if (input != (injection.kind == FaultKind::kDmaH2d)) break;
      if (!job.final() && !job.stage_fault) {
        job.stage_fault = Job::StageFault{
            CALRT_JOB_FAILED,
            CALRT_DMA_ERROR,
            CALRT_RESET_JOB_ABORT,
            spec.persistent,
            false,
            where + " failed (fault plan: " + (input ? "dma_h2d" : "dma_d2h") + ")"};
      }
      return where + ": the transfer fails at its end with DMA_ERROR";
    case FaultKind::kCorruptedOutput:
      if (input) break;
      return where + ": " +
             (job.final() ? std::string("no effect: the job had ended")
                          : corrupt_outputs(job.staged_outputs, injection.draw));
    case FaultKind::kEccCorrectable:
      return where + ": " + correct_ecc(spec, device);
    case FaultKind::kDeviceLost:
      return where + ": " + lose(where, device);
    default:
      break;
  }
  return where + ": " + kNoEffect;
}

std::string apply_kv_fault(const Injection& injection, const std::string& request,
                           const KvBitFlip& flip_kv_bit, FaultEffects& device, KvFaults& out) {
  const FaultSpec& spec = *injection.spec;
  const auto refuse = [&out](CalrtCode code, const std::string& message) {
    if (!out.refusal) out.refusal = Error{code, message};
  };
  const std::string prefix = request + ": ";
  switch (injection.kind) {
    case FaultKind::kEccCorrectable:
      return prefix + correct_ecc(spec, device);
    case FaultKind::kEccUncorrectable: {
      const std::optional<std::string> flipped = flip_kv_bit(spec.chip, injection.draw);
      const std::string what = "uncorrectable ECC error on chip " + std::to_string(spec.chip) +
                               " during " + request +
                               (flipped ? " (" + *flipped + " flipped)" : " (no KV contents)");
      device.count_uncorrected(spec.chip);
      device.stop_chip(spec.chip, CALRT_CHIP_DEGRADED, what);
      device.raise_device_fault(CALRT_ECC_UNCORRECTABLE, CALRT_RESET_CHIP, spec.persistent, what);
      refuse(CALRT_ECC_UNCORRECTABLE, request + " failed: " + what);
      return prefix + what;
    }
    case FaultKind::kDeviceLost:
      device.lose_device(request);
      refuse(CALRT_DEVICE_LOST, request + " failed: the device was lost");
      return prefix + "the device is lost";
    case FaultKind::kFirmwareCrash: {
      const std::string why = "the firmware crashed during " + request;
      for (uint32_t c = 0; c < device.chip_count(); ++c) {
        device.stop_chip(c, CALRT_CHIP_HUNG, "firmware crashed during " + request);
      }
      device.raise_device_fault(CALRT_FIRMWARE_CRASH, CALRT_RESET_CHIP, spec.persistent, why);
      device.fail_in_flight(CALRT_FIRMWARE_CRASH, why);
      refuse(CALRT_FIRMWARE_CRASH, request + " failed: " + why);
      return prefix + "the firmware crashed; every in-flight job failed";
    }
    case FaultKind::kKvExhaustion:
      refuse(CALRT_KV_EXHAUSTED, request +
                                     ": the KV reservation has no room (fault plan: "
                                     "kv_exhaustion, as if the reservation were full)");
      return prefix + "refused as if the KV reservation were full";
    default:
      return prefix + kNoEffect;
  }
}

std::string apply_upload_fault(const Injection& injection, const std::string& where,
                               FaultEffects& device, UploadFaults& out) {
  const FaultSpec& spec = *injection.spec;
  const auto failure = [&out](CalrtCode code, uint32_t level, bool persistent,
                              const std::string& message) {
    if (!out.failure) {
      out.failure = Error{code, message};
      out.failure_level = level;
      out.failure_persistent = persistent;
    }
  };
  const std::string prefix = where + ": ";
  switch (injection.kind) {
    case FaultKind::kDmaH2d:
      failure(CALRT_DMA_ERROR, CALRT_RESET_JOB_ABORT, spec.persistent,
              where + " failed: DMA error (fault plan: dma_h2d)");
      return prefix + "the transfer fails with DMA_ERROR";
    case FaultKind::kJobHang:
      out.hang = true;
      out.hang_persistent = out.hang_persistent || spec.persistent;
      return prefix + "the upload hangs";
    case FaultKind::kEccCorrectable:
      return prefix + correct_ecc(spec, device);
    case FaultKind::kEccUncorrectable:
      if (!out.failure) {
        out.ecc_chip = spec.chip;
        out.ecc_draw = injection.draw;
      }
      failure(CALRT_ECC_UNCORRECTABLE, CALRT_RESET_CHIP, spec.persistent,
              where + " failed: uncorrectable ECC error in chip " + std::to_string(spec.chip) +
                  "'s weights");
      return prefix + "uncorrectable ECC error in chip " + std::to_string(spec.chip) + "'s weights";
    case FaultKind::kDeviceLost:
      return prefix + lose(where, device);
    case FaultKind::kFirmwareCrash:
      failure(CALRT_FIRMWARE_CRASH, CALRT_RESET_CHIP, spec.persistent,
              where + " failed: the firmware crashed");
      return prefix + "the firmware crashed";
    case FaultKind::kSlowCompletion:
      out.slow_factor = saturating_mul(out.slow_factor, fault_factor(spec));
      return prefix + "the upload takes x" + std::to_string(fault_factor(spec)) + " longer";
    default:
      return prefix + kNoEffect;
  }
}

}  // namespace simdev
