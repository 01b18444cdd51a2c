#include "runner/conformance/conformance_cli.hpp"

#include "runner/conformance/conformance_command.hpp"

namespace runner {
namespace {

void add_conformance_options(CLI::App& app, ConformanceCommandOptions& o) {
  auto* calbin = app.add_option("--calbin", o.calbin,
                                "a functional calbin directory (simdev gen --preset tiny)");
  app.add_option("--calbin-dir", o.calbin_dir,
                 "directory of calbins by preset: DIR/tiny, generated there when missing")
      ->capture_default_str()
      ->excludes(calbin);
  app.add_option("--only", o.only, "run only the clauses with these id prefixes (VER, KV.3, ...)")
      ->delimiter(',');
  app.add_option("--clause-timeout", o.clause_timeout_s,
                 "seconds of wall time before a clause's process is killed and the clause fails")
      ->capture_default_str()
      ->check(finite_range(0.1, 86400.0));
  app.add_option("--timeout", o.suite_timeout_s,
                 "seconds for the whole suite: clauses left when they are spent fail as not run, "
                 "and the reports are still written (0: no limit)")
      ->capture_default_str()
      ->check(finite_range(0.0, 1e6));
  app.add_option("--junit", o.junit, "write a JUnit XML report (one testsuite per group)")
      ->check(output_path());
  app.add_option("--json", o.json, "write the JSON report to this file (atomically)")
      ->check(output_path());
  app.add_flag("!--quiet", o.progress, "no progress line on a terminal");
  app.add_option("--md", o.md, "write the clauses as a markdown table, for pasting into a review")
      ->check(output_path());
  app.add_option("--jsonl", o.jsonl,
                 "stream one JSON line per clause as it finishes, then a summary line; `-` for "
                 "stdout (the human lines then go to stderr)")
      ->check(output_path());
  app.footer(
      "Clauses: abi/CONFORMANCE.md. Each clause runs in a process of its own: a runtime that "
      "crashes, aborts or exits fails that clause, and the suite goes on. Exit codes: 0 no clause "
      "failed (skips allowed); 1 a clause "
      "failed; 2 bad input (a missing or malformed calbin, an --only prefix that selects no "
      "clause, a runtime library that cannot be loaded, an unwritable report).");
}

class ConformanceCommand : public Command {
 public:
  explicit ConformanceCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "conformance",
            "the runtime ABI conformance suite (abi/CONFORMANCE.md), clause by clause")) {
    add_device_options(*app_, {&options_.device, &options_.device_kind, &options_.device_index,
                               &options_.device_config});
    add_conformance_options(*app_, options_);
  }

  int run(int /*argc*/, char** /*argv*/) override { return run_conformance_command(options_); }

 private:
  ConformanceCommandOptions options_;
};

}  // namespace

std::unique_ptr<Command> add_conformance_command(CLI::App& calrt) {
  return std::make_unique<ConformanceCommand>(calrt);
}

}  // namespace runner
