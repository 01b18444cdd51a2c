#include "runner/calibrate/calibrate.hpp"

#include <fcntl.h>
#include <spdlog/fmt/fmt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "calbin/manifest.hpp"
#include "calbin/sha256.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/envelope.hpp"
#include "runner/core/report/output_file.hpp"
#include "runner/core/report/report.hpp"
#include "simdev/calibrate/calibration.hpp"
#include "version/version.hpp"

namespace runner {
namespace {

using nlohmann::json;

constexpr const char* kSchema = "calrt-calibrate/1";
constexpr const char* kBenchSchema = "calrt-bench/3";
constexpr const char* kSweepSchema = "calrt-bench-sweep/4";
// /4 added two columns; what calibrate reads of a point is the same in /3.
constexpr const char* kSweepSchemaBefore = "calrt-bench-sweep/3";
// A bench report of 10 runs of a 4096-token prompt is about 1 MB; anything past this is not
// one, and is refused before it is read into memory.
constexpr off_t kMaxReportBytes = off_t{256} << 20;

struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The whole file, refused unless it is a regular file within kMaxReportBytes: a FIFO or a
// device named as a report must not block or exhaust memory.
std::string read_report(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw BadInput(fmt::format("{}: cannot be opened: {}", path.string(), std::strerror(errno)));
  }
  struct stat st {};
  std::string text;
  try {
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      throw BadInput(fmt::format("{}: not a regular file", path.string()));
    }
    if (st.st_size > kMaxReportBytes) {
      throw BadInput(fmt::format("{}: {} bytes, more than a bench report's bound of {} bytes",
                                 path.string(), st.st_size, kMaxReportBytes));
    }
    text.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw BadInput(fmt::format("{}: read failed: {}", path.string(),
                                   n == 0 ? "file shrank while read" : std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return text;
}

// A field of a report, checked: `where` is its JSON pointer, named in every error.
const json& field(const std::string& file, const json& parent, const std::string& where,
                  const char* key) {
  if (!parent.is_object() || !parent.contains(key)) {
    throw BadInput(fmt::format("{}: {}/{} is missing", file, where, key));
  }
  return parent.at(key);
}

std::string text_field(const std::string& file, const json& parent, const std::string& where,
                       const char* key) {
  const json& value = field(file, parent, where, key);
  if (!value.is_string()) {
    throw BadInput(fmt::format("{}: {}/{} = {}: not a string", file, where, key, value.dump()));
  }
  return value.get<std::string>();
}

// A number in [lo, hi]; integers only when `integer`.
double number_field(const std::string& file, const json& parent, const std::string& where,
                    const char* key, double lo, double hi, bool integer) {
  const json& value = field(file, parent, where, key);
  const bool ok = integer ? value.is_number_unsigned() : value.is_number();
  const double number = ok ? value.get<double>() : 0.0;
  if (!ok || !std::isfinite(number) || number < lo || number > hi) {
    throw BadInput(fmt::format("{}: {}/{} = {}: not {} in [{}, {}]", file, where, key, value.dump(),
                               integer ? "an integer" : "a number", lo, hi));
  }
  return number;
}

struct Reports {
  std::vector<simdev::JobTiming> jobs;
  std::vector<simdev::TransferTiming> d2d;
  std::string prefill_model;
  std::string decode_model;
  std::string device_config;
  std::string models_from;  // the report that named them first
  json sources = json::array();
};

constexpr double kMaxNs = 1e15;  // 11 days: no phase of one job takes longer
constexpr double kMaxCount = 1e12;

// Where one measurement lies in a report: a bench report holds one, a sweep report one per
// point. Each is a JSON pointer, named in errors.
struct Where {
  std::string calbin;         // {manifest_sha256, prefill_model, decode_model}
  std::string device_config;  // the Device_Create string it was measured under
  std::string sync;           // the object holding the sync mode's job_shapes
  std::string d2d;            // d2d_spans, optional
};

const json& at(const std::string& file, const json& doc, const std::string& pointer,
               const char* missing_why = "") {
  const json::json_pointer ptr(pointer);
  if (!doc.contains(ptr)) {
    throw BadInput(fmt::format("{}: {} is missing{}", file, pointer, missing_why));
  }
  return doc.at(ptr);
}

void read_jobs(const std::string& file, const json& shapes, const std::string& pointer,
               Reports& out) {
  if (!shapes.is_array() || shapes.empty()) {
    throw BadInput(fmt::format("{}: {} is {}: no measured job", file, pointer,
                               shapes.is_array() ? "empty" : "not an array"));
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const json& s = shapes[i];
    const std::string where = fmt::format("{}/{}", pointer, i);
    simdev::JobTiming job;
    const std::string kind = text_field(file, s, where, "kind");
    if (kind != "prefill" && kind != "decode") {
      throw BadInput(fmt::format("{}: {}/kind = \"{}\": not prefill or decode", file, where, kind));
    }
    job.prefill = kind == "prefill";
    job.tokens = static_cast<uint64_t>(number_field(file, s, where, "tokens", 1, 1 << 30, true));
    job.past = static_cast<uint64_t>(number_field(file, s, where, "past", 0, 1 << 30, true));
    job.count = static_cast<uint64_t>(number_field(file, s, where, "count", 1, kMaxCount, true));
    job.queue_ns = number_field(file, s, where, "queue_ns", 0, kMaxNs, false);
    job.h2d_ns = number_field(file, s, where, "h2d_ns", 0, kMaxNs, false);
    job.infer_ns = number_field(file, s, where, "infer_ns", 0, kMaxNs, false);
    job.d2h_ns = number_field(file, s, where, "d2h_ns", 0, kMaxNs, false);
    out.jobs.push_back(job);
  }
}

void read_d2d(const std::string& file, const json& d2d, const std::string& pointer, Reports& out) {
  if (!d2d.is_array()) {
    throw BadInput(fmt::format("{}: {} = {}: not an array", file, pointer, d2d.dump()));
  }
  for (size_t i = 0; i < d2d.size(); ++i) {
    const std::string where = fmt::format("{}/{}", pointer, i);
    simdev::TransferTiming t;
    t.bytes = static_cast<uint64_t>(number_field(file, d2d[i], where, "bytes", 1, 1e15, true));
    t.count = static_cast<uint64_t>(number_field(file, d2d[i], where, "count", 1, kMaxCount, true));
    t.ns = number_field(file, d2d[i], where, "mean_ns", 0, kMaxNs, false);
    out.d2d.push_back(t);
  }
}

// One measurement: of this calbin, of the same models and device as the ones before it.
void read_measurement(const std::string& file, const json& doc, const Where& w,
                      const std::string& calbin_sha256, Reports& out, json& source) {
  const json& calbin = at(file, doc, w.calbin);
  const std::string sha = text_field(file, calbin, w.calbin, "manifest_sha256");
  if (sha != calbin_sha256) {
    throw BadInput(
        fmt::format("{}: {}/manifest_sha256 = {}: measured on another calbin (this one's "
                    "manifest is {})",
                    file, w.calbin, sha, calbin_sha256));
  }
  const std::string prefill = text_field(file, calbin, w.calbin, "prefill_model");
  const std::string decode = text_field(file, calbin, w.calbin, "decode_model");
  if (!out.models_from.empty() && (prefill != out.prefill_model || decode != out.decode_model)) {
    throw BadInput(fmt::format("{}: {} models {} and {}: the reports before it measured {} and {}",
                               file, w.calbin, prefill, decode, out.prefill_model,
                               out.decode_model));
  }
  const json& config = at(file, doc, w.device_config);
  if (!config.is_string()) {
    throw BadInput(fmt::format("{}: {} = {}: not a string", file, w.device_config, config.dump()));
  }
  if (!out.models_from.empty() && config.get<std::string>() != out.device_config) {
    throw BadInput(fmt::format(
        "{}: {} = \"{}\": the reports before it were measured under \"{}\"; calibrate one device "
        "(a sweep over device keys measures several)",
        file, w.device_config, config.get<std::string>(), out.device_config));
  }
  if (out.models_from.empty()) {
    out.models_from = file;
    out.prefill_model = prefill;
    out.decode_model = decode;
    out.device_config = config.get<std::string>();
  }
  constexpr const char* kSyncNeeded =
      ": calibrate needs the sync mode, where a job's queue is the submission alone (bench "
      "--mode sync or both)";
  const json& sync = at(file, doc, w.sync, kSyncNeeded);
  const std::string shapes = w.sync + "/job_shapes";
  read_jobs(file, at(file, doc, shapes, kSyncNeeded), shapes, out);
  source["job_shapes"] = source.value("job_shapes", 0) + sync.at("job_shapes").size();
  if (doc.contains(json::json_pointer(w.d2d))) {
    const json& d2d = doc.at(json::json_pointer(w.d2d));
    read_d2d(file, d2d, w.d2d, out);
    source["d2d_sizes"] = source.value("d2d_sizes", 0) + (d2d.is_array() ? d2d.size() : 0);
  }
}

void read_one(const std::filesystem::path& path, const std::string& calbin_sha256, Reports& out) {
  const std::string file = path.string();
  const std::string text = read_report(path);
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw BadInput(fmt::format("{}: not a JSON object (a calrt bench --json report)", file));
  }
  const std::string schema = text_field(file, doc, "", "schema");
  if (schema != kBenchSchema && schema != kSweepSchema && schema != kSweepSchemaBefore) {
    throw BadInput(fmt::format("{}: /schema = \"{}\": calibrate reads {}, {} and {} reports", file,
                               schema, kBenchSchema, kSweepSchema, kSweepSchemaBefore));
  }
  if (const std::string result = text_field(file, doc, "", "result"); result != "PASS") {
    throw BadInput(
        fmt::format("{}: /result = \"{}\": calibrate from passing runs only", file, result));
  }
  json source = {{"report", file},
                 {"sha256", calbin::sha256_hex(std::span(
                                reinterpret_cast<const uint8_t*>(text.data()), text.size()))},
                 {"job_shapes", 0},
                 {"d2d_sizes", 0}};
  if (schema == kBenchSchema) {
    read_measurement(file, doc, {"/calbin", "/device/config", "/modes/sync", "/d2d_spans"},
                     calbin_sha256, out, source);
  } else {
    const json& points = at(file, doc, "/points");
    if (!points.is_array() || points.empty()) {
      throw BadInput(fmt::format("{}: /points holds no point", file));
    }
    for (size_t i = 0; i < points.size(); ++i) {
      const std::string base = fmt::format("/points/{}/measured", i);
      read_measurement(file, doc,
                       {base + "/calbin", base + "/device_config", base, base + "/d2d_spans"},
                       calbin_sha256, out, source);
    }
  }
  out.sources.push_back(std::move(source));
}

const calbin::Model& model_named(const calbin::Manifest& manifest, const std::string& name,
                                 const std::filesystem::path& calbin, const std::string& report) {
  for (const calbin::Model& model : manifest.models) {
    if (model.name == name) return model;
  }
  throw BadInput(fmt::format("{}: /calbin names model '{}', which {} does not have", report, name,
                             (calbin / calbin::kManifestFileName).string()));
}

json errors_json(const std::vector<simdev::PhaseError>& errors) {
  json out = json::object();
  for (const simdev::PhaseError& e : errors) {
    out[e.phase] = {{"shapes", e.shapes}, {"mape_pct", e.mape_pct}, {"worst_pct", e.worst_pct}};
  }
  return out;
}

void print_result(const simdev::Calibration& fit) {
  std::printf("%-24s %12s %12s  %s\n", "key", "base", "calibrated", "from");
  for (const simdev::FittedKey& key : fit.keys) {
    std::string value = key.measured ? std::to_string(key.value) : "(kept)";
    if (key.range)
      value = fmt::format("{} [{}-{}]", key.value, key.range->first, key.range->second);
    std::printf("%-24s %12llu %12s  %s\n", std::string(key.name).c_str(),
                static_cast<unsigned long long>(key.base), value.c_str(), key.note.c_str());
  }
  std::printf("[lo-hi]: the values that fit within a 95 %% profile confidence region\n");
  std::printf("\n%-16s %7s %14s %14s %14s\n", "phase", "shapes", "MAPE base", "MAPE fitted",
              "worst fitted");
  for (size_t i = 0; i < fit.after.size(); ++i) {
    const simdev::PhaseError& after = fit.after[i];
    const double before = i < fit.before.size() ? fit.before[i].mape_pct : 0.0;
    std::printf("%-16s %7zu %13.3f%% %13.3f%% %13.3f%%\n", after.phase.c_str(), after.shapes,
                before, after.mape_pct, after.worst_pct);
  }
}

std::string yaml_of(const simdev::Calibration& fit, const CalibrateOptions& o,
                    const json& sources) {
  simdev::YamlProvenance provenance;
  for (const simdev::FittedKey& key : fit.keys) {
    if (key.measured) provenance.measured.push_back(key.name);
  }
  provenance.notes.push_back(
      fmt::format("Calibrated by {} from calbin {}:", calrt_version::line("calrt calibrate"),
                  o.calbin.string()));
  for (const json& source : sources) {
    provenance.notes.push_back(fmt::format("  {} (sha256 {})", source["report"].get<std::string>(),
                                           source["sha256"].get<std::string>()));
  }
  std::string errors;
  for (const simdev::PhaseError& e : fit.after) {
    errors += fmt::format("{}{} {:.2f}%", errors.empty() ? "" : ", ", e.phase, e.mape_pct);
  }
  provenance.notes.push_back("Fit error (MAPE) per phase: " + errors + ".");
  for (const simdev::FittedKey& key : fit.keys) {
    if (key.range) {
      provenance.notes.push_back(
          fmt::format("{} fits within a 95% profile confidence region "
                      "from {} to {}.",
                      key.name, key.range->first, key.range->second));
    }
  }
  return simdev::to_yaml(fit.config, provenance);
}

}  // namespace

int run_calibrate(const CalibrateOptions& o) {
  Envelope envelope{.schema = kSchema, .command = "calibrate", .counts = {.unit = "key"}};
  auto bad_input = [&](const std::string& why) {
    std::fprintf(stderr, "calrt calibrate: bad input: %s\n", why.c_str());
    envelope.error = why;
    if (!o.json.empty()) {
      if (std::string problem = write_json_file(o.json, to_json(envelope)); !problem.empty()) {
        std::fprintf(stderr, "calrt calibrate: %s\n", problem.c_str());
      }
    }
    return kExitUsage;
  };
  try {
    for (const auto& [flag, path] : {std::pair{"--out", o.out}, std::pair{"--json", o.json}}) {
      if (path.empty() || path == "-") continue;
      if (std::string problem = check_output_path(flag, path, o.calbin); !problem.empty()) {
        throw BadInput(problem);
      }
    }
    if (same_file(o.out, o.json)) {
      throw BadInput(fmt::format("--out and --json name the same file '{}'", o.out.string()));
    }
    if (o.reports.empty()) {
      throw BadInput("no report given");
    }
    auto base = simdev::parse_device_config(o.device_config);
    if (!base) {
      throw BadInput("--device-config: " + base.error().message);
    }
    auto manifest = calbin::read_manifest(o.calbin);
    if (!manifest) {
      throw BadInput(manifest.error().to_string());
    }
    auto sha = calbin::sha256_file(o.calbin / calbin::kManifestFileName);
    if (!sha) {
      throw BadInput(sha.error().to_string());
    }
    Reports reports;
    for (const std::filesystem::path& path : o.reports) {
      read_one(path, *sha, reports);
    }
    simdev::CalibrationInput input;
    input.manifest = &*manifest;
    input.prefill = &model_named(*manifest, reports.prefill_model, o.calbin, reports.models_from);
    input.decode = &model_named(*manifest, reports.decode_model, o.calbin, reports.models_from);
    input.base = *base;
    input.jobs = std::move(reports.jobs);
    input.d2d = std::move(reports.d2d);
    auto fit = simdev::calibrate(input);
    if (!fit) {
      std::string files;
      for (const std::filesystem::path& path : o.reports) {
        files += (files.empty() ? "" : ", ") + path.string();
      }
      throw BadInput(fmt::format("{}: {}", files, fit.error().message));
    }
    print_result(*fit);
    envelope.result = Verdict::pass;
    json keys = json::array();
    for (const simdev::FittedKey& key : fit->keys) {
      keys.push_back({{"key", key.name},
                      {"base", key.base},
                      {"value", key.value},
                      {"measured", key.measured},
                      {"note", key.note}});
      if (key.range) keys.back()["range_95"] = {key.range->first, key.range->second};
      (key.measured ? envelope.counts.passed : envelope.counts.skipped) += 1;
    }
    if (!o.out.empty()) {
      if (std::string problem = write_text_file(o.out, yaml_of(*fit, o, reports.sources));
          !problem.empty()) {
        throw BadInput(problem);
      }
      std::printf("\nwrote %s\n", o.out.c_str());
    }
    if (!o.json.empty()) {
      json doc = to_json(envelope);
      doc["calbin"] = {{"path", o.calbin.string()}, {"manifest_sha256", *sha}};
      doc["base_config"] = o.device_config;
      doc["sources"] = reports.sources;
      doc["keys"] = keys;
      doc["error_base"] = errors_json(fit->before);
      doc["error_fitted"] = errors_json(fit->after);
      doc["config_yaml"] = simdev::to_yaml(fit->config);
      if (std::string problem = write_json_file(o.json, doc); !problem.empty()) {
        throw BadInput(problem);
      }
    }
    return kExitPass;
  } catch (const BadInput& error) {
    return bad_input(error.what());
  } catch (const std::exception& error) {
    return bad_input(std::string("internal error: ") + error.what());
  }
}

}  // namespace runner
