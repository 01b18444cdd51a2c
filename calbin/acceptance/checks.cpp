#include "calbin/acceptance/checks.hpp"

#include <algorithm>
#include <array>

#include "calbin/acceptance/check_context.hpp"

namespace calbin {
namespace {

using acceptance::CheckContext;
using acceptance::CheckDef;

constexpr const char* kParseId = "manifest.parse";
constexpr const char* kModelTypesId = "models.types";
constexpr const char* kServiceParseId = "service.parse";

// The order checks run and are reported in. manifest.parse and service.parse are handled
// by run_checks itself because the others need what they produce.
constexpr std::array kManifestChecks = {
    CheckDef{"files.confined", "every file path stays inside the calbin directory",
             acceptance::check_files_confined},
    CheckDef{"files.present", "every listed file exists", acceptance::check_files_present},
    CheckDef{"files.size", "every file has its declared size", acceptance::check_files_size},
    CheckDef{"files.sha256", "every file has its declared SHA-256", acceptance::check_files_sha256},
    CheckDef{kModelTypesId, "models are only of type prefill, decode or kv_update",
             acceptance::check_model_types},
    CheckDef{"models.metadata", "model metadata agrees with the model type",
             acceptance::check_model_metadata},
    CheckDef{"models.names", "model names are unique and none is a prefix or substring of another",
             acceptance::check_model_names},
    CheckDef{"llm.shapes", "I/O tensors agree with the LLM info (batch, chunk, vocab)",
             acceptance::check_llm_shapes},
    CheckDef{"chips.mask", "chip masks agree with the chip count", acceptance::check_chip_mask},
    CheckDef{"reservations.bounds", "reservations have known units and no 64-bit overflow",
             acceptance::check_reservation_bounds},
    CheckDef{"reservations.overlap", "reservations of a chip do not overlap",
             acceptance::check_reservation_overlap},
    CheckDef{"tensors.in_reservation", "no tensor address leaves its reservation",
             acceptance::check_tensors_in_reservation},
    CheckDef{"params.in_file", "a functional calbin lists weights, none leaving its file",
             acceptance::check_params_in_file},
    CheckDef{"pingpong.aliasing", "ping and pong buffers do not alias",
             acceptance::check_ping_pong_aliasing},
    CheckDef{"memory.unit", "device_memory_required has an explicit, plausible unit",
             acceptance::check_memory_unit},
    CheckDef{"memory.capacity", "the per-chip capacity inequality holds",
             acceptance::check_memory_capacity},
    CheckDef{"golden.index", "the golden set is inside the calbin, listed, and agrees with it",
             acceptance::check_golden_index},
};

constexpr std::array kServiceChecks = {
    CheckDef{"service.models", "service model names match calbin models exactly",
             acceptance::check_service_models},
    CheckDef{"service.dimensions", "batch, context and vocab agree with the service manifest",
             acceptance::check_service_dimensions},
    CheckDef{"service.chip_mask", "the chip mask agrees with the service manifest",
             acceptance::check_service_chip_mask},
    CheckDef{"service.dtypes", "KV and logits dtypes agree with the service manifest",
             acceptance::check_service_dtypes},
    CheckDef{"service.tensors", "tensor roles and CSR indices of the service manifest exist",
             acceptance::check_service_tensors},
    CheckDef{"service.versions", "architecture, calbin version and runtime ABI agree",
             acceptance::check_service_versions},
};

CheckResult make(std::string_view id, std::string_view title) {
  return CheckResult{std::string(id), std::string(title), CheckStatus::kPass, {}};
}

// The reader stops at the first structural error; attribute it to the check it belongs to,
// so that a model of an unknown type fails models.types rather than a generic parse check.
bool is_model_type_error(const Error& error) {
  const std::string& f = error.field;
  return f.rfind("models[", 0) == 0 && f.size() > 5 && f.compare(f.size() - 5, 5, ".type") == 0;
}

void add_skipped(CheckReport& report, const CheckDef& def, const std::string& reason) {
  CheckResult result = make(def.id, def.title);
  acceptance::skip_check(result, reason);
  report.checks.push_back(std::move(result));
}

void add_warnings(const Manifest& m, CheckReport& report) {
  if (!m.golden) {
    report.warnings.push_back("no golden set: the device smoke needs one (--golden DIR)");
  }
  if (m.llm.tokenizer_context > m.llm.context) {
    report.warnings.push_back("the tokenizer declares " + std::to_string(m.llm.tokenizer_context) +
                              " tokens of context but the calbin holds " +
                              std::to_string(m.llm.context) +
                              ": the usable limit is the smaller one");
  }
  for (const Model& model : m.models) {
    if (model.ops.empty()) {
      report.warnings.push_back("model \"" + model.name + "\" has no op list: it cannot be timed");
    }
  }
}

void run_service_checks(const CheckOptions& options, const CheckContext& base,
                        CheckReport& report) {
  CheckResult parse = make(kServiceParseId, "the service manifest parses");
  if (!options.service_manifest) {
    acceptance::skip_check(parse, "no service manifest given (--manifest)");
    report.checks.push_back(parse);
    for (const CheckDef& def : kServiceChecks) {
      add_skipped(report, def, "no service manifest given (--manifest)");
    }
    return;
  }
  auto service = read_service_manifest(*options.service_manifest);
  if (!service) {
    acceptance::fail_check(parse, service.error().to_string());
    report.checks.push_back(parse);
    for (const CheckDef& def : kServiceChecks) {
      add_skipped(report, def, "the service manifest did not parse");
    }
    return;
  }
  report.checks.push_back(parse);
  CheckContext context = base;
  context.service = &*service;
  context.service_file = options.service_manifest->string();
  for (const CheckDef& def : kServiceChecks) {
    CheckResult result = make(def.id, def.title);
    def.run(context, result);
    report.checks.push_back(std::move(result));
  }
}

}  // namespace

std::string_view to_string(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "PASS";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kSkip:
      return "SKIP";
  }
  return "?";
}

bool CheckReport::passed() const {
  return std::none_of(checks.begin(), checks.end(),
                      [](const CheckResult& c) { return c.status == CheckStatus::kFail; });
}

const CheckResult* CheckReport::find(std::string_view id) const {
  for (const CheckResult& c : checks) {
    if (c.id == id) {
      return &c;
    }
  }
  return nullptr;
}

std::vector<std::string> CheckReport::failed_ids() const {
  std::vector<std::string> ids;
  for (const CheckResult& c : checks) {
    if (c.status == CheckStatus::kFail) {
      ids.push_back(c.id);
    }
  }
  return ids;
}

std::vector<std::pair<std::string, std::string>> check_catalog() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back(kParseId, "manifest.json parses with a known schema");
  for (const CheckDef& def : kManifestChecks) {
    out.emplace_back(def.id, def.title);
  }
  out.emplace_back(kServiceParseId, "the service manifest parses");
  for (const CheckDef& def : kServiceChecks) {
    out.emplace_back(def.id, def.title);
  }
  return out;
}

std::optional<std::string> memory_plan_violation(const Manifest& manifest,
                                                 const std::string& manifest_file) {
  const CheckOptions options;
  const CheckContext context{manifest, {}, manifest_file, nullptr, {}, options};
  for (const acceptance::CheckFn check :
       {acceptance::check_reservation_bounds, acceptance::check_reservation_overlap,
        acceptance::check_tensors_in_reservation, acceptance::check_ping_pong_aliasing}) {
    CheckResult result;
    check(context, result);
    if (result.status == CheckStatus::kFail && !result.messages.empty()) {
      return result.messages.front();
    }
  }
  return std::nullopt;
}

CheckReport run_checks(const CheckOptions& options) {
  CheckReport report;
  report.calbin_dir = options.calbin_dir;
  CheckResult parse = make(kParseId, "manifest.json parses with a known schema");
  auto manifest = read_manifest(options.calbin_dir);
  if (!manifest) {
    const bool type_error = is_model_type_error(manifest.error());
    if (!type_error) {
      acceptance::fail_check(parse, manifest.error().to_string());
    }
    report.checks.push_back(parse);
    for (const CheckDef& def : kManifestChecks) {
      if (type_error && std::string_view(def.id) == kModelTypesId) {
        CheckResult result = make(def.id, def.title);
        acceptance::fail_check(result, manifest.error().to_string());
        report.checks.push_back(std::move(result));
      } else {
        add_skipped(report, def, "manifest.json did not parse");
      }
    }
    add_skipped(report, CheckDef{kServiceParseId, "the service manifest parses", nullptr},
                "manifest.json did not parse");
    for (const CheckDef& def : kServiceChecks) {
      add_skipped(report, def, "manifest.json did not parse");
    }
    return report;
  }
  report.checks.push_back(parse);
  const CheckContext context{
      *manifest, options.calbin_dir, (options.calbin_dir / kManifestFileName).string(), nullptr, "",
      options};
  for (const CheckDef& def : kManifestChecks) {
    CheckResult result = make(def.id, def.title);
    def.run(context, result);
    report.checks.push_back(std::move(result));
  }
  run_service_checks(options, context, report);
  add_warnings(*manifest, report);
  return report;
}

}  // namespace calbin
