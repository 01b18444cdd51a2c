#include "calbin/acceptance/capacity.hpp"

#include <algorithm>
#include <limits>

namespace calbin {
namespace {

std::optional<uint64_t> mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    return std::nullopt;
  }
  return out;
}

std::optional<uint64_t> add(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    return std::nullopt;
  }
  return out;
}

// In bits until the end, so int4 stays exact.
std::optional<uint64_t> kv_for_heads(const KvGeometry& g, uint64_t heads) {
  if (g.head_dim > std::numeric_limits<uint32_t>::max()) {
    return std::nullopt;
  }
  std::optional<uint64_t> bits =
      kv_head_slot_bits(g.k_dtype, g.v_dtype, static_cast<uint32_t>(g.head_dim));
  for (uint64_t factor : {g.layers, heads, g.context, g.batch}) {
    bits = bits ? mul(*bits, factor) : std::nullopt;
  }
  if (!bits) {
    return std::nullopt;
  }
  return (*bits + 7) / 8;
}

uint64_t chip_usage(const Manifest& m, uint32_t chip, std::string_view reservation) {
  const Reservation* r = m.find_reservation(reservation, chip);
  return r == nullptr ? 0 : r->size.bytes().value_or(0);
}

Result<uint64_t> chip_params(const Manifest& m, uint32_t chip) {
  uint64_t total = 0;
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const WeightTensor& w = m.weights[i];
    if ((w.shard.chip_mask >> chip & 1u) == 0) {
      continue;
    }
    // Quantisation scales sit in device memory beside their weights.
    const auto scale_bytes =
        w.quant.scheme == "none" ? std::optional<uint64_t>(0) : mul(w.quant.scale_count, 4);
    auto sum = scale_bytes ? add(total, w.bytes) : std::nullopt;
    sum = sum ? add(*sum, *scale_bytes) : std::nullopt;
    if (!sum) {
      return fail("manifest.json", "weights[" + std::to_string(i) + "]",
                  "\"" + w.name + "\": bytes " + std::to_string(w.bytes) + " + scales of " +
                      std::to_string(w.quant.scale_count) + " x 4 bytes take chip " +
                      std::to_string(chip) + "'s parameter bytes past 64 bits");
    }
    total = *sum;
  }
  return total;
}

}  // namespace

std::optional<KvBytes> kv_bytes(const KvGeometry& g) {
  if (g.chips == 0) {
    return std::nullopt;
  }
  const uint64_t heads_per_chip = (g.kv_heads + g.chips - 1) / g.chips;
  auto total = kv_for_heads(g, g.kv_heads);
  auto per_chip = kv_for_heads(g, heads_per_chip);
  KvGeometry one_token = g;
  one_token.context = 1;
  one_token.batch = 1;
  auto per_token = kv_for_heads(one_token, heads_per_chip);
  if (!total || !per_chip || !per_token) {
    return std::nullopt;
  }
  return KvBytes{*total, *per_chip, *per_token};
}

std::optional<uint64_t> ChipBudget::demand() const {
  std::optional<uint64_t> sum = params;
  for (uint64_t term : {kv, workspace, io_and_command, guard}) {
    sum = sum ? add(*sum, term) : std::nullopt;
  }
  return sum;
}

std::optional<int64_t> ChipBudget::headroom() const {
  const auto need = demand();
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (!need || *need > kMax || usable > kMax) {
    return std::nullopt;
  }
  return static_cast<int64_t>(usable) - static_cast<int64_t>(*need);
}

uint64_t largest_fit(uint64_t usable, uint64_t fixed, uint64_t per_unit) {
  if (fixed > usable) {
    return 0;
  }
  if (per_unit == 0) {
    return std::numeric_limits<uint64_t>::max();
  }
  return (usable - fixed) / per_unit;
}

Result<CapacityPlan> plan_figures(const KvGeometry& geometry, uint64_t params_per_chip,
                                  uint64_t workspace, uint64_t io_and_command, uint64_t guard,
                                  uint64_t usable_bytes_per_chip) {
  auto kv = kv_bytes(geometry);
  if (!kv) {
    return fail("", "kv", "the KV size overflows 64 bits or chips is 0");
  }
  CapacityPlan plan{geometry, *kv, {}, 0, 0};
  for (uint32_t chip = 0; chip < geometry.chips; ++chip) {
    plan.chips.push_back(ChipBudget{chip, params_per_chip, kv->per_chip, workspace, io_and_command,
                                    guard, usable_bytes_per_chip});
  }
  ChipBudget fixed = plan.chips.front();
  fixed.kv = 0;
  const uint64_t fixed_bytes = fixed.demand().value_or(std::numeric_limits<uint64_t>::max());
  const auto per_context = mul(kv->per_token_per_chip, std::max<uint64_t>(geometry.batch, 1));
  const auto per_batch = mul(kv->per_token_per_chip, geometry.context);
  plan.max_context =
      per_context ? largest_fit(usable_bytes_per_chip, fixed_bytes, *per_context) : 0;
  plan.max_batch = per_batch ? largest_fit(usable_bytes_per_chip, fixed_bytes, *per_batch) : 0;
  return plan;
}

Result<CapacityPlan> plan_calbin(const Manifest& m, uint64_t usable_bytes_per_chip) {
  const KvGeometry geometry{m.llm.layers, m.llm.kv_heads, m.llm.head_dim, m.llm.context,
                            m.llm.batch,  m.llm.k_dtype,  m.llm.v_dtype,  m.chips};
  uint64_t workspace = 0;
  for (const Model& model : m.models) {
    workspace = std::max(workspace, model.workspace_bytes);
  }
  auto plan = plan_figures(geometry, 0, workspace, 0, 0, usable_bytes_per_chip);
  if (!plan) {
    return plan;
  }
  uint64_t worst_fixed = 0;
  for (ChipBudget& chip : plan->chips) {
    auto params = chip_params(m, chip.chip);
    if (!params) {
      return tl::unexpected(params.error());
    }
    chip.params = *params;
    chip.io_and_command = chip_usage(m, chip.chip, "io") + chip_usage(m, chip.chip, "command");
    chip.guard = chip_usage(m, chip.chip, "guard");
    ChipBudget fixed = chip;
    fixed.kv = 0;
    worst_fixed = std::max(worst_fixed, fixed.demand().value_or(UINT64_MAX));
  }
  const auto per_context = mul(plan->kv.per_token_per_chip, std::max<uint64_t>(m.llm.batch, 1));
  const auto per_batch = mul(plan->kv.per_token_per_chip, m.llm.context);
  plan->max_context =
      per_context ? largest_fit(usable_bytes_per_chip, worst_fixed, *per_context) : 0;
  plan->max_batch = per_batch ? largest_fit(usable_bytes_per_chip, worst_fixed, *per_batch) : 0;
  return plan;
}

}  // namespace calbin
