// checked_main.hpp: runs the registered benchmarks and reports whether any of them failed.
// Google Benchmark's own main exits 0 even when a benchmark called SkipWithError, so a
// broken benchmark (or a host path that disagrees with its reference) would pass as a ctest;
// here such a run makes the executable exit 1.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

namespace calrt_bench {

// Forwards to the display reporter that the command line chose and counts the runs that
// ended in an error.
class ErrorCountingReporter final : public benchmark::BenchmarkReporter {
 public:
  // `display` is Google Benchmark's own, which it keeps alive for the process.
  explicit ErrorCountingReporter(benchmark::BenchmarkReporter* display) : display_(display) {}

  bool ReportContext(const Context& context) override { return display_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) {
        failed_.push_back(run.benchmark_name() + ": " + run.error_message);
      }
    }
    display_->ReportRuns(runs);
  }
  void Finalize() override { display_->Finalize(); }

  const std::vector<std::string>& failed() const { return failed_; }

 private:
  benchmark::BenchmarkReporter* display_;
  std::vector<std::string> failed_;
};

// Runs the benchmarks the command line selected; returns the number that failed, each named
// on stderr.
inline size_t run_benchmarks_checked() {
  ErrorCountingReporter reporter(benchmark::CreateDefaultDisplayReporter());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  for (const std::string& failure : reporter.failed()) {
    std::fprintf(stderr, "benchmark failed: %s\n", failure.c_str());
  }
  return reporter.failed().size();
}

// The whole main() of a benchmark program with nothing of its own to set up: exit 2 on an
// unknown flag, 1 when a benchmark failed, else 0.
inline int checked_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 2;
  }
  const size_t failed = run_benchmarks_checked();
  benchmark::Shutdown();
  return failed == 0 ? 0 : 1;
}

}  // namespace calrt_bench
