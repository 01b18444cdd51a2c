#include "simdev/device/model/capacity.hpp"

#include <algorithm>

namespace simdev {
namespace {

// The reservation's size in bytes, nullopt when absent; an unusable unit is an error.
Expected<std::optional<uint64_t>> reservation_bytes(const calbin::Manifest& manifest,
                                                    const std::string& name, uint32_t chip) {
  const calbin::Reservation* r = manifest.find_reservation(name, chip);
  if (r == nullptr) {
    return std::optional<uint64_t>{};
  }
  const auto bytes = r->size.bytes();
  if (!bytes) {
    return fail(CALRT_CALBIN_INVALID, "reservation \"" + name + "\" on chip " +
                                          std::to_string(chip) + ": size " +
                                          std::to_string(r->size.value) + " \"" + r->size.unit +
                                          "\" is not a byte amount");
  }
  return std::optional<uint64_t>{*bytes};
}

uint64_t param_file_bytes(const calbin::Manifest& manifest, uint32_t chip) {
  uint64_t sum = 0;
  for (const auto& block : manifest.param_blocks) {
    if ((block.chip_mask >> chip & 1u) == 0) {
      continue;
    }
    if (const calbin::FileEntry* file = manifest.find_file(block.file)) {
      sum += file->size;
    }
  }
  return sum;
}

uint64_t peak_workspace(const calbin::Manifest& manifest) {
  uint64_t peak = 0;
  for (const auto& model : manifest.models) {
    peak = std::max(peak, model.workspace_bytes);
  }
  return peak;
}

}  // namespace

std::string ChipMemoryTerms::to_string() const {
  return "params " + std::to_string(params) + " + kv_cache " + std::to_string(kv_cache) +
         " + workspace " + std::to_string(workspace) + " + io " + std::to_string(io) +
         " + command " + std::to_string(command) + " + guard " + std::to_string(guard) + " = " +
         std::to_string(total()) + " bytes";
}

Expected<KvGeometry> kv_geometry(const calbin::Manifest& manifest) {
  const calbin::LlmInfo& llm = manifest.llm;
  if (manifest.chips == 0 || llm.kv_heads % manifest.chips != 0) {
    return fail(CALRT_CALBIN_INVALID, "manifest llm: kv_heads = " + std::to_string(llm.kv_heads) +
                                          " does not split over " + std::to_string(manifest.chips) +
                                          " chips");
  }
  const uint64_t head_bits = calbin::kv_head_slot_bits(llm.k_dtype, llm.v_dtype, llm.head_dim);
  KvGeometry kv;
  kv.total_tokens = uint64_t{llm.batch} * llm.context;
  kv.bytes_per_token_per_chip =
      uint64_t{llm.layers} * (llm.kv_heads / manifest.chips) * head_bits / 8;
  return kv;
}

Expected<std::vector<ChipMemoryTerms>> memory_terms(const calbin::Manifest& manifest,
                                                    const KvGeometry& kv) {
  std::vector<ChipMemoryTerms> chips(manifest.chips);
  for (uint32_t c = 0; c < manifest.chips; ++c) {
    ChipMemoryTerms& t = chips[c];
    const uint64_t kv_needed = kv.total_tokens * kv.bytes_per_token_per_chip;
    struct Term {
      const char* name;
      uint64_t* field;
      uint64_t fallback;
    };
    const Term terms[] = {{"params", &t.params, param_file_bytes(manifest, c)},
                          {"kv_cache", &t.kv_cache, kv_needed},
                          {"workspace", &t.workspace, peak_workspace(manifest)},
                          {"io", &t.io, 0},
                          {"command", &t.command, 0},
                          {"guard", &t.guard, 0}};
    for (const Term& term : terms) {
      auto bytes = reservation_bytes(manifest, term.name, c);
      if (!bytes) {
        return tl::unexpected(bytes.error());
      }
      *term.field = bytes->value_or(term.fallback);
    }
    if (t.kv_cache < kv_needed) {
      return fail(CALRT_CALBIN_INVALID,
                  "reservation \"kv_cache\" on chip " + std::to_string(c) + " holds " +
                      std::to_string(t.kv_cache) +
                      " bytes; batch x context = " + std::to_string(kv.total_tokens) +
                      " tokens need " + std::to_string(kv_needed));
    }
  }
  return chips;
}

Status check_capacity(uint32_t chip, const ChipMemoryTerms& terms, uint64_t usable_bytes,
                      uint64_t used_by_others_bytes) {
  const uint64_t available =
      usable_bytes > used_by_others_bytes ? usable_bytes - used_by_others_bytes : 0;
  if (terms.total() <= available) {
    return {};
  }
  return fail(CALRT_OUT_OF_DEVICE_MEMORY,
              "chip " + std::to_string(chip) + ": " + terms.to_string() + " > available " +
                  std::to_string(available) + " bytes (usable " + std::to_string(usable_bytes) +
                  " - other calbins " + std::to_string(used_by_others_bytes) + ")");
}

}  // namespace simdev
