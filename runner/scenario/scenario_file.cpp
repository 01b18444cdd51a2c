#include "runner/scenario/scenario_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>

namespace runner {
namespace {

// Bad input found while reading; caught at the file's boundary and returned as its message.
class BadInput : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr uint64_t kMaxU32 = UINT32_MAX;

bool is_identifier(const std::string& text) {
  return !text.empty() && text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// Field-by-field reading with errors that name the file, line, field and value.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void bad(const YAML::Node& node, const std::string& field,
                        const std::string& what) const {
    std::string where = file_;
    if (node.IsDefined() && node.Mark().line >= 0) {
      where += ":" + std::to_string(node.Mark().line + 1);
    }
    throw BadInput(where + ": " + field + ": " + what);
  }

  static std::string shown(const YAML::Node& node) {
    if (node.IsScalar()) {
      return "'" + node.Scalar() + "'";
    }
    if (node.IsMap()) {
      return "a map";
    }
    if (node.IsSequence()) {
      return "a list";
    }
    return "nothing";
  }

  // The map's entries in file order; an unknown or repeated key is an error.
  std::vector<std::pair<std::string, YAML::Node>> entries(
      const YAML::Node& map, const std::string& field,
      std::initializer_list<std::string_view> known) const {
    if (!map.IsMap()) {
      bad(map, field, shown(map) + " is not a map");
    }
    std::vector<std::pair<std::string, YAML::Node>> out;
    std::set<std::string> seen;
    for (const auto& item : map) {
      const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
      const std::string sub = field.empty() ? key : field + "." + key;
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (const auto k : known) {
          list += (list.empty() ? "" : ", ") + std::string(k);
        }
        bad(item.first, sub, "unknown key '" + key + "' (known: " + list + ")");
      }
      if (!seen.insert(key).second) {
        bad(item.first, sub, "the key appears twice");
      }
      out.emplace_back(key, item.second);
    }
    return out;
  }

  std::string text(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) {
      bad(node, field, shown(node) + " is not a text value");
    }
    return node.Scalar();
  }

  uint64_t count(const YAML::Node& node, const std::string& field, uint64_t min,
                 uint64_t max) const {
    const std::string s = text(node, field);
    uint64_t value = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || error != std::errc() || end != s.data() + s.size()) {
      bad(node, field, shown(node) + " is not a whole number");
    }
    if (value < min || value > max) {
      bad(node, field,
          shown(node) + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) +
              "]");
    }
    return value;
  }

  double number(const YAML::Node& node, const std::string& field) const {
    const std::string s = text(node, field);
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !(value == value)) {
      bad(node, field, shown(node) + " is not a number");
    }
    return value;
  }

  bool boolean(const YAML::Node& node, const std::string& field) const {
    const std::string s = text(node, field);
    if (s == "true") {
      return true;
    }
    if (s == "false") {
      return false;
    }
    bad(node, field, shown(node) + " is neither true nor false");
  }

  std::string identifier(const YAML::Node& node, const std::string& field) const {
    const std::string s = text(node, field);
    if (!is_identifier(s)) {
      bad(node, field, shown(node) + " is not a name (letters, digits, '_' and '-')");
    }
    return s;
  }

  template <class T, class Parse>
  T word(const YAML::Node& node, const std::string& field, Parse parse, const char* what) const {
    const std::string s = text(node, field);
    const auto value = parse(s);
    if (!value) {
      bad(node, field, shown(node) + " is not " + what);
    }
    return *value;
  }

  std::vector<YAML::Node> list(const YAML::Node& node, const std::string& field) const {
    if (!node.IsSequence()) {
      bad(node, field, shown(node) + " is not a list");
    }
    return std::vector<YAML::Node>(node.begin(), node.end());
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

std::string indexed(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

FaultEntry read_fault(const Reader& r, const YAML::Node& node, const std::string& field) {
  FaultEntry fault;
  int triggers = 0;
  bool has_kind = false;
  for (const auto& [key, value] :
       r.entries(node, field,
                 {"kind", "during", "at_op", "at_job", "at_time_us", "probability", "persistent",
                  "chip", "factor", "duration_us", "segment"})) {
    const std::string sub = field + "." + key;
    std::string canonical;
    if (key == "kind") {
      canonical = r.text(value, sub);
      if (!is_fault_kind(canonical)) {
        r.bad(value, sub, Reader::shown(value) + " is not a fault kind (simdev/device/FAULTS.md)");
      }
      has_kind = true;
    } else if (key == "during") {
      canonical = r.text(value, sub);
      if (!is_fault_site(canonical)) {
        r.bad(value, sub,
              Reader::shown(value) +
                  " is not a site (configure, prefill, decode, kv_update, kv, any)");
      }
    } else if (key == "persistent") {
      canonical = r.boolean(value, sub) ? "true" : "false";
    } else if (key == "probability") {
      const double p = r.number(value, sub);
      if (!(p > 0.0 && p <= 1.0)) {
        r.bad(value, sub, Reader::shown(value) + " is not in (0, 1]");
      }
      canonical = r.text(value, sub);
      ++triggers;
    } else {
      const uint64_t min = key == "at_op" || key == "at_job" || key == "factor" ? 1 : 0;
      canonical = std::to_string(r.count(value, sub, min, UINT64_MAX >> 1));
      triggers += key == "at_op" || key == "at_job" || key == "at_time_us" ? 1 : 0;
    }
    fault.fields.emplace_back(key, canonical);
  }
  if (!has_kind) {
    r.bad(node, field + ".kind", "missing");
  }
  if (triggers != 1) {
    r.bad(node, field,
          std::to_string(triggers) +
              " triggers; give exactly one of at_op, at_job, at_time_us, probability");
  }
  return fault;
}

// The static story of one sequence name while the steps are read.
enum class SeqState { none, empty_kv, prefilled, freed };

struct StoryCheck {
  std::map<std::string, SeqState> seqs;
  bool configured = false;
};

Step read_step(const Reader& r, const YAML::Node& node, const std::string& field,
               StoryCheck& story) {
  Step step;
  step.line = node.Mark().line + 1;
  YAML::Node body;
  std::string kind;
  if (node.IsScalar()) {
    kind = node.Scalar();
  } else if (node.IsMap() && node.size() == 1) {
    kind = node.begin()->first.Scalar();
    body = node.begin()->second;
  } else {
    r.bad(node, field, Reader::shown(node) + " is not a step (a step kind, or a map with one key)");
  }
  const std::string sub = field + "." + kind;
  auto seq_of = [&](std::initializer_list<std::string_view> keys) {
    std::map<std::string, YAML::Node> fields;
    for (auto& [key, value] : r.entries(body, sub, keys)) {
      fields[key] = value;
    }
    for (const auto key : keys) {
      if (!fields.count(std::string(key))) {
        r.bad(body, sub + "." + std::string(key), "missing");
      }
    }
    step.seq = r.identifier(fields["seq"], sub + ".seq");
    return fields;
  };
  auto need_configure = [&]() {
    if (!story.configured) {
      r.bad(node, sub, "comes before the configure step");
    }
  };
  SeqState* state = nullptr;
  auto seq_state = [&]() -> SeqState& { return story.seqs[step.seq]; };
  if (kind == "configure") {
    step.kind = StepKind::configure;
    if (body.IsDefined() && !body.IsNull() && !(body.IsMap() && body.size() == 0)) {
      r.bad(body, sub, Reader::shown(body) + ": configure takes no fields");
    }
    if (story.configured) {
      r.bad(node, sub, "the model is configured already (one configure step per scenario)");
    }
    story.configured = true;
  } else if (kind == "prefill") {
    step.kind = StepKind::prefill;
    auto f = seq_of({"seq", "case"});
    step.golden_case = static_cast<uint32_t>(r.count(f["case"], sub + ".case", 0, kMaxU32));
    need_configure();
    state = &seq_state();
    if (*state == SeqState::prefilled) {
      r.bad(f["seq"], sub + ".seq",
            "'" + step.seq + "' is prefilled already; kv_clear or kv_free it first");
    }
    *state = SeqState::prefilled;
  } else if (kind == "decode") {
    step.kind = StepKind::decode;
    auto f = seq_of({"seq", "steps"});
    step.count = static_cast<uint32_t>(r.count(f["steps"], sub + ".steps", 1, kMaxU32));
    need_configure();
    if (seq_state() != SeqState::prefilled) {
      r.bad(f["seq"], sub + ".seq", "'" + step.seq + "' is not prefilled; prefill it first");
    }
  } else if (kind == "kv_allocate") {
    step.kind = StepKind::kv_allocate;
    auto f = seq_of({"seq", "tokens"});
    step.count = static_cast<uint32_t>(r.count(f["tokens"], sub + ".tokens", 1, kMaxU32));
    need_configure();
    state = &seq_state();
    if (*state == SeqState::empty_kv || *state == SeqState::prefilled) {
      r.bad(f["seq"], sub + ".seq", "'" + step.seq + "' holds a KV already; kv_free it first");
    }
    *state = SeqState::empty_kv;
  } else if (kind == "kv_clear" || kind == "kv_free") {
    step.kind = kind == "kv_clear" ? StepKind::kv_clear : StepKind::kv_free;
    auto f = seq_of({"seq"});
    need_configure();
    state = &seq_state();
    if (*state != SeqState::empty_kv && *state != SeqState::prefilled) {
      r.bad(f["seq"], sub + ".seq", "'" + step.seq + "' holds no KV");
    }
    *state = kind == "kv_clear" ? SeqState::empty_kv : SeqState::freed;
  } else if (kind == "reset") {
    step.kind = StepKind::reset;
    step.level = r.word<calrt::ResetLevel>(body, sub, parse_reset_level,
                                           "a reset level (job_abort, cores, chip, full)");
  } else if (kind == "idle") {
    step.kind = StepKind::idle;
    std::map<std::string, YAML::Node> fields;
    for (auto& [key, value] : r.entries(body, sub, {"us"})) {
      fields[key] = value;
    }
    if (!fields.count("us")) {
      r.bad(body, sub + ".us", "missing");
    }
    step.us = r.count(fields["us"], sub + ".us", 0, uint64_t{3600} * 1000 * 1000);
  } else {
    r.bad(node, field,
          "'" + kind +
              "' is not a step kind (configure, prefill, decode, kv_allocate, kv_clear, "
              "kv_free, reset, idle)");
  }
  return step;
}

Expect read_expect(const Reader& r, const YAML::Node& node) {
  Expect e;
  for (const auto& [key, value] :
       r.entries(node, "expect",
                 {"outcome", "first_error", "fault_class", "device_state", "recovered_by", "resets",
                  "max_call_ms", "sequences"})) {
    const std::string field = "expect." + key;
    if (key == "outcome") {
      e.outcome = r.word<Outcome>(
          value, field, parse_outcome,
          "an outcome (pass, recovered, request_failed, unrecoverable, device_lost)");
    } else if (key == "first_error") {
      e.first_error = r.word<CalrtCode>(value, field, parse_code, "a status code (abi/calrt.h)");
    } else if (key == "fault_class") {
      const std::string s = r.text(value, field);
      if (!is_fault_class_name(s)) {
        r.bad(value, field, Reader::shown(value) + " is not none, request, model or device");
      }
      e.fault_class = s;
    } else if (key == "device_state") {
      e.device_state = r.word<calrt::DeviceState>(
          value, field, parse_device_state,
          "a device state (OPEN, CONFIGURED, RUNNING, FAULTED, RESETTING, LOST)");
    } else if (key == "recovered_by") {
      const std::string s = r.text(value, field);
      if (s == "none") {
        e.recovered_by.emplace(std::nullopt);
      } else {
        e.recovered_by.emplace(
            r.word<calrt::ResetLevel>(value, field, parse_reset_level,
                                      "a reset level (job_abort, cores, chip, full) or none"));
      }
    } else if (key == "resets") {
      e.resets = r.count(value, field, 0, kMaxU32);
    } else if (key == "max_call_ms") {
      e.max_call_ms = r.number(value, field);
      if (!(*e.max_call_ms > 0.0)) {
        r.bad(value, field, Reader::shown(value) + " is not a positive number");
      }
    }  // sequences: read_expect_sequences, since its keys are the scenario's own names
  }
  if (!e.outcome) {
    r.bad(node, "expect.outcome", "missing");
  }
  return e;
}

// expect.sequences takes any sequence name, so it is read apart from the fixed keys.
void read_expect_sequences(const Reader& r, const YAML::Node& node,
                           const std::vector<std::string>& names, Expect& e) {
  if (node.IsNull()) {
    return;
  }
  if (!node.IsMap()) {
    r.bad(node, "expect.sequences", Reader::shown(node) + " is not a map");
  }
  std::set<std::string> seen;
  for (const auto& item : node) {
    const std::string name = item.first.IsScalar() ? item.first.Scalar() : "";
    const std::string field = "expect.sequences." + name;
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      r.bad(item.first, field, "no step uses a sequence named '" + name + "'");
    }
    if (!seen.insert(name).second) {
      r.bad(item.first, field, "the key appears twice");
    }
    const std::string verdict = r.text(item.second, field);
    if (verdict != "ok" && verdict != "failed") {
      r.bad(item.second, field, Reader::shown(item.second) + " is neither ok nor failed");
    }
    e.sequences.emplace_back(name, verdict == "ok");
  }
}

SweepSpec read_sweep(const Reader& r, const YAML::Node& node) {
  SweepSpec sweep;
  for (const auto& [key, value] :
       r.entries(node, "sweep", {"kinds", "modes", "allowed", "max_runs"})) {
    const std::string field = "sweep." + key;
    if (key == "kinds") {
      if (value.IsScalar() && value.Scalar() == "all") {
        sweep.kinds.clear();
        continue;
      }
      const auto items = r.list(value, field);
      for (size_t i = 0; i < items.size(); ++i) {
        const std::string kind = r.text(items[i], indexed(field, i));
        if (!is_fault_kind(kind)) {
          r.bad(items[i], indexed(field, i),
                Reader::shown(items[i]) + " is not a fault kind (simdev/device/FAULTS.md)");
        }
        sweep.kinds.push_back(kind);
      }
      if (sweep.kinds.empty()) {
        r.bad(value, field, "an empty list sweeps nothing; write all or name kinds");
      }
    } else if (key == "modes") {
      sweep.modes.clear();
      const auto items = r.list(value, field);
      for (size_t i = 0; i < items.size(); ++i) {
        const std::string mode = r.text(items[i], indexed(field, i));
        if (mode != "transient" && mode != "persistent") {
          r.bad(items[i], indexed(field, i),
                Reader::shown(items[i]) + " is neither transient nor persistent");
        }
        sweep.modes.push_back(mode == "transient" ? SweepMode::transient : SweepMode::persistent);
      }
      if (sweep.modes.empty()) {
        r.bad(value, field, "an empty list sweeps nothing");
      }
    } else if (key == "allowed") {
      sweep.allowed.clear();
      const auto items = r.list(value, field);
      for (size_t i = 0; i < items.size(); ++i) {
        sweep.allowed.push_back(r.word<Outcome>(items[i], indexed(field, i), parse_outcome,
                                                "an outcome (pass, recovered, request_failed, "
                                                "unrecoverable, device_lost)"));
      }
    } else {
      sweep.max_runs = static_cast<uint32_t>(r.count(value, field, 1, 100000));
    }
  }
  return sweep;
}

// The device option string: `key=value` items; `seed` belongs to the scenario's seed field.
void check_device_overrides(const Reader& r, const YAML::Node& node, const std::string& text) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) {
        r.bad(node, "device", "'" + item + "' is not key=value");
      }
      std::string key = item.substr(0, eq);
      key.erase(key.find_last_not_of(" \t") + 1);
      if (key == "seed") {
        r.bad(node, "device", "'" + item + "': the seed comes from the scenario's seed field");
      }
    }
    start = end + 1;
  }
}

Scenario read(const Reader& r, const YAML::Node& root) {
  Scenario s;
  s.file = r.file();
  s.name = std::filesystem::path(r.file()).stem().string();
  if (!root.IsMap()) {
    r.bad(root, "(top level)", Reader::shown(root) + " is not a map of scenario fields");
  }
  // A default YAML::Node is a defined null: presence needs its own flag.
  std::optional<YAML::Node> expect_node;
  std::optional<YAML::Node> sequences_node;
  bool has_calbin = false;
  bool has_seed = false;
  bool has_steps = false;
  StoryCheck story;
  for (const auto& [key, value] :
       r.entries(root, "",
                 {"description", "calbin", "device", "seed", "timeout_ms", "max_recoveries",
                  "faults", "steps", "expect", "negative_controls", "sweep"})) {
    if (key == "description") {
      s.description = r.text(value, key);
    } else if (key == "calbin") {
      s.calbin = r.identifier(value, key);
      has_calbin = true;
    } else if (key == "device") {
      s.device = r.text(value, key);
      check_device_overrides(r, value, s.device);
    } else if (key == "seed") {
      s.seed = r.count(value, key, 0, UINT64_MAX);
      has_seed = true;
    } else if (key == "timeout_ms") {
      s.timeout_ms = static_cast<uint32_t>(r.count(value, key, 1, 3600 * 1000));
    } else if (key == "max_recoveries") {
      s.max_recoveries = static_cast<uint32_t>(r.count(value, key, 0, 1000));
    } else if (key == "faults") {
      if (value.IsNull()) {
        continue;
      }
      const auto items = r.list(value, key);
      for (size_t i = 0; i < items.size(); ++i) {
        s.faults.push_back(read_fault(r, items[i], indexed(key, i)));
      }
    } else if (key == "steps") {
      const auto items = r.list(value, key);
      for (size_t i = 0; i < items.size(); ++i) {
        s.steps.push_back(read_step(r, items[i], indexed(key, i), story));
      }
      has_steps = true;
    } else if (key == "expect") {
      expect_node = value;
      if (value.IsMap()) {
        for (const auto& item : value) {
          if (item.first.IsScalar() && item.first.Scalar() == "sequences") {
            sequences_node = item.second;
          }
        }
      }
    } else if (key == "negative_controls") {
      const auto items = r.list(value, key);
      for (size_t i = 0; i < items.size(); ++i) {
        const auto bug = r.word<PolicyBug>(items[i], indexed(key, i), parse_policy_bug,
                                           "a policy bug (scenarios/README.md)");
        if (bug == PolicyBug::none) {
          r.bad(items[i], indexed(key, i), "'none' is not a policy bug");
        }
        s.negative_controls.push_back(bug);
      }
    } else {
      s.sweep = read_sweep(r, value);
    }
  }
  if (!has_calbin) {
    r.bad(root, "calbin", "missing (a generator preset, e.g. tiny)");
  }
  if (!has_seed) {
    r.bad(root, "seed", "missing");
  }
  if (!has_steps || s.steps.empty()) {
    r.bad(root, "steps", "missing or empty");
  }
  if (s.sweep && !s.faults.empty()) {
    r.bad(root, "faults", "a sweep file has no faults of its own (its sweep section makes them)");
  }
  if (expect_node) {
    Expect e = read_expect(r, *expect_node);
    if (sequences_node) {
      read_expect_sequences(r, *sequences_node, s.sequence_names(), e);
    }
    s.expect = std::move(e);
  } else if (!s.sweep) {
    r.bad(root, "expect", "missing (a scenario says what must come out)");
  }
  return s;
}

}  // namespace

std::string FaultEntry::kind() const {
  for (const auto& [key, value] : fields) {
    if (key == "kind") {
      return value;
    }
  }
  return {};
}

const char* to_string(StepKind kind) {
  switch (kind) {
    case StepKind::configure:
      return "configure";
    case StepKind::prefill:
      return "prefill";
    case StepKind::decode:
      return "decode";
    case StepKind::kv_allocate:
      return "kv_allocate";
    case StepKind::kv_clear:
      return "kv_clear";
    case StepKind::kv_free:
      return "kv_free";
    case StepKind::reset:
      return "reset";
    case StepKind::idle:
      return "idle";
  }
  return "?";
}

const char* to_string(SweepMode mode) {
  return mode == SweepMode::transient ? "transient" : "persistent";
}

std::vector<std::string> Scenario::sequence_names() const {
  std::vector<std::string> names;
  for (const Step& step : steps) {
    if (!step.seq.empty() && std::find(names.begin(), names.end(), step.seq) == names.end()) {
      names.push_back(step.seq);
    }
  }
  return names;
}

tl::expected<Scenario, std::string> read_scenario_file(const std::string& file) {
  const Reader reader(file);
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    return tl::unexpected(file + ": no such scenario file");
  }
  try {
    return read(reader, YAML::LoadFile(file));
  } catch (const BadInput& bad) {
    return tl::unexpected(std::string(bad.what()));
  } catch (const YAML::Exception& yaml) {
    return tl::unexpected(file + ": not valid YAML: " + yaml.what());
  }
}

std::string check_against_golden(const Scenario& scenario, const calbin::GoldenSet& golden) {
  std::map<std::string, std::pair<uint32_t, uint32_t>> decoding;  // seq: case, steps so far
  for (size_t i = 0; i < scenario.steps.size(); ++i) {
    const Step& step = scenario.steps[i];
    const std::string where = scenario.file + ":" + std::to_string(step.line) + ": steps[" +
                              std::to_string(i) + "]." + to_string(step.kind);
    if (step.kind == StepKind::prefill) {
      if (step.golden_case >= golden.cases.size()) {
        return where + ".case: " + std::to_string(step.golden_case) +
               " is beyond the golden set of calbin " + scenario.calbin + " (" +
               std::to_string(golden.cases.size()) + " cases, 0.." +
               std::to_string(golden.cases.size() - 1) + ")";
      }
      decoding[step.seq] = {step.golden_case, 0};
    } else if (step.kind == StepKind::decode) {
      auto& [golden_case, done] = decoding[step.seq];
      const calbin::GoldenCase& c = golden.cases[golden_case];
      done += step.count;
      if (done > c.decode_steps) {
        return where + ".steps: " + std::to_string(step.count) + " takes sequence " + step.seq +
               " to decode step " + std::to_string(done) + ", but golden case " + c.name + " has " +
               std::to_string(c.decode_steps);
      }
    }
  }
  return {};
}

std::string plan_yaml(uint64_t seed, const std::vector<FaultEntry>& faults) {
  std::string out = "{seed: " + std::to_string(seed) + ", faults: [";
  for (size_t i = 0; i < faults.size(); ++i) {
    out += i == 0 ? "{" : ", {";
    for (size_t f = 0; f < faults[i].fields.size(); ++f) {
      out += (f == 0 ? "" : ", ") + faults[i].fields[f].first + ": " + faults[i].fields[f].second;
    }
    out += "}";
  }
  return out + "]}";
}

}  // namespace runner
