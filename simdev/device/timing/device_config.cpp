#include "simdev/device/timing/device_config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace simdev {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
// Bounds on the compute parameters keep cores x MACs x 2 x clock x 1e6 x 100 (the achieved
// rate at an efficiency) inside 64 bits: 256 x 16384 x 2 x 1e10 x 100 < 2^63.
constexpr uint64_t kMaxCores = 256;
constexpr uint64_t kMaxMacs = 16384;
constexpr uint64_t kMaxClockMhz = 10000;
constexpr uint64_t kMaxBandwidthMbps = 1000000000;  // 1 PB/s
constexpr uint64_t kMaxLatencyNs = kMax / 2000;
// The watchdog is kept in picoseconds: 2^34 ms (about 200 days) x 1e9 stays below 2^64.
constexpr uint64_t kMaxWatchdogMs = uint64_t{1} << 34;
// A config file is a page of text; anything far larger is not one.
constexpr uint64_t kMaxFileBytes = 1 << 20;

template <auto Field>
uint64_t get_number(const DeviceConfig& config) {
  return config.*Field;
}
template <auto Field>
void set_number(DeviceConfig& config, uint64_t value) {
  config.*Field = value;
}
uint64_t get_clock(const DeviceConfig& config) { return static_cast<uint64_t>(config.clock); }
uint64_t get_mutant(const DeviceConfig& config) {
  return static_cast<uint64_t>(config.numerics_mutant);
}
void set_mutant(DeviceConfig& config, uint64_t value) {
  config.numerics_mutant = static_cast<NumericsMutant>(value);
}
uint64_t get_strict(const DeviceConfig& config) { return config.strict ? 1 : 0; }
void set_strict(DeviceConfig& config, uint64_t value) { config.strict = value != 0; }
void set_clock(DeviceConfig& config, uint64_t value) {
  config.clock = static_cast<ClockMode>(value);
}

template <auto Field>
constexpr ParamSpec number(std::string_view section, std::string_view name, std::string_view unit,
                           uint64_t default_value, uint64_t min_value, uint64_t max_value,
                           ParamTag tag, std::string_view description) {
  return ParamSpec{section, name,        unit, default_value,      min_value,         max_value,
                   tag,     description, {},   &get_number<Field>, &set_number<Field>};
}

constexpr std::array<std::string_view, 2> kClockModes = {"virtual", "paced"};
constexpr std::array<std::string_view, 2> kStrictModes = {"off", "on"};

constexpr ParamTag kSpec = ParamTag::kSpec;
constexpr ParamTag kAssumed = ParamTag::kAssumed;
using C = DeviceConfig;

// Defaults describe one Calculet card as far as the reference (REFERENCE.md) tells: two
// chiplets. Everything else is an assumption chosen for plausible orders of magnitude (a
// ~262 TOPS INT8 chiplet with 16 GiB of 400 GB/s DRAM on a PCIe Gen4 x16 card) and stays
// tagged `assumed` until it is measured on hardware.
const std::array kParams = {
    ParamSpec{"", "clock", "", 0, 0, kClockModes.size() - 1, kAssumed,
              "simulator setting: virtual (device time moves only when the host waits, "
              "deterministic) or paced (device time also follows wall time)",
              kClockModes, &get_clock, &set_clock},
    number<&C::seed>("", "seed", "", 1, 0, kMax, kAssumed,
                     "simulator setting: master seed; every random stream is derived from it"),
    number<&C::default_timeout_ms>("", "default_timeout_ms", "ms", 30000, 1, uint64_t{1} << 40,
                                   kAssumed,
                                   "device time a call with CALRT_TIMEOUT_DEFAULT may take"),
    number<&C::job_watchdog_ms>("", "job_watchdog_ms", "ms", 10000, 1, kMaxWatchdogMs, kAssumed,
                                "device time a job's compute may take before the device's "
                                "watchdog ends it as TIMED_OUT (DEVICE_HUNG); a hung configure "
                                "is stopped by it too"),
    ParamSpec{"", "strict", "", 0, 0, kStrictModes.size() - 1, kAssumed,
              "simulator setting: on stops the device at the first broken internal invariant "
              "(base/invariants.hpp); off counts them in the diagnostic report",
              kStrictModes, &get_strict, &set_strict},
    number<&C::host_threads>("", "host_threads", "threads", 0, 0, 256, kAssumed,
                             "simulator setting: host threads a functional step runs on (0: one "
                             "per hardware thread); results are the same bits on any count"),
    ParamSpec{"", "numerics_mutant", "", 0, 0, kNumericsMutantNames.size() - 1, kAssumed,
              "TEST ONLY: a deliberate numeric defect (base/numerics_mutant.hpp) for the "
              "smoke's negative controls; none on a real run",
              kNumericsMutantNames, &get_mutant, &set_mutant},
    number<&C::chips>("chip", "chips", "chips", 2, 1, 8, kSpec,
                      "chiplets on the card (the reference card has two)"),
    number<&C::compute_cores>("chip", "compute_cores", "cores", 16, 1, kMaxCores, kAssumed,
                              "compute cores per chip"),
    number<&C::clock_mhz>("chip", "clock_mhz", "MHz", 2000, 1, kMaxClockMhz, kAssumed,
                          "compute clock"),
    number<&C::int8_macs_per_cycle_per_core>("chip", "int8_macs_per_cycle_per_core", "MAC/cycle",
                                             4096, 1, kMaxMacs, kAssumed,
                                             "INT8 multiply-accumulates per cycle and core "
                                             "(INT4 weights run at this rate too)"),
    number<&C::bf16_macs_per_cycle_per_core>("chip", "bf16_macs_per_cycle_per_core", "MAC/cycle",
                                             2048, 1, kMaxMacs, kAssumed,
                                             "BF16/FP16/FP32 multiply-accumulates per cycle and "
                                             "core"),
    number<&C::compute_efficiency_pct>("chip", "compute_efficiency_pct", "%", 70, 1, 100, kAssumed,
                                       "achieved fraction of the peak compute rate"),
    number<&C::sram_kib_per_core>("chip", "sram_kib_per_core", "KiB", 2048, 0, uint64_t{1} << 20,
                                  kAssumed,
                                  "on-chip SRAM per core (recorded; the timing model does not "
                                  "use it yet)"),
    number<&C::dram_mib>("dram", "dram_mib", "MiB", 16384, 1, uint64_t{1} << 30, kAssumed,
                         "usable DRAM per chip"),
    number<&C::dram_bw_mbps>("dram", "dram_bw_mbps", "MB/s", 400000, 1, kMaxBandwidthMbps, kAssumed,
                             "peak DRAM bandwidth per chip"),
    number<&C::dram_efficiency_pct>("dram", "dram_efficiency_pct", "%", 80, 1, 100, kAssumed,
                                    "achieved fraction of the peak DRAM bandwidth"),
    number<&C::pcie_gen>("pcie", "pcie_gen", "gen", 4, 3, 5, kAssumed,
                         "PCIe generation: 8, 16 or 32 GT/s per lane for gen 3, 4, 5"),
    number<&C::pcie_lanes>("pcie", "pcie_lanes", "lanes", 16, 1, 16, kAssumed,
                           "PCIe link width: 1, 2, 4, 8 or 16"),
    number<&C::pcie_efficiency_pct>("pcie", "pcie_efficiency_pct", "%", 80, 1, 100, kAssumed,
                                    "achieved fraction of the link's 128b/130b payload rate "
                                    "(TLP headers, flow control, DMA descriptors)"),
    number<&C::pcie_latency_ns>("pcie", "pcie_latency_ns", "ns", 2000, 0, kMaxLatencyNs, kAssumed,
                                "fixed latency of one DMA transfer"),
    number<&C::d2d_bw_mbps>("d2d", "d2d_bw_mbps", "MB/s", 100000, 1, kMaxBandwidthMbps, kAssumed,
                            "die-to-die bandwidth into one chip"),
    number<&C::d2d_latency_ns>("d2d", "d2d_latency_ns", "ns", 500, 0, kMaxLatencyNs, kAssumed,
                               "fixed latency of one die-to-die exchange"),
    number<&C::op_overhead_ns>("overheads", "op_overhead_ns", "ns", 1000, 0, kMaxLatencyNs,
                               kAssumed, "fixed cost of launching one op"),
    number<&C::submit_overhead_ns>("overheads", "submit_overhead_ns", "ns", 20000, 0, kMaxLatencyNs,
                                   kAssumed, "fixed cost of one job submission"),
};

// The YAML sections in file order.
constexpr std::array<std::string_view, 6> kSections = {"",     "chip", "dram",
                                                       "pcie", "d2d",  "overheads"};

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

std::string key_list() {
  std::string known;
  for (const ParamSpec& s : kParams) {
    known += (known.empty() ? "" : ", ") + std::string(s.name);
  }
  return known;
}

// Parses one value for spec; the error text says what is wrong with it (the caller names the
// source, key and value).
Expected<uint64_t> parse_value(const ParamSpec& spec, std::string_view value) {
  if (spec.is_enum()) {
    for (size_t i = 0; i < spec.choices.size(); ++i) {
      if (spec.choices[i] == value) {
        return i;
      }
    }
    std::string names;
    for (const std::string_view choice : spec.choices) {
      names += (names.empty() ? "" : ", ") + std::string(choice);
    }
    return fail(CALRT_INVALID_ARGUMENT, "value is not one of " + names);
  }
  uint64_t parsed = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (value.empty() || ec == std::errc::result_out_of_range) {
    return fail(CALRT_INVALID_ARGUMENT,
                value.empty() ? "value is empty" : "value does not fit in 64 bits");
  }
  if (ec != std::errc() || end != value.data() + value.size()) {
    return fail(CALRT_INVALID_ARGUMENT, "value is not an unsigned decimal integer");
  }
  if (parsed < spec.min_value || parsed > spec.max_value) {
    return fail(CALRT_INVALID_ARGUMENT,
                "value outside [" + std::to_string(spec.min_value) + ", " +
                    std::to_string(spec.max_value) + "]" +
                    (spec.unit.empty() ? "" : " " + std::string(spec.unit)));
  }
  return parsed;
}

DeviceConfig defaults() {
  DeviceConfig config;
  for (const ParamSpec& spec : kParams) {
    spec.set(config, spec.default_value);
  }
  return config;
}

// Checks that span several keys or that bounds cannot express; `where` names the source.
Status validate(const DeviceConfig& config, const std::string& where) {
  const uint64_t lanes = config.pcie_lanes;
  if ((lanes & (lanes - 1)) != 0) {
    return fail(CALRT_INVALID_ARGUMENT, where + "pcie_lanes=" + std::to_string(lanes) +
                                            ": a PCIe link has 1, 2, 4, 8 or 16 lanes");
  }
  return {};
}

// ---- YAML -------------------------------------------------------------------------------

std::string at_line(std::string_view source, const YAML::Mark& mark) {
  return std::string(source) + ":" + (mark.is_null() ? "" : std::to_string(mark.line + 1) + ":");
}

std::string node_text(const YAML::Node& node) {
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

class YamlReader {
 public:
  YamlReader(std::string_view source, DeviceConfig& config) : source_(source), config_(config) {}

  Status read(const YAML::Node& root) {
    if (!root.IsMap()) {
      return error(root.Mark(), "", "the file must be a mapping of keys, found " + node_text(root));
    }
    bool has_schema = false;
    for (const auto& item : root) {
      const std::string key = item.first.as<std::string>("");
      if (key == "schema") {
        if (auto status = read_schema(item.first, item.second, has_schema); !status) {
          return status;
        }
        continue;
      }
      if (is_section(key)) {
        if (auto status = read_section(item.first, key, item.second); !status) {
          return status;
        }
        continue;
      }
      if (auto status = read_param(item.first, "", item.second); !status) {
        return status;
      }
    }
    if (!has_schema) {
      return error(
          root.Mark(), "schema",
          "missing; a config file starts with `schema: " + std::string(kDeviceConfigSchema) + "`");
    }
    return {};
  }

 private:
  static bool is_section(const std::string& key) {
    for (const std::string_view section : kSections) {
      if (!section.empty() && section == key) {
        return true;
      }
    }
    return false;
  }

  tl::unexpected<Error> error(const YAML::Mark& mark, const std::string& key,
                              const std::string& message) const {
    return fail(CALRT_INVALID_ARGUMENT, "device config " + at_line(source_, mark) + " " +
                                            (key.empty() ? "" : key + ": ") + message);
  }

  Status read_schema(const YAML::Node& key, const YAML::Node& value, bool& has_schema) {
    if (has_schema) {
      return error(key.Mark(), "schema", "repeated key");
    }
    has_schema = true;
    if (!value.IsScalar() || value.Scalar() != kDeviceConfigSchema) {
      return error(value.Mark(), "schema",
                   "unsupported schema " + node_text(value) + "; this simulator reads \"" +
                       std::string(kDeviceConfigSchema) + "\"");
    }
    return {};
  }

  Status read_section(const YAML::Node& key, const std::string& section, const YAML::Node& body) {
    if (!sections_seen_.insert(section).second) {
      return error(key.Mark(), section, "repeated section");
    }
    if (!body.IsMap()) {
      return error(body.Mark(), section,
                   "a section must be a mapping of keys, found " + node_text(body));
    }
    for (const auto& item : body) {
      if (auto status = read_param(item.first, section, item.second); !status) {
        return status;
      }
    }
    return {};
  }

  Status read_param(const YAML::Node& key_node, const std::string& section,
                    const YAML::Node& value) {
    const std::string key = key_node.IsScalar() ? key_node.Scalar() : node_text(key_node);
    const std::string path = section.empty() ? key : section + "." + key;
    const ParamSpec* spec = find_device_param(key);
    if (spec == nullptr) {
      return error(key_node.Mark(), path,
                   "unknown key (value " + node_text(value) + "); keys: " + key_list());
    }
    if (spec->section != section) {
      return error(key_node.Mark(), path,
                   "misplaced key; it belongs " +
                       (spec->section.empty() ? std::string("at the top level")
                                              : "in section " + std::string(spec->section)));
    }
    if (!keys_seen_.insert(key).second) {
      return error(key_node.Mark(), path, "repeated key (value " + node_text(value) + ")");
    }
    // An empty value has no position of its own; its key's line is the place to look.
    const YAML::Mark mark =
        value.IsNull() || value.Mark().is_null() ? key_node.Mark() : value.Mark();
    if (!value.IsScalar()) {
      return error(mark, path,
                   "value " + node_text(value) + " is not " +
                       (spec->is_enum() ? "a name" : "an unsigned integer"));
    }
    auto parsed = parse_value(*spec, value.Scalar());
    if (!parsed) {
      return error(mark, path, parsed.error().message + " (value " + node_text(value) + ")");
    }
    spec->set(config_, *parsed);
    return {};
  }

  std::string_view source_;
  DeviceConfig& config_;
  std::set<std::string> keys_seen_;
  std::set<std::string> sections_seen_;
};

Status apply_yaml(std::string_view text, std::string_view source, DeviceConfig& config) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(CALRT_INVALID_ARGUMENT,
                "device config " + at_line(source, e.mark) + " YAML syntax error: " + e.msg);
  }
  try {
    YamlReader reader(source, config);
    if (auto status = reader.read(root); !status) {
      return status;
    }
  } catch (const YAML::Exception& e) {
    // Node access throws only on shapes the reader checks first; kept so that nothing escapes.
    return fail(CALRT_INVALID_ARGUMENT,
                "device config " + at_line(source, e.mark) + " cannot read: " + e.msg);
  }
  return validate(config, "device config " + std::string(source) + ": ");
}

Expected<std::string> read_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return fail(CALRT_INVALID_ARGUMENT, "device config file " + name + ": no such file");
  }
  if (!std::filesystem::is_regular_file(status)) {
    return fail(CALRT_INVALID_ARGUMENT, "device config file " + name + ": not a regular file");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxFileBytes) {
    return fail(CALRT_INVALID_ARGUMENT,
                "device config file " + name + ": " +
                    (ec ? "cannot read its size"
                        : "size " + std::to_string(size) + " bytes exceeds the limit of " +
                              std::to_string(kMaxFileBytes)));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    return fail(CALRT_INVALID_ARGUMENT, "device config file " + name + ": cannot open");
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return fail(CALRT_INVALID_ARGUMENT, "device config file " + name + ": cannot read");
  }
  return text;
}

// ---- key=value strings ------------------------------------------------------------------

struct Item {
  std::string_view key;
  std::string_view value;
  bool has_equals = false;
};

std::string quoted(const Item& item) {
  return "device config \"" + std::string(item.key) + "=" + std::string(item.value) + "\"";
}

std::vector<Item> split_items(std::string_view text) {
  std::vector<Item> items;
  // Bounded by the text length: every iteration consumes at least one character.
  while (!text.empty()) {
    const size_t semi = text.find(';');
    const std::string_view item = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (item.empty()) {
      continue;
    }
    const size_t eq = item.find('=');
    items.push_back(Item{trim(item.substr(0, eq)),
                         eq == std::string_view::npos ? "" : trim(item.substr(eq + 1)),
                         eq != std::string_view::npos});
  }
  return items;
}

Status apply_item(const Item& item, DeviceConfig& config) {
  const ParamSpec* spec = find_device_param(item.key);
  if (spec == nullptr) {
    return fail(CALRT_INVALID_ARGUMENT,
                quoted(item) + ": unknown key; keys: config, " + key_list());
  }
  if (!item.has_equals) {
    return fail(CALRT_INVALID_ARGUMENT, quoted(item) + ": expected key=value");
  }
  auto parsed = parse_value(*spec, item.value);
  if (!parsed) {
    return fail(CALRT_INVALID_ARGUMENT, quoted(item) + ": " + parsed.error().message);
  }
  spec->set(config, *parsed);
  return {};
}

void yaml_comment(std::string& out, std::string_view indent, std::string_view text) {
  // Wraps at 100 columns so the shipped file follows the project's line length.
  constexpr size_t kWidth = 100;
  std::string line = std::string(indent) + "#";
  size_t at = 0;
  while (at < text.size()) {
    size_t next = text.find(' ', at);
    if (next == std::string_view::npos) {
      next = text.size();
    }
    const std::string_view word = text.substr(at, next - at);
    if (line.size() + 1 + word.size() > kWidth && line.size() > indent.size() + 1) {
      out += line + "\n";
      line = std::string(indent) + "#";
    }
    line += " " + std::string(word);
    at = next + 1;
  }
  out += line + "\n";
}

}  // namespace

std::string_view to_string(ParamTag tag) {
  switch (tag) {
    case ParamTag::kMeasured:
      return "measured";
    case ParamTag::kSpec:
      return "spec";
    case ParamTag::kAssumed:
      return "assumed";
  }
  return "?";
}

std::string_view to_string(ClockMode mode) {
  const auto index = static_cast<size_t>(mode);
  return index < kClockModes.size() ? kClockModes[index] : "?";
}

Rate DeviceConfig::peak_int8_ops_per_s() const {
  return Rate{compute_cores * int8_macs_per_cycle_per_core * 2 * clock_mhz * 1000000, 1};
}

Rate DeviceConfig::peak_bf16_ops_per_s() const {
  return Rate{compute_cores * bf16_macs_per_cycle_per_core * 2 * clock_mhz * 1000000, 1};
}

Rate DeviceConfig::dram_bytes_per_s() const { return Rate{dram_bw_mbps * 1000000, 1}; }

Rate DeviceConfig::pcie_link_bytes_per_s() const {
  // Gen 3 signals at 8 GT/s per lane and each generation doubles it; from gen 3 on the line
  // code is 128b/130b, so a lane carries GT/s x 128/130 payload bits per second.
  // Generations outside 3..5 (the parser's bounds) are clamped rather than shifted out of
  // range: gen 6 changes the encoding too and is not modelled.
  const uint64_t doublings = pcie_gen < 3 ? 0 : std::min<uint64_t>(pcie_gen - 3, 2);
  const uint64_t gt_per_s = uint64_t{8000000000} << doublings;
  return Rate{pcie_lanes * gt_per_s * 128, 130 * 8};
}

Rate DeviceConfig::pcie_bytes_per_s() const {
  return pcie_link_bytes_per_s().at_pct(pcie_efficiency_pct);
}

Rate DeviceConfig::d2d_bytes_per_s() const { return Rate{d2d_bw_mbps * 1000000, 1}; }

std::string ParamSpec::format(const DeviceConfig& config) const {
  const uint64_t value = get(config);
  if (is_enum()) {
    return value < choices.size() ? std::string(choices[value]) : "?";
  }
  return std::to_string(value);
}

std::span<const ParamSpec> device_params() { return kParams; }

const ParamSpec* find_device_param(std::string_view name) {
  for (const ParamSpec& spec : kParams) {
    if (spec.name == name) {
      return &spec;
    }
  }
  return nullptr;
}

Expected<DeviceConfig> parse_device_config_yaml(std::string_view text, std::string_view source) {
  DeviceConfig config = defaults();
  if (auto status = apply_yaml(text, source, config); !status) {
    return tl::unexpected(status.error());
  }
  return config;
}

Expected<DeviceConfig> load_device_config_file(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) {
    return tl::unexpected(text.error());
  }
  return parse_device_config_yaml(*text, path.string());
}

Expected<DeviceConfig> parse_device_config(std::string_view text) {
  const std::vector<Item> items = split_items(text);
  DeviceConfig config = defaults();
  // The file comes first wherever it stands, so that every other key overrides it.
  const Item* file = nullptr;
  for (const Item& item : items) {
    if (item.key != "config") {
      continue;
    }
    if (file != nullptr) {
      return fail(CALRT_INVALID_ARGUMENT, quoted(item) + ": repeated key; " + quoted(*file) +
                                              " came first (one config file per device)");
    }
    if (!item.has_equals || item.value.empty()) {
      return fail(CALRT_INVALID_ARGUMENT, quoted(item) + ": expected config=<path of a YAML file>");
    }
    file = &item;
  }
  if (file != nullptr) {
    auto loaded = load_device_config_file(std::filesystem::path(std::string(file->value)));
    if (!loaded) {
      return fail(CALRT_INVALID_ARGUMENT, quoted(*file) + ": " + loaded.error().message);
    }
    config = *loaded;
  }
  std::set<std::string_view> seen;
  for (const Item& item : items) {
    if (item.key == "config") {
      continue;
    }
    if (!seen.insert(item.key).second) {
      return fail(CALRT_INVALID_ARGUMENT, quoted(item) + ": repeated key");
    }
    if (auto status = apply_item(item, config); !status) {
      return tl::unexpected(status.error());
    }
  }
  if (auto status = validate(config, "device config: "); !status) {
    return tl::unexpected(status.error());
  }
  return config;
}

std::string describe(const DeviceConfig& config) {
  std::string text;
  for (const ParamSpec& spec : kParams) {
    text += std::string(spec.name) + "=" + spec.format(config) +
            (spec.unit.empty() ? "" : " " + std::string(spec.unit)) + " (" +
            std::string(to_string(spec.tag)) + "): " + std::string(spec.description) + "\n";
  }
  const auto derived = [&text](const char* name, Rate rate, const char* unit) {
    text += std::string("derived ") + name + "=" + std::to_string(rate.per_second()) + " " + unit +
            "\n";
  };
  derived("peak_int8_ops_per_s", config.peak_int8_ops_per_s(), "op/s per chip");
  derived("peak_bf16_ops_per_s", config.peak_bf16_ops_per_s(), "op/s per chip");
  derived("dram_bytes_per_s", config.dram_bytes_per_s(), "B/s per chip");
  derived("pcie_link_bytes_per_s", config.pcie_link_bytes_per_s(), "B/s");
  derived("pcie_bytes_per_s", config.pcie_bytes_per_s(), "B/s achieved");
  derived("d2d_bytes_per_s", config.d2d_bytes_per_s(), "B/s");
  return text;
}

std::string to_yaml(const DeviceConfig& config) { return to_yaml(config, YamlProvenance{}); }

std::string to_yaml(const DeviceConfig& config, const YamlProvenance& provenance) {
  std::string out;
  yaml_comment(out, "",
               "Calculet simulated device config (simdev), read by Device_Create's "
               "config=<file> key. Every value is an assumption until calibrated on hardware; "
               "each key's comment gives its unit and tag (spec: a published or reference "
               "fact; assumed: chosen, not measured; measured: calibrated). The keys, formulas "
               "and defaults are documented in simdev/device/README.md.");
  for (const std::string& note : provenance.notes) {
    yaml_comment(out, "", note);
  }
  out += "schema: " + std::string(kDeviceConfigSchema) + "\n";
  for (const std::string_view section : kSections) {
    const std::string indent = section.empty() ? "" : "  ";
    if (!section.empty()) {
      out += "\n" + std::string(section) + ":\n";
    }
    for (const ParamSpec& spec : kParams) {
      if (spec.section != section) {
        continue;
      }
      std::string unit = spec.unit.empty() ? "" : "[" + std::string(spec.unit) + "] ";
      if (spec.is_enum()) {
        unit.clear();
        for (const std::string_view choice : spec.choices) {
          unit += (unit.empty() ? "[" : "|") + std::string(choice);
        }
        unit += "] ";
      }
      const bool measured = std::find(provenance.measured.begin(), provenance.measured.end(),
                                      spec.name) != provenance.measured.end();
      const ParamTag tag = measured ? ParamTag::kMeasured : spec.tag;
      yaml_comment(out, indent,
                   unit + "(" + std::string(to_string(tag)) + ") " + std::string(spec.description));
      out += indent + std::string(spec.name) + ": " + spec.format(config) + "\n";
    }
  }
  return out;
}

}  // namespace simdev
