#include "simdev/calibrate/calibration.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "simdev/device/device.hpp"
#include "simdev/device/timing/cost_model.hpp"

namespace simdev {
namespace {

double to_ns(TimePs ps) { return static_cast<double>(ps) / 1000.0; }

// How far the profile search looks for a better DRAM efficiency, in percent.
constexpr uint64_t kWindow = 2;
// Errors this close are a tie: within 0.1 % of each other, or both within 1e-10 of the
// squared relative error. A measured phase is in whole nanoseconds, which leaves a
// microsecond phase 1e-3 and a millisecond one 1e-6 of relative rounding (1e-6 and 1e-12
// squared, averaged over many shapes).
constexpr double kTieRelative = 1e-3;
constexpr double kTieAbsolute = 1e-10;

// y = intercept + slope x, fitted to points weighted by count / y^2 (relative error).
struct Line {
  double intercept = 0;
  double slope = 0;
};
struct Point {
  double x = 0;
  double y = 0;
  double weight = 1;
};

// Needs two distinct x; nullopt otherwise.
std::optional<Line> fit_line(const std::vector<Point>& points) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  double x_min = 0, x_max = 0;
  bool first = true;
  for (const Point& p : points) {
    if (p.y <= 0) continue;
    const double w = p.weight / (p.y * p.y);
    sw += w;
    sx += w * p.x;
    sy += w * p.y;
    sxx += w * p.x * p.x;
    sxy += w * p.x * p.y;
    x_min = first ? p.x : std::min(x_min, p.x);
    x_max = first ? p.x : std::max(x_max, p.x);
    first = false;
  }
  const double det = sw * sxx - sx * sx;
  if (first || x_max <= x_min || det <= 0) {
    return std::nullopt;
  }
  return Line{(sxx * sy - sx * sxy) / det, (sw * sxy - sx * sy) / det};
}

// The key's value rounded into its bounds; nullopt when the fit lies outside them (a wrong
// base config or data the model cannot explain, never a value to write silently).
std::optional<uint64_t> in_bounds(std::string_view name, double value) {
  const ParamSpec* spec = find_device_param(name);
  if (spec == nullptr || !std::isfinite(value) || value < -0.5) return std::nullopt;
  const double rounded = std::round(value);
  if (rounded < static_cast<double>(spec->min_value) ||
      rounded > static_cast<double>(spec->max_value)) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(rounded);
}

class Fit {
 public:
  explicit Fit(const CalibrationInput& input) : in_(input), config_(input.base) {}

  Calibration run() {
    fit_submit();
    fit_pcie();
    fit_d2d();
    fit_compute();
    Calibration out;
    out.config = config_;
    out.keys = std::move(keys_);
    out.before = phase_errors(in_, in_.base);
    out.after = phase_errors(in_, config_);
    return out;
  }

 private:
  void keep(std::string_view name, std::string why) {
    const ParamSpec* spec = find_device_param(name);
    keys_.push_back(
        {name, spec->get(in_.base), spec->get(in_.base), false, std::move(why), std::nullopt});
  }
  void take(std::string_view name, uint64_t value, std::string note = {}) {
    const ParamSpec* spec = find_device_param(name);
    spec->set(config_, value);
    keys_.push_back({name, spec->get(in_.base), value, true, std::move(note), std::nullopt});
  }

  void fit_submit() {
    std::vector<std::pair<double, uint64_t>> samples;
    uint64_t total = 0;
    for (const JobTiming& job : in_.jobs) {
      if (job.queue_ns >= 0) {
        samples.emplace_back(job.queue_ns, job.count);
        total += job.count;
      }
    }
    if (samples.empty()) {
      keep("submit_overhead_ns", "no queue phase measured");
      return;
    }
    std::sort(samples.begin(), samples.end());
    uint64_t seen = 0;
    double median = samples.back().first;
    for (const auto& [ns, count] : samples) {
      seen += count;
      if (2 * seen >= total) {
        median = ns;
        break;
      }
    }
    if (auto value = in_bounds("submit_overhead_ns", median)) {
      take("submit_overhead_ns", *value, "median queue of sync-mode jobs");
    } else {
      keep("submit_overhead_ns", fmt::format("median queue {:.0f} ns is out of bounds", median));
    }
  }

  // A link's latency and rate from transfers of several sizes.
  void fit_link(const std::vector<Point>& points, std::string_view latency_key,
                std::string_view rate_key, const char* what,
                double (*rate_value)(double bytes_per_s, const DeviceConfig&)) {
    const std::optional<Line> line = fit_line(points);
    if (!line || line->slope <= 0) {
      const std::string why = fmt::format(
          "{}: {}", what,
          points.empty() ? "none measured" : "one transfer size only (latency and rate need two)");
      keep(latency_key, why);
      keep(rate_key, why);
      return;
    }
    const double bytes_per_s = 1e9 / line->slope;
    const auto latency = in_bounds(latency_key, line->intercept);
    const auto rate = in_bounds(rate_key, rate_value(bytes_per_s, config_));
    const std::string note = fmt::format("{}, {} sizes", what, points.size());
    if (latency && rate) {
      take(latency_key, *latency, note);
      take(rate_key, *rate, note);
      return;
    }
    const std::string why = fmt::format(
        "{}: the fitted line ({:.0f} ns + bytes at {:.3g} B/s) is outside the "
        "keys' bounds; check the base config's peak rates",
        what, line->intercept, bytes_per_s);
    keep(latency_key, why);
    keep(rate_key, why);
  }

  void fit_pcie() {
    // H2D and D2H share the link's constants; each size's mean over its jobs.
    std::map<uint64_t, std::pair<double, uint64_t>> by_bytes;  // bytes -> (sum of ns, jobs)
    auto add = [&](uint64_t bytes, double ns, uint64_t count) {
      if (ns <= 0) return;
      auto& [sum, jobs] = by_bytes[bytes];
      sum += ns * static_cast<double>(count);
      jobs += count;
    };
    for (const JobTiming& job : in_.jobs) {
      const calbin::Model& model = job.prefill ? *in_.prefill : *in_.decode;
      const JobCost cost =
          plan_for(job.prefill).cost(job_shape(*in_.manifest, model, job.tokens, job.past));
      add(cost.h2d_bytes, job.h2d_ns, job.count);
      add(cost.d2h_bytes, job.d2h_ns, job.count);
    }
    std::vector<Point> points;
    for (const auto& [bytes, sum] : by_bytes) {
      const double jobs = static_cast<double>(std::max<uint64_t>(sum.second, 1));
      points.push_back({static_cast<double>(bytes), sum.first / jobs, jobs});
    }
    fit_link(points, "pcie_latency_ns", "pcie_efficiency_pct", "H2D and D2H",
             [](double bytes_per_s, const DeviceConfig& c) {
               const Rate link = c.pcie_link_bytes_per_s();
               return 100.0 * bytes_per_s * static_cast<double>(link.den) /
                      static_cast<double>(link.num);
             });
  }

  void fit_d2d() {
    std::vector<Point> points;
    for (const TransferTiming& t : in_.d2d) {
      points.push_back({static_cast<double>(t.bytes), t.ns, static_cast<double>(t.count)});
    }
    fit_link(points, "d2d_latency_ns", "d2d_bw_mbps", "D2D reductions",
             [](double bytes_per_s, const DeviceConfig&) { return bytes_per_s / 1e6; });
  }

  // The infer time the model predicts for every measured shape, in ns.
  std::vector<double> predict_infer(const DeviceConfig& config) {
    CostPlan prefill(*in_.manifest, *in_.prefill, config);
    CostPlan decode(*in_.manifest, *in_.decode, config);
    std::vector<double> out;
    for (const JobTiming& job : infer_jobs_) {
      const calbin::Model& model = job.prefill ? *in_.prefill : *in_.decode;
      CostPlan& plan = job.prefill ? prefill : decode;
      out.push_back(
          to_ns(plan.cost(job_shape(*in_.manifest, model, job.tokens, job.past)).compute_ps()));
    }
    return out;
  }

  // At efficiencies (compute, dram): the best op overhead and the weighted squared relative
  // error it leaves. The overhead adds op count x overhead to every shape, so two predictions
  // (overhead 0 and 1 us) give each shape's op count and the best overhead in closed form.
  struct Trial {
    double error = 0;  // weighted: prefill and decode alike
    double plain = 0;  // the sum of squared relative residuals, each shape alike
    double overhead_ns = 0;
  };
  Trial trial(uint64_t compute, uint64_t dram) {
    const auto key = std::make_pair(compute, dram);
    if (const auto at = trials_.find(key); at != trials_.end()) {
      return at->second;
    }
    DeviceConfig c = config_;
    c.compute_efficiency_pct = compute;
    c.dram_efficiency_pct = dram;
    c.op_overhead_ns = 0;
    const std::vector<double> t0 = predict_infer(c);
    c.op_overhead_ns = 1000;
    const std::vector<double> t1 = predict_infer(c);
    double num = 0, den = 0;
    for (size_t j = 0; j < infer_jobs_.size(); ++j) {
      const double y = infer_jobs_[j].infer_ns;
      const double ops = (t1[j] - t0[j]) / 1000.0;
      num += weight_[j] * ops * (y - t0[j]) / (y * y);
      den += weight_[j] * ops * ops / (y * y);
    }
    Trial result;
    result.overhead_ns = den > 0 ? std::max(0.0, num / den) : 0.0;
    for (size_t j = 0; j < infer_jobs_.size(); ++j) {
      const double y = infer_jobs_[j].infer_ns;
      const double ops = (t1[j] - t0[j]) / 1000.0;
      const double r = (y - t0[j] - ops * result.overhead_ns) / y;
      result.error += weight_[j] * r * r;
      result.plain += r * r;
    }
    trials_.emplace(key, result);
    return result;
  }

  // Whether moving one efficiency by a tenth changes any prediction by 0.5 % or more: if not,
  // no measured job is bound by that resource and its value is not in the data.
  bool moves(uint64_t DeviceConfig::*key, const std::vector<double>& at_fit) {
    DeviceConfig c = config_;
    const uint64_t value = c.*key;
    c.*key = value > 10 ? value - value / 10 : value + std::max<uint64_t>(value / 10, 1);
    const std::vector<double> moved = predict_infer(c);
    for (size_t j = 0; j < moved.size(); ++j) {
      if (std::abs(moved[j] - at_fit[j]) >= 0.005 * at_fit[j]) return true;
    }
    return false;
  }

  // The DRAM efficiency that fits best at `compute`, searched from `dram`: the window of
  // +-kWindow around the current best, moved until its centre is best.
  uint64_t best_dram(uint64_t compute, uint64_t dram) {
    for (;;) {
      uint64_t best = dram;
      for (uint64_t d = dram > kWindow ? dram - kWindow : 1;
           d <= std::min<uint64_t>(dram + kWindow, 100); ++d) {
        if (trial(compute, d).error < trial(compute, best).error) best = d;
      }
      if (best == dram) return dram;
      dram = best;
    }
  }

  // The efficiencies whose profile error is within a 95 % confidence region of the best: the
  // F-test bound for one parameter, S <= S_min (1 + 3.84 / (n - 3)), with n the infer shapes
  // and 3 the fitted constants. A valley narrower than a percent holds no whole percent but
  // the best, so the region is also taken from the parabola through the best and its two
  // neighbours, rounded outward. Noiseless data gives the fitted value alone; noisy data
  // shows how far the value is fixed, which for the compute efficiency is little when few
  // ops are compute-bound.
  template <class Error>
  std::optional<std::pair<uint64_t, uint64_t>> range_of(Error&& error, uint64_t best) {
    const size_t n = infer_jobs_.size();
    if (n <= 3) return std::nullopt;
    const double factor = 1 + 3.84 / static_cast<double>(n - 3);
    double floor = error(best);
    std::pair<uint64_t, uint64_t> range{best, best};
    if (best > 1 && best < 100) {
      const double a = error(best - 1), b = error(best), c = error(best + 1);
      const double k = (a + c - 2 * b) / 2;
      if (k > 0) {
        const double m = (c - a) / 2;
        const double x0 = -m / (2 * k);
        floor = std::min(floor, b - m * m / (4 * k));
        const double half = std::sqrt(std::max(0.0, floor * (factor - 1) + kTieAbsolute) / k);
        const double lo = std::max(1.0, std::floor(static_cast<double>(best) + x0 - half));
        const double hi = std::min(100.0, std::ceil(static_cast<double>(best) + x0 + half));
        range = {std::min(best, static_cast<uint64_t>(lo)),
                 std::max(best, static_cast<uint64_t>(hi))};
      }
    }
    const double bound = floor * factor + kTieAbsolute;
    for (uint64_t v = 1; v <= 100; ++v) {
      if (error(v) > bound) continue;
      range.first = std::min(range.first, v);
      range.second = std::max(range.second, v);
    }
    return range;
  }

  void fit_compute() {
    size_t prefill_shapes = 0;
    for (const JobTiming& job : in_.jobs) {
      if (job.infer_ns > 0) {
        infer_jobs_.push_back(job);
        prefill_shapes += job.prefill ? 1 : 0;
      }
    }
    if (infer_jobs_.empty()) {
      for (const char* key : {"compute_efficiency_pct", "dram_efficiency_pct", "op_overhead_ns"}) {
        keep(key, "no infer phase measured");
      }
      return;
    }
    // Prefill and decode weigh alike, however many shapes each has.
    const size_t decode_shapes = infer_jobs_.size() - prefill_shapes;
    for (const JobTiming& job : infer_jobs_) {
      weight_.push_back(1.0 / static_cast<double>(job.prefill ? prefill_shapes : decode_shapes));
    }
    // A profile search: for every compute efficiency the best DRAM efficiency, followed from
    // its neighbour's. Both are whole percents, as the config holds them. The error is far
    // from convex: where few ops are compute-bound it is nearly flat in the compute
    // efficiency, and a wrong one is half made up by the op overhead, while the DRAM
    // efficiency sits in a valley one percent wide. A grid or pattern search steps over that
    // valley; following it does not.
    uint64_t compute = config_.compute_efficiency_pct;
    uint64_t dram = 1;
    for (uint64_t d = 1; d <= 100; ++d) {
      if (trial(compute, d).error < trial(compute, dram).error) dram = d;
    }
    std::vector<std::pair<uint64_t, uint64_t>> profile(101);  // compute -> (compute, dram)
    for (const int step : {1, -1}) {
      uint64_t d = dram;
      for (uint64_t c = config_.compute_efficiency_pct; c >= 1 && c <= 100;
           c += static_cast<uint64_t>(step)) {
        d = best_dram(c, d);
        profile[c] = {c, d};
      }
    }
    // Of the points as good as the best (within the rounding of measured nanoseconds), the one
    // nearest the base: where the data does not fix the compute efficiency, that is the base
    // value, and moves() below finds it unfixed.
    double best_error = trial(compute, dram).error;
    for (uint64_t c = 1; c <= 100; ++c) {
      best_error = std::min(best_error, trial(c, profile[c].second).error);
    }
    const double tie = best_error * (1 + kTieRelative) + kTieAbsolute;
    const auto distance = [&](uint64_t c) {
      return c > in_.base.compute_efficiency_pct ? c - in_.base.compute_efficiency_pct
                                                 : in_.base.compute_efficiency_pct - c;
    };
    bool found = false;
    for (uint64_t c = 1; c <= 100; ++c) {
      if (trial(c, profile[c].second).error <= tie && (!found || distance(c) < distance(compute))) {
        found = true;
        compute = c;
        dram = profile[c].second;
      }
    }
    const Trial best = trial(compute, dram);
    config_.compute_efficiency_pct = compute;
    config_.dram_efficiency_pct = dram;
    const auto overhead = in_bounds("op_overhead_ns", best.overhead_ns);
    config_.op_overhead_ns = overhead.value_or(in_.base.op_overhead_ns);
    const std::vector<double> at_fit = predict_infer(config_);
    std::string shapes =
        fmt::format("infer of {} prefill and {} decode shapes", prefill_shapes, decode_shapes);
    if (in_.d2d.empty() && in_.manifest->chips >= 2) {
      shapes += "; D2D held at the base config (no D2D spans): its error is absorbed here";
    }
    if (moves(&DeviceConfig::compute_efficiency_pct, at_fit)) {
      take("compute_efficiency_pct", compute, shapes);
      keys_.back().range =
          range_of([&](uint64_t c) { return trial(c, profile[c].second).plain; }, compute);
    } else {
      config_.compute_efficiency_pct = in_.base.compute_efficiency_pct;
      keep("compute_efficiency_pct", "no measured job is compute-bound (measure longer prompts)");
    }
    if (moves(&DeviceConfig::dram_efficiency_pct, at_fit)) {
      take("dram_efficiency_pct", dram, shapes);
      keys_.back().range = range_of([&](uint64_t d) { return trial(compute, d).plain; }, dram);
    } else {
      config_.dram_efficiency_pct = in_.base.dram_efficiency_pct;
      keep("dram_efficiency_pct", "no measured job is memory-bound");
    }
    if (overhead) {
      take("op_overhead_ns", *overhead, shapes);
    } else {
      keep("op_overhead_ns",
           fmt::format("the fitted {:.0f} ns is out of bounds", best.overhead_ns));
    }
  }

  CostPlan& plan_for(bool prefill) {
    std::optional<CostPlan>& plan = prefill ? prefill_plan_ : decode_plan_;
    if (!plan) plan.emplace(*in_.manifest, prefill ? *in_.prefill : *in_.decode, config_);
    return *plan;
  }

  const CalibrationInput& in_;
  DeviceConfig config_;
  std::vector<FittedKey> keys_;
  std::vector<JobTiming> infer_jobs_;
  std::vector<double> weight_;
  std::map<std::pair<uint64_t, uint64_t>, Trial> trials_;
  // Byte counts only: a job's transfer sizes do not depend on the constants being fitted.
  std::optional<CostPlan> prefill_plan_;
  std::optional<CostPlan> decode_plan_;
};

void add_error(std::vector<PhaseError>& out, std::string phase, double predicted, double measured) {
  if (measured <= 0) return;
  auto at =
      std::find_if(out.begin(), out.end(), [&](const PhaseError& e) { return e.phase == phase; });
  if (at == out.end()) {
    out.push_back(PhaseError{std::move(phase), 0, 0, 0});
    at = out.end() - 1;
  }
  const double pct = 100.0 * std::abs(predicted - measured) / measured;
  at->mape_pct =
      (at->mape_pct * static_cast<double>(at->shapes) + pct) / static_cast<double>(at->shapes + 1);
  at->worst_pct = std::max(at->worst_pct, pct);
  ++at->shapes;
}

}  // namespace

std::vector<PhaseError> phase_errors(const CalibrationInput& in, const DeviceConfig& config) {
  std::vector<PhaseError> out;
  CostPlan prefill(*in.manifest, *in.prefill, config);
  CostPlan decode(*in.manifest, *in.decode, config);
  for (const JobTiming& job : in.jobs) {
    const calbin::Model& model = job.prefill ? *in.prefill : *in.decode;
    CostPlan& plan = job.prefill ? prefill : decode;
    const JobCost cost = plan.cost(job_shape(*in.manifest, model, job.tokens, job.past));
    add_error(out, "queue", to_ns(cost.submit_ps), job.queue_ns);
    add_error(out, "h2d", to_ns(cost.h2d_ps), job.h2d_ns);
    add_error(out, job.prefill ? "infer prefill" : "infer decode", to_ns(cost.compute_ps()),
              job.infer_ns);
    add_error(out, "d2h", to_ns(cost.d2h_ps), job.d2h_ns);
  }
  for (const TransferTiming& t : in.d2d) {
    add_error(out, "d2d",
              to_ns(saturating_add(ns_to_ps(config.d2d_latency_ns),
                                   duration_ps(t.bytes, config.d2d_bytes_per_s()))),
              t.ns);
  }
  return out;
}

Expected<Calibration> calibrate(const CalibrationInput& input) {
  if (input.manifest == nullptr || input.prefill == nullptr || input.decode == nullptr) {
    return fail(CALRT_INVALID_ARGUMENT, "calibrate: the calbin's prefill and decode models");
  }
  const bool any_infer = std::any_of(input.jobs.begin(), input.jobs.end(),
                                     [](const JobTiming& job) { return job.infer_ns > 0; });
  if (!any_infer) {
    return fail(CALRT_INVALID_ARGUMENT,
                "calibrate: no measured infer time (the reports hold no job phases)");
  }
  return Fit(input).run();
}

}  // namespace simdev
