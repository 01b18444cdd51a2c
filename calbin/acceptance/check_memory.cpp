// Checks on the memory plan: reservations, addresses, parameter offsets, ping/pong and the
// per-chip capacity inequality. All arithmetic is overflow-checked: a manifest is input.
#include <algorithm>

#include "calbin/acceptance/capacity.hpp"
#include "calbin/acceptance/check_context.hpp"

namespace calbin::acceptance {
namespace {

// The largest per-chip memory any plausible card has; anything above is a unit error such
// as the vendor's "16777216 MB".
constexpr uint64_t kMaxPlausibleChipBytes = uint64_t{1} << 40;  // 1 TiB

struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;  // exclusive
};

std::optional<Range> range_of(uint64_t base, uint64_t size) {
  uint64_t end = 0;
  if (__builtin_add_overflow(base, size, &end)) {
    return std::nullopt;
  }
  return Range{base, end};
}

std::optional<Range> range_of(const Reservation& r) {
  const auto size = r.size.bytes();
  return size ? range_of(r.base, *size) : std::nullopt;
}

bool overlaps(const Range& a, const Range& b) { return a.begin < b.end && b.begin < a.end; }
bool contains(const Range& outer, const Range& inner) {
  return inner.begin >= outer.begin && inner.end <= outer.end;
}

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string reservation_at(size_t index, const Reservation& r) {
  return "reservations[" + std::to_string(index) + "] \"" + r.name + "\" (chip " +
         std::to_string(r.chip) + ")";
}

void check_tensor_span(const CheckContext& c, CheckResult& result, const std::string& where,
                       const TensorDesc& t, uint64_t address) {
  for (uint32_t chip = 0; chip < c.manifest.chips; ++chip) {
    if ((t.chip_mask >> chip & 1u) == 0) {
      continue;
    }
    const Reservation* r = c.manifest.find_reservation(t.reservation, chip);
    const auto outer = r ? range_of(*r) : std::nullopt;
    const auto inner = range_of(address, t.bytes);
    if (!r) {
      fail_check(result, c.manifest_file + ": " + where + " names reservation \"" + t.reservation +
                             "\" which chip " + std::to_string(chip) + " does not have");
    } else if (!outer || !inner || !contains(*outer, *inner)) {
      fail_check(result, c.manifest_file + ": " + where + " at " + hex(address) + " + " +
                             std::to_string(t.bytes) + " bytes leaves reservation \"" + r->name +
                             "\" of chip " + std::to_string(chip));
    }
  }
}

void check_model_tensors(const CheckContext& c, CheckResult& result, size_t m_index) {
  const Model& model = c.manifest.models[m_index];
  const std::string prefix = "models[" + std::to_string(m_index) + "] \"" + model.name + "\"";
  auto each = [&](const std::vector<TensorDesc>& tensors, const char* dir) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      check_tensor_span(
          c, result, prefix + "." + dir + "[" + std::to_string(i) + "] \"" + tensors[i].name + "\"",
          tensors[i], tensors[i].address);
    }
  };
  each(model.inputs, "inputs");
  each(model.outputs, "outputs");
  for (size_t s = 0; s < model.ping_pong.size(); ++s) {
    const PingPongSlot& slot = model.ping_pong[s];
    const std::string where =
        prefix + ".ping_pong[" + std::to_string(s) + "] \"" + slot.slot + "\"";
    for (size_t i = 0; i < slot.input_addresses.size() && i < model.inputs.size(); ++i) {
      check_tensor_span(
          c, result,
          where + ".input_addresses[" + std::to_string(i) + "] (\"" + model.inputs[i].name + "\")",
          model.inputs[i], slot.input_addresses[i]);
    }
    for (size_t i = 0; i < slot.output_addresses.size() && i < model.outputs.size(); ++i) {
      check_tensor_span(c, result,
                        where + ".output_addresses[" + std::to_string(i) + "] (\"" +
                            model.outputs[i].name + "\")",
                        model.outputs[i], slot.output_addresses[i]);
    }
  }
}

std::vector<Range> slot_ranges(const Model& model, const PingPongSlot& slot) {
  std::vector<Range> out;
  for (size_t i = 0; i < slot.input_addresses.size() && i < model.inputs.size(); ++i) {
    if (auto r = range_of(slot.input_addresses[i], model.inputs[i].bytes)) {
      out.push_back(*r);
    }
  }
  for (size_t i = 0; i < slot.output_addresses.size() && i < model.outputs.size(); ++i) {
    if (auto r = range_of(slot.output_addresses[i], model.outputs[i].bytes)) {
      out.push_back(*r);
    }
  }
  return out;
}

}  // namespace

void check_reservation_bounds(const CheckContext& c, CheckResult& result) {
  const auto& list = c.manifest.reservations;
  for (size_t i = 0; i < list.size(); ++i) {
    const Reservation& r = list[i];
    if (r.chip >= c.manifest.chips) {
      fail_check(result, c.manifest_file + ": " + reservation_at(i, r) + ": chip is beyond chips " +
                             std::to_string(c.manifest.chips));
    } else if (!r.size.bytes()) {
      fail_check(result, c.manifest_file + ": " + reservation_at(i, r) + ".size " +
                             std::to_string(r.size.value) + " \"" + r.size.unit +
                             "\" has an unknown unit or overflows 64 bits");
    } else if (!range_of(r)) {
      fail_check(result, c.manifest_file + ": " + reservation_at(i, r) + ": base " + hex(r.base) +
                             " + size " + std::to_string(*r.size.bytes()) +
                             " overflows 64-bit addresses");
    }
  }
}

void check_reservation_overlap(const CheckContext& c, CheckResult& result) {
  const auto& list = c.manifest.reservations;
  for (size_t i = 0; i < list.size(); ++i) {
    for (size_t j = i + 1; j < list.size(); ++j) {
      const auto a = range_of(list[i]);
      const auto b = range_of(list[j]);
      if (list[i].chip == list[j].chip && a && b && a->begin != a->end && b->begin != b->end &&
          overlaps(*a, *b)) {
        fail_check(result, c.manifest_file + ": " + reservation_at(i, list[i]) + " [" +
                               hex(a->begin) + ", " + hex(a->end) + ") overlaps " +
                               reservation_at(j, list[j]) + " [" + hex(b->begin) + ", " +
                               hex(b->end) + ")");
      }
    }
  }
}

void check_tensors_in_reservation(const CheckContext& c, CheckResult& result) {
  for (size_t i = 0; i < c.manifest.models.size(); ++i) {
    check_model_tensors(c, result, i);
  }
}

void check_params_in_file(const CheckContext& c, CheckResult& result) {
  const auto& weights = c.manifest.weights;
  if (weights.empty() && !c.manifest.timing_only) {
    fail_check(result, c.manifest_file +
                           ": weights: none listed, but timing_only is false: a functional "
                           "calbin needs its parameters (a calbin without data says "
                           "timing_only: true)");
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const WeightTensor& w = weights[i];
    const std::string where = "weights[" + std::to_string(i) + "] \"" + w.name + "\"";
    auto check_span = [&](const std::string& file, uint64_t offset, uint64_t bytes,
                          const char* what) {
      const FileEntry* entry = c.manifest.find_file(file);
      const auto span = range_of(offset, bytes);
      if (entry == nullptr) {
        fail_check(result, c.manifest_file + ": " + where + ": " + what + " file \"" + file +
                               "\" is not listed in files");
      } else if (!span || span->end > entry->size) {
        fail_check(result, c.manifest_file + ": " + where + ": " + what + " at offset " +
                               std::to_string(offset) + " + " + std::to_string(bytes) +
                               " bytes leaves \"" + file + "\" of " + std::to_string(entry->size) +
                               " bytes");
      }
    };
    if (!w.file.empty()) {
      check_span(w.file, w.offset, w.bytes, "data");
    }
    if (w.quant.scheme != "none" && !w.quant.scale_file.empty()) {
      uint64_t scale_bytes = 0;
      if (__builtin_mul_overflow(w.quant.scale_count, uint64_t{4}, &scale_bytes)) {
        fail_check(result, c.manifest_file + ": " + where + ".quant.scale_count " +
                               std::to_string(w.quant.scale_count) + " overflows 64 bits");
      } else {
        check_span(w.quant.scale_file, w.quant.scale_offset, scale_bytes, "scales");
      }
    }
  }
}

void check_ping_pong_aliasing(const CheckContext& c, CheckResult& result) {
  for (const Model& model : c.manifest.models) {
    if (model.ping_pong_may_alias) {
      continue;
    }
    for (size_t a = 0; a < model.ping_pong.size(); ++a) {
      for (size_t b = a + 1; b < model.ping_pong.size(); ++b) {
        for (const Range& ra : slot_ranges(model, model.ping_pong[a])) {
          for (const Range& rb : slot_ranges(model, model.ping_pong[b])) {
            if (overlaps(ra, rb)) {
              fail_check(result, c.manifest_file + ": model \"" + model.name + "\": slot \"" +
                                     model.ping_pong[a].slot + "\" [" + hex(ra.begin) + ", " +
                                     hex(ra.end) + ") aliases slot \"" + model.ping_pong[b].slot +
                                     "\" [" + hex(rb.begin) + ", " + hex(rb.end) + ")");
            }
          }
        }
      }
    }
  }
}

void check_memory_unit(const CheckContext& c, CheckResult& result) {
  const MemoryAmount& amount = c.manifest.device_memory_required;
  const auto bytes = amount.bytes();
  const std::string value = std::to_string(amount.value) + " \"" + amount.unit + "\"";
  if (!bytes) {
    fail_check(result, c.manifest_file + ": device_memory_required " + value +
                           " has no explicit known unit (B, KiB, MiB, GiB, KB, MB, GB) or "
                           "overflows 64 bits");
  } else if (*bytes > kMaxPlausibleChipBytes) {
    fail_check(result, c.manifest_file + ": device_memory_required " + value + " is " +
                           std::to_string(*bytes) +
                           " bytes per chip, more than any card has (1 TiB): the unit is wrong");
  }
}

// device_memory_required is what a runtime reserves before it loads the calbin: below the plan's
// own demand the load overruns it, above the card's usable memory the load is refused on a card
// where the plan itself fits. A unit error (checked by memory.unit) is left to that check.
void check_stated_requirement(const CheckContext& c, CheckResult& result, const ChipBudget& chip) {
  const MemoryAmount& amount = c.manifest.device_memory_required;
  const auto stated = amount.bytes();
  if (!stated || *stated > kMaxPlausibleChipBytes) return;
  const std::string value = "device_memory_required " + std::to_string(amount.value) + " " +
                            amount.unit + " (" + std::to_string(*stated) + " bytes per chip)";
  uint64_t own = 0;
  if (!__builtin_add_overflow(chip.params, chip.kv, &own) &&
      !__builtin_add_overflow(own, chip.workspace, &own) &&
      !__builtin_add_overflow(own, chip.io_and_command, &own) && *stated < own) {
    fail_check(result, c.manifest_file + ": " + value + " is less than chip " +
                           std::to_string(chip.chip) + "'s own plan: params " +
                           std::to_string(chip.params) + " + KV " + std::to_string(chip.kv) +
                           " + workspace " + std::to_string(chip.workspace) +
                           " + I/O and command " + std::to_string(chip.io_and_command) + " = " +
                           std::to_string(own) + " bytes");
  }
  if (*stated > chip.usable) {
    fail_check(result, c.manifest_file + ": " + value + " exceeds chip " +
                           std::to_string(chip.chip) + "'s usable " + std::to_string(chip.usable) +
                           " bytes");
  }
}

void check_memory_capacity(const CheckContext& c, CheckResult& result) {
  auto plan = plan_calbin(c.manifest, c.options.usable_bytes_per_chip);
  if (!plan) {
    fail_check(result, plan.error().to_string());
    return;
  }
  for (const ChipBudget& chip : plan->chips) {
    const auto headroom = chip.headroom();
    if (!headroom || *headroom < 0) {
      fail_check(result, c.manifest_file + ": chip " + std::to_string(chip.chip) + ": params " +
                             std::to_string(chip.params) + " + KV " + std::to_string(chip.kv) +
                             " + workspace " + std::to_string(chip.workspace) +
                             " + I/O and command " + std::to_string(chip.io_and_command) +
                             " + guard " + std::to_string(chip.guard) + " exceeds usable " +
                             std::to_string(chip.usable) + " bytes");
    }
    check_stated_requirement(c, result, chip);
    const Reservation* kv = c.manifest.find_reservation("kv_cache", chip.chip);
    const auto kv_size = kv ? kv->size.bytes() : std::nullopt;
    if (kv_size && *kv_size < chip.kv) {
      fail_check(result, c.manifest_file + ": chip " + std::to_string(chip.chip) +
                             ": reservation \"kv_cache\" holds " + std::to_string(*kv_size) +
                             " bytes but batch x context needs " + std::to_string(chip.kv));
    }
  }
}

}  // namespace calbin::acceptance
