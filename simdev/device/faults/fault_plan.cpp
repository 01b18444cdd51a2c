// The fault plan: its YAML schema (FAULTS.md), the kind/site table and the injector.
#include "simdev/device/faults/fault_plan.hpp"

#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <yaml-cpp/yaml.h>

namespace simdev {
namespace {

constexpr std::array<const char*, kFaultKindCount> kKindNames = {
    "dma_h2d",           "dma_d2h",          "job_hang",       "chip_hang",     "ecc_correctable",
    "ecc_uncorrectable", "device_lost",      "firmware_crash", "d2d_link_down", "thermal_throttle",
    "kv_exhaustion",     "corrupted_output", "slow_completion"};
constexpr std::array<const char*, kFaultSiteCount> kSiteNames = {"configure", "prefill", "decode",
                                                                 "kv_update", "kv"};
constexpr uint32_t kPpm = 1000000;
constexpr uint32_t kMaxFactor = 1000000;
constexpr uint64_t kMaxMicroseconds = kTimeNever / kPsPerUs;

// One bit per FaultPoint: where each kind can happen (the table of FAULTS.md).
constexpr uint32_t bit(FaultPoint point) { return 1u << static_cast<uint32_t>(point); }
constexpr uint32_t kUpload = bit(FaultPoint::kUpload);
constexpr uint32_t kInput = bit(FaultPoint::kInputDma);
constexpr uint32_t kCompute = bit(FaultPoint::kCompute);
constexpr uint32_t kOutput = bit(FaultPoint::kOutputDma);
constexpr uint32_t kAlloc = bit(FaultPoint::kKvAllocate);
constexpr uint32_t kClear = bit(FaultPoint::kKvClear);
constexpr uint32_t kEvery = kUpload | kInput | kCompute | kOutput | kAlloc | kClear;

constexpr std::array<uint32_t, kFaultKindCount> kKindPoints = {
    kUpload | kInput,                      // dma_h2d
    kOutput,                               // dma_d2h
    kUpload | kCompute,                    // job_hang
    kCompute,                              // chip_hang
    kEvery,                                // ecc_correctable
    kUpload | kCompute | kAlloc | kClear,  // ecc_uncorrectable
    kEvery,                                // device_lost
    kUpload | kCompute | kAlloc | kClear,  // firmware_crash
    kCompute,                              // d2d_link_down
    kCompute,                              // thermal_throttle
    kAlloc,                                // kv_exhaustion
    kOutput,                               // corrupted_output
    kUpload | kCompute,                    // slow_completion
};

constexpr std::array<uint32_t, kFaultSiteCount> kSitePoints = {
    kUpload,                      // configure
    kInput | kCompute | kOutput,  // prefill
    kInput | kCompute | kOutput,  // decode
    kInput | kCompute | kOutput,  // kv_update
    kAlloc | kClear,              // kv
};

// The optional fields and the kinds they belong to; any other kind rejects them.
bool takes_chip(FaultKind kind) {
  return kind == FaultKind::kChipHang || kind == FaultKind::kEccCorrectable ||
         kind == FaultKind::kEccUncorrectable || kind == FaultKind::kThermalThrottle;
}
bool takes_factor(FaultKind kind) {
  return kind == FaultKind::kThermalThrottle || kind == FaultKind::kSlowCompletion;
}
bool takes_duration(FaultKind kind) { return kind == FaultKind::kThermalThrottle; }
bool takes_segment(FaultKind kind) {
  return kind == FaultKind::kChipHang || kind == FaultKind::kD2dLinkDown;
}

template <size_t N>
std::string join(const std::array<const char*, N>& names) {
  std::string out;
  for (const char* name : names) {
    out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

std::string sites_of(FaultKind kind) {
  std::string out;
  for (size_t s = 0; s < kFaultSiteCount; ++s) {
    if (can_happen(kind, static_cast<FaultSite>(s))) {
      out += (out.empty() ? "" : ", ") + std::string(kSiteNames[s]);
    }
  }
  return out;
}

// How a node looks in an error message.
std::string shown(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "\"" + node.Scalar() + "\"";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

tl::unexpected<Error> plan_error(const std::string& field, const std::string& message) {
  return fail(CALRT_INVALID_ARGUMENT, "fault plan: " + field + ": " + message);
}

Expected<uint64_t> read_u64(const YAML::Node& node, const std::string& field, uint64_t min_value,
                            uint64_t max_value) {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!node.IsScalar() || text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return plan_error(field, shown(node) + " is not an unsigned decimal integer");
  }
  if (value < min_value || value > max_value) {
    return plan_error(field, std::to_string(value) + " is outside [" + std::to_string(min_value) +
                                 ", " + std::to_string(max_value) + "]");
  }
  return value;
}

Expected<uint32_t> read_ppm(const YAML::Node& node, const std::string& field) {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!node.IsScalar() || text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return plan_error(field, shown(node) + " is not a number");
  }
  if (!(value > 0.0 && value <= 1.0)) {  // also rejects NaN
    return plan_error(field, text + " is outside (0, 1]");
  }
  const auto ppm = static_cast<uint32_t>(std::llround(value * kPpm));
  if (ppm == 0) {
    return plan_error(field, text + " is below the plan's resolution of 0.000001");
  }
  return ppm;
}

Expected<bool> read_bool(const YAML::Node& node, const std::string& field) {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  if (text == "true" || text == "false") {
    return text == "true";
  }
  return plan_error(field, shown(node) + " is not true or false");
}

// The fields of one fault, after the generic checks; applies kind-specific ones at the end.
class FaultReader {
 public:
  FaultReader(size_t index, uint32_t chips)
      : prefix_("faults[" + std::to_string(index) + "]"), chips_(chips) {}

  Expected<FaultSpec> read(const YAML::Node& node) {
    if (!node.IsMap()) {
      return plan_error(prefix_, shown(node) + " is not a mapping of fields");
    }
    std::set<std::string> seen;
    // Kind first: which optional fields are allowed depends on it.
    for (const auto& item : node) {
      const std::string key = item.first.IsScalar() ? item.first.Scalar() : shown(item.first);
      if (!seen.insert(key).second) {
        return plan_error(field(key), "repeated key (value " + shown(item.second) + ")");
      }
    }
    if (seen.count("kind") == 0) {
      return plan_error(field("kind"), "missing; kinds: " + join(kKindNames));
    }
    if (auto kind = read_kind(node["kind"]); !kind) {
      return tl::unexpected(kind.error());
    }
    for (const auto& item : node) {
      const std::string key = item.first.Scalar();
      if (key == "kind") {
        continue;
      }
      if (auto status = read_field(key, item.second); !status) {
        return tl::unexpected(status.error());
      }
    }
    if (triggers_.empty()) {
      return plan_error(prefix_,
                        "has no trigger; give exactly one of at_op, at_job, at_time_us, "
                        "probability");
    }
    if (triggers_.size() > 1) {
      return plan_error(field(triggers_[1]),
                        "a second trigger (" + triggers_[0] + " came first); give exactly one");
    }
    if (spec_.factor == 0 && takes_factor(spec_.kind)) {
      spec_.factor = fault_factor(spec_);
    }
    if (spec_.duration_ps == 0 && takes_duration(spec_.kind)) {
      spec_.duration_ps = fault_duration_ps(spec_);
    }
    return spec_;
  }

 private:
  std::string field(const std::string& key) const { return prefix_ + "." + key; }

  Status read_kind(const YAML::Node& node) {
    const auto kind = node.IsScalar() ? parse_fault_kind(node.Scalar()) : std::nullopt;
    if (!kind) {
      return plan_error(field("kind"),
                        "unknown kind " + shown(node) + "; kinds: " + join(kKindNames));
    }
    spec_.kind = *kind;
    return {};
  }

  Status not_for_kind(const std::string& key, const YAML::Node& value) const {
    return plan_error(field(key), "does not apply to kind " + std::string(to_string(spec_.kind)) +
                                      " (value " + shown(value) + ")");
  }

  Status read_field(const std::string& key, const YAML::Node& value) {
    if (key == "during") {
      return read_during(value);
    }
    if (key == "at_op" || key == "at_job" || key == "at_time_us" || key == "probability") {
      return read_trigger(key, value);
    }
    if (key == "persistent") {
      auto flag = read_bool(value, field(key));
      if (!flag) {
        return tl::unexpected(flag.error());
      }
      spec_.persistent = *flag;
      return {};
    }
    if (key == "chip" || key == "factor" || key == "duration_us" || key == "segment") {
      return read_parameter(key, value);
    }
    return plan_error(field(key), "unknown key (value " + shown(value) +
                                      "); keys: kind, during, at_op, at_job, at_time_us, "
                                      "probability, persistent, chip, factor, duration_us, "
                                      "segment");
  }

  Status read_during(const YAML::Node& value) {
    if (value.IsScalar() && value.Scalar() == "any") {
      spec_.during.reset();
      return {};
    }
    const auto site = value.IsScalar() ? parse_fault_site(value.Scalar()) : std::nullopt;
    if (!site) {
      return plan_error(field("during"),
                        "unknown site " + shown(value) + "; sites: " + join(kSiteNames) + ", any");
    }
    if (!can_happen(spec_.kind, *site)) {
      return plan_error(field("during"), "kind " + std::string(to_string(spec_.kind)) +
                                             " cannot happen at site " + value.Scalar() +
                                             " (its sites: " + sites_of(spec_.kind) + ")");
    }
    spec_.during = *site;
    return {};
  }

  Status read_trigger(const std::string& key, const YAML::Node& value) {
    triggers_.push_back(key);
    if (key == "probability") {
      auto ppm = read_ppm(value, field(key));
      if (!ppm) {
        return tl::unexpected(ppm.error());
      }
      spec_.trigger = FaultSpec::Trigger::kProbability;
      spec_.probability_ppm = *ppm;
      return {};
    }
    const bool time = key == "at_time_us";
    auto number = read_u64(value, field(key), time ? 0 : 1, time ? kMaxMicroseconds : kTimeNever);
    if (!number) {
      return tl::unexpected(number.error());
    }
    if (key == "at_op") {
      spec_.trigger = FaultSpec::Trigger::kOp;
      spec_.at_op = *number;
    } else if (key == "at_job") {
      spec_.trigger = FaultSpec::Trigger::kJob;
      spec_.at_job = *number;
    } else {
      spec_.trigger = FaultSpec::Trigger::kTime;
      spec_.at_time_ps = *number * kPsPerUs;
    }
    return {};
  }

  Status read_parameter(const std::string& key, const YAML::Node& value) {
    const bool applies = key == "chip"      ? takes_chip(spec_.kind)
                         : key == "factor"  ? takes_factor(spec_.kind)
                         : key == "segment" ? takes_segment(spec_.kind)
                                            : takes_duration(spec_.kind);
    if (!applies) {
      return not_for_kind(key, value);
    }
    if (key == "chip") {
      if (chips_ == 0) {
        return plan_error(field(key), "the device has no chips");
      }
      auto chip = read_u64(value, field(key), 0, chips_ - 1);
      if (!chip) {
        return tl::unexpected(chip.error());
      }
      spec_.chip = static_cast<uint32_t>(*chip);
    } else if (key == "factor") {
      auto factor = read_u64(value, field(key), 1, kMaxFactor);
      if (!factor) {
        return tl::unexpected(factor.error());
      }
      spec_.factor = static_cast<uint32_t>(*factor);
    } else if (key == "segment") {
      auto segment = read_u64(value, field(key), 0, UINT32_MAX);
      if (!segment) {
        return tl::unexpected(segment.error());
      }
      spec_.segment = static_cast<uint32_t>(*segment);
    } else {
      auto micros = read_u64(value, field(key), 1, kMaxMicroseconds);
      if (!micros) {
        return tl::unexpected(micros.error());
      }
      spec_.duration_ps = *micros * kPsPerUs;
    }
    return {};
  }

  std::string prefix_;
  uint32_t chips_;
  FaultSpec spec_;
  std::vector<std::string> triggers_;
};

Expected<FaultPlanSpec> read_plan(const YAML::Node& root, uint32_t chips) {
  FaultPlanSpec plan;
  if (root.IsNull()) {
    return plan;  // an empty plan injects nothing
  }
  if (!root.IsMap()) {
    return fail(
        CALRT_INVALID_ARGUMENT,
        "fault plan: the plan must be a mapping with seed and faults, found " + shown(root));
  }
  std::set<std::string> seen;
  for (const auto& item : root) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : shown(item.first);
    if (!seen.insert(key).second) {
      return plan_error(key, "repeated key (value " + shown(item.second) + ")");
    }
    if (key == "seed") {
      auto seed = read_u64(item.second, "seed", 0, UINT64_MAX);
      if (!seed) {
        return tl::unexpected(seed.error());
      }
      plan.seed = *seed;
    } else if (key == "faults") {
      const YAML::Node& list = item.second;
      if (list.IsNull()) {
        continue;
      }
      if (!list.IsSequence()) {
        return plan_error("faults", shown(list) + " is not a sequence of faults");
      }
      for (size_t i = 0; i < list.size(); ++i) {
        auto spec = FaultReader(i, chips).read(list[i]);
        if (!spec) {
          return tl::unexpected(spec.error());
        }
        plan.faults.push_back(*spec);
      }
    } else {
      return plan_error(key, "unknown key (value " + shown(item.second) + "); keys: seed, faults");
    }
  }
  return plan;
}

std::string probability_text(uint32_t ppm) {
  std::string fraction = std::to_string(ppm % kPpm);
  fraction.insert(0, 6 - fraction.size(), '0');
  while (!fraction.empty() && fraction.back() == '0') {
    fraction.pop_back();
  }
  return std::to_string(ppm / kPpm) + (fraction.empty() ? "" : "." + fraction);
}

}  // namespace

const char* to_string(FaultKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kKindNames.size() ? kKindNames[index] : "?";
}

const char* to_string(FaultSite site) {
  const auto index = static_cast<size_t>(site);
  return index < kSiteNames.size() ? kSiteNames[index] : "?";
}

const char* to_string(FaultPoint point) {
  switch (point) {
    case FaultPoint::kUpload:
      return "parameter upload";
    case FaultPoint::kInputDma:
      return "input DMA";
    case FaultPoint::kCompute:
      return "compute";
    case FaultPoint::kOutputDma:
      return "output DMA";
    case FaultPoint::kKvAllocate:
      return "Kv_Allocate";
    case FaultPoint::kKvClear:
      return "Kv_Clear";
  }
  return "?";
}

std::optional<FaultKind> parse_fault_kind(std::string_view name) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (name == kKindNames[i]) {
      return static_cast<FaultKind>(i);
    }
  }
  return std::nullopt;
}

std::optional<FaultSite> parse_fault_site(std::string_view name) {
  for (size_t i = 0; i < kSiteNames.size(); ++i) {
    if (name == kSiteNames[i]) {
      return static_cast<FaultSite>(i);
    }
  }
  return std::nullopt;
}

bool can_happen(FaultKind kind, FaultPoint point) {
  const auto index = static_cast<size_t>(kind);
  return index < kKindPoints.size() && (kKindPoints[index] & bit(point)) != 0;
}

bool can_happen(FaultKind kind, FaultSite site) {
  const auto k = static_cast<size_t>(kind);
  const auto s = static_cast<size_t>(site);
  return k < kKindPoints.size() && s < kSitePoints.size() && (kKindPoints[k] & kSitePoints[s]) != 0;
}

uint32_t fault_factor(const FaultSpec& spec) {
  if (spec.factor != 0) {
    return spec.factor;
  }
  return spec.kind == FaultKind::kSlowCompletion ? kDefaultSlowFactor : kDefaultThrottleFactor;
}

TimePs fault_duration_ps(const FaultSpec& spec) {
  return spec.duration_ps != 0 ? spec.duration_ps : kDefaultThrottlePs;
}

namespace {

// A plan is a few lines per fault; these bounds sit far above any real one (the largest in
// scenarios/ is under 2 KB and 4 levels deep) and far below what makes the YAML parser
// expensive: 4 MiB of '[' cost it about 1 GB and 6 s. The plan can come from any client of a
// shared device (through the daemon), so it is measured before it is parsed.
constexpr size_t kMaxPlanBytes = size_t{1} << 20;
constexpr int kMaxPlanFlowDepth = 32;

// The deepest flow nesting ('[' and '{' outside quotes and comments) and where it passes the
// bound, or nullopt when it does not.
std::optional<size_t> flow_depth_exceeded(std::string_view yaml) {
  int depth = 0;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < yaml.size(); ++i) {
    const char c = yaml[i];
    if (comment) {
      comment = c != '\n';
    } else if (quote != 0) {
      if (c == '\\' && quote == '"') {
        ++i;  // an escaped character, a quote included
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' &&
               (i == 0 || yaml[i - 1] == ' ' || yaml[i - 1] == '\t' || yaml[i - 1] == '\n')) {
      comment = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxPlanFlowDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace

Expected<FaultPlanSpec> parse_fault_plan(std::string_view yaml, uint32_t chips) {
  if (yaml.size() > kMaxPlanBytes) {
    return fail(CALRT_INVALID_ARGUMENT, "fault plan: " + std::to_string(yaml.size()) +
                                            " bytes, more than the limit of " +
                                            std::to_string(kMaxPlanBytes));
  }
  if (const auto at = flow_depth_exceeded(yaml)) {
    return fail(CALRT_INVALID_ARGUMENT, "fault plan: brackets nested deeper than " +
                                            std::to_string(kMaxPlanFlowDepth) + " at byte " +
                                            std::to_string(*at));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return fail(CALRT_INVALID_ARGUMENT, "fault plan: YAML syntax error at line " +
                                            std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  try {
    return read_plan(root, chips);
  } catch (const YAML::Exception& e) {
    // The reader checks every node's shape before reading it; kept so nothing escapes.
    return fail(CALRT_INVALID_ARGUMENT, "fault plan: cannot read: " + e.msg);
  }
}

std::string to_yaml(const FaultPlanSpec& plan) {
  std::string out = "{seed: " + std::to_string(plan.seed) + ", faults: [";
  for (size_t i = 0; i < plan.faults.size(); ++i) {
    const FaultSpec& f = plan.faults[i];
    out += (i == 0 ? "{kind: " : ", {kind: ") + std::string(to_string(f.kind));
    if (f.during) {
      out += ", during: " + std::string(to_string(*f.during));
    }
    switch (f.trigger) {
      case FaultSpec::Trigger::kOp:
        out += ", at_op: " + std::to_string(f.at_op);
        break;
      case FaultSpec::Trigger::kJob:
        out += ", at_job: " + std::to_string(f.at_job);
        break;
      case FaultSpec::Trigger::kTime:
        out += ", at_time_us: " + std::to_string(f.at_time_ps / kPsPerUs);
        break;
      case FaultSpec::Trigger::kProbability:
        out += ", probability: " + probability_text(f.probability_ppm);
        break;
    }
    if (f.persistent) {
      out += ", persistent: true";
    }
    if (takes_chip(f.kind)) {
      out += ", chip: " + std::to_string(f.chip);
    }
    if (takes_factor(f.kind) && f.factor != 0) {
      out += ", factor: " + std::to_string(f.factor);
    }
    if (takes_duration(f.kind) && f.duration_ps != 0) {
      out += ", duration_us: " + std::to_string(f.duration_ps / kPsPerUs);
    }
    if (takes_segment(f.kind)) {
      out += ", segment: " + std::to_string(f.segment);
    }
    out += "}";
  }
  return out + "]}";
}

FaultInjector::FaultInjector(FaultPlanSpec plan)
    : plan_(std::move(plan)),
      eligible_seen_(plan_.faults.size(), 0),
      fired_(plan_.faults.size(), false),
      stream_(plan_.seed, "faults") {}

std::vector<Injection> FaultInjector::at(const FaultOperation& op) {
  std::vector<Injection> fired;
  for (size_t i = 0; i < plan_.faults.size(); ++i) {
    const FaultSpec& f = plan_.faults[i];
    if (!can_happen(f.kind, op.point) || (f.during && *f.during != op.site)) {
      continue;
    }
    const uint64_t seen = ++eligible_seen_[i];
    bool fires = false;
    if (fired_[i]) {
      fires = f.persistent;  // a one-shot fault is spent; a persistent one keeps firing
    } else {
      switch (f.trigger) {
        case FaultSpec::Trigger::kOp:
          fires = seen == f.at_op;
          break;
        case FaultSpec::Trigger::kJob:
          fires = op.job_serial == f.at_job;
          break;
        case FaultSpec::Trigger::kTime:
          fires = op.now_ps >= f.at_time_ps;
          break;
        case FaultSpec::Trigger::kProbability:
          fires = stream_.below(kPpm) < f.probability_ppm;
          break;
      }
    }
    if (fires) {
      fired_[i] = true;
      fired.push_back(Injection{f.kind, &f, stream_.next()});
    }
  }
  return fired;
}

}  // namespace simdev
