#include "runner/tools/plan.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "calbin/acceptance/capacity.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/report.hpp"

namespace runner {
namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

double gib(uint64_t bytes) { return static_cast<double>(bytes) / kGiB; }
uint64_t bytes_of(double amount, double unit) { return static_cast<uint64_t>(amount * unit); }

// Applies the geometry flags over a starting geometry; an unknown dtype is a usage error.
calbin::Result<calbin::KvGeometry> apply_flags(calbin::KvGeometry g, const PlanOptions& o) {
  g.layers = o.layers.value_or(g.layers);
  g.kv_heads = o.kv_heads.value_or(g.kv_heads);
  g.head_dim = o.head_dim.value_or(g.head_dim);
  g.context = o.context.value_or(g.context);
  g.batch = o.batch.value_or(g.batch);
  g.chips = o.chips.value_or(g.chips);
  for (auto [flag, text, target] : {std::tuple{"--k-dtype", &o.k_dtype, &g.k_dtype},
                                    std::tuple{"--v-dtype", &o.v_dtype, &g.v_dtype}}) {
    if (*text) {
      auto dtype = calbin::parse_dtype(**text);
      if (!dtype) {
        return calbin::fail("", flag, "unknown dtype \"" + **text + "\"");
      }
      *target = *dtype;
    }
  }
  return g;
}

calbin::Result<calbin::CapacityPlan> make_plan(const PlanOptions& o) {
  const uint64_t usable = bytes_of(o.usable_gib_per_chip, kGiB);
  if (o.calbin.empty()) {
    auto g = apply_flags(
        calbin::KvGeometry{0, 0, 0, 0, 1, calbin::Dtype::kBf16, calbin::Dtype::kBf16, 1}, o);
    if (!g) {
      return tl::unexpected(g.error());
    }
    return calbin::plan_figures(*g, bytes_of(o.params_gib_per_chip, kGiB),
                                bytes_of(o.workspace_mib, kMiB), bytes_of(o.io_mib, kMiB),
                                bytes_of(o.guard_mib, kMiB), usable);
  }
  auto manifest = calbin::read_manifest(o.calbin);
  if (!manifest) {
    return tl::unexpected(manifest.error());
  }
  const calbin::LlmInfo& llm = manifest->llm;
  auto g = apply_flags(calbin::KvGeometry{llm.layers, llm.kv_heads, llm.head_dim, llm.context,
                                          llm.batch, llm.k_dtype, llm.v_dtype, manifest->chips},
                       o);
  if (!g) {
    return tl::unexpected(g.error());
  }
  calbin::Manifest what_if = *manifest;
  what_if.llm.layers = static_cast<uint32_t>(g->layers);
  what_if.llm.kv_heads = static_cast<uint32_t>(g->kv_heads);
  what_if.llm.head_dim = static_cast<uint32_t>(g->head_dim);
  what_if.llm.context = static_cast<uint32_t>(g->context);
  what_if.llm.batch = static_cast<uint32_t>(g->batch);
  what_if.llm.k_dtype = g->k_dtype;
  what_if.llm.v_dtype = g->v_dtype;
  what_if.chips = g->chips;
  return calbin::plan_calbin(what_if, usable);
}

void print_kv(const calbin::CapacityPlan& plan, json& doc) {
  const calbin::KvGeometry& g = plan.geometry;
  std::printf(
      "KV cache: %llu layers x %llu kv heads x %llu head_dim x %llu context x %llu batch "
      "x (K %s + V %s)\n",
      static_cast<unsigned long long>(g.layers), static_cast<unsigned long long>(g.kv_heads),
      static_cast<unsigned long long>(g.head_dim), static_cast<unsigned long long>(g.context),
      static_cast<unsigned long long>(g.batch), std::string(calbin::to_string(g.k_dtype)).c_str(),
      std::string(calbin::to_string(g.v_dtype)).c_str());
  std::printf("  total               %14llu B  %9.3f GiB\n",
              static_cast<unsigned long long>(plan.kv.total), gib(plan.kv.total));
  std::printf("  per chip (%u chips)  %14llu B  %9.3f GiB\n", g.chips,
              static_cast<unsigned long long>(plan.kv.per_chip), gib(plan.kv.per_chip));
  std::printf("  per position, chip  %14llu B\n",
              static_cast<unsigned long long>(plan.kv.per_token_per_chip));
  doc["kv"] = {{"total_bytes", plan.kv.total},
               {"per_chip_bytes", plan.kv.per_chip},
               {"per_token_per_chip_bytes", plan.kv.per_token_per_chip},
               {"total_gib", gib(plan.kv.total)},
               {"per_chip_gib", gib(plan.kv.per_chip)}};
}

bool print_budgets(const calbin::CapacityPlan& plan, json& doc) {
  bool fits = true;
  std::printf("per chip (GiB): params + KV + workspace + I/O&cmd + guard <= usable\n");
  json chips = json::array();
  for (const calbin::ChipBudget& c : plan.chips) {
    const auto headroom = c.headroom();
    const bool ok = headroom && *headroom >= 0;
    fits &= ok;
    std::printf("  chip %u: %.3f + %.3f + %.3f + %.3f + %.3f = %.3f %s %.3f  headroom %.3f  %s\n",
                c.chip, gib(c.params), gib(c.kv), gib(c.workspace), gib(c.io_and_command),
                gib(c.guard), gib(c.demand().value_or(0)), ok ? "<=" : ">", gib(c.usable),
                headroom ? static_cast<double>(*headroom) / kGiB : 0.0,
                ok ? "fits" : "DOES NOT FIT");
    chips.push_back({{"chip", c.chip},
                     {"params", c.params},
                     {"kv", c.kv},
                     {"workspace", c.workspace},
                     {"io_and_command", c.io_and_command},
                     {"guard", c.guard},
                     {"usable", c.usable},
                     {"headroom", headroom ? *headroom : 0},
                     {"fits", ok}});
  }
  std::printf("largest context at batch %llu: %llu; largest batch at context %llu: %llu\n",
              static_cast<unsigned long long>(plan.geometry.batch),
              static_cast<unsigned long long>(plan.max_context),
              static_cast<unsigned long long>(plan.geometry.context),
              static_cast<unsigned long long>(plan.max_batch));
  doc["chips"] = chips;
  doc["fits"] = fits;
  doc["max_context"] = plan.max_context;
  doc["max_batch"] = plan.max_batch;
  return fits;
}

void print_s8_v(const calbin::CapacityPlan& plan, json& doc) {
  calbin::KvGeometry s8 = plan.geometry;
  s8.v_dtype = calbin::Dtype::kInt8;
  const auto kv = calbin::kv_bytes(s8);
  if (!kv) {
    return;
  }
  const double saved =
      plan.kv.total ? 1.0 - static_cast<double>(kv->total) / static_cast<double>(plan.kv.total)
                    : 0.0;
  std::printf(
      "with an S8 V-cache (K %s): total %.3f GiB, per chip %.3f GiB: %.1f%% saved "
      "(only V shrinks, and gains a scale per position and head)\n",
      std::string(calbin::to_string(s8.k_dtype)).c_str(), gib(kv->total), gib(kv->per_chip),
      saved * 100.0);
  doc["s8_v_cache"] = {
      {"total_bytes", kv->total}, {"per_chip_bytes", kv->per_chip}, {"saved_fraction", saved}};
}

}  // namespace

int run_plan(const PlanOptions& options) {
  if (!options.json.empty()) {
    if (std::string problem = check_output_path("--json", options.json, options.calbin);
        !problem.empty()) {
      std::fprintf(stderr, "calrt plan: %s\n", problem.c_str());
      return kExitUsage;
    }
  }
  auto plan = make_plan(options);
  if (!plan) {
    std::fprintf(stderr, "calrt plan: %s\n", plan.error().to_string().c_str());
    return kExitUsage;
  }
  json doc = {{"calbin", options.calbin.string()}};
  print_kv(*plan, doc);
  const bool fits = print_budgets(*plan, doc);
  // From flags alone the weights are whatever --params-gib says, 0 unless given: a fit
  // without them says nothing about the model.
  if (options.calbin.empty() && options.params_gib_per_chip == 0.0) {
    const std::string note =
        "the weights are not counted (no calbin, and no --params-gib): params 0 per chip";
    std::printf("note: %s\n", note.c_str());
    doc["warnings"] = json::array({note});
  }
  print_s8_v(*plan, doc);
  // A chip passes when its budget fits its usable DRAM.
  Counts counts{.unit = "chip"};
  for (const json& chip : doc["chips"]) {
    (chip["fits"].get<bool>() ? counts.passed : counts.failed) += 1;
  }
  doc.update(to_json(Envelope{.schema = "calrt-plan/1",
                              .command = "plan",
                              .result = fits ? Verdict::pass : Verdict::fail,
                              .counts = counts}));
  if (!options.json.empty()) {
    if (std::string error = write_json_file(options.json, doc); !error.empty()) {
      std::fprintf(stderr, "calrt plan: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  return fits ? kExitPass : kExitFail;
}

}  // namespace runner
