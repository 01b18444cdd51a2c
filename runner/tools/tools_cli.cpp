#include "runner/tools/tools_cli.hpp"

#include <cstdio>
#include <limits>
#include <map>

#include "calbin/manifest.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/tools/check.hpp"
#include "runner/tools/devices.hpp"
#include "runner/tools/info.hpp"
#include "runner/tools/inspect.hpp"
#include "runner/tools/merge.hpp"
#include "runner/tools/plan.hpp"
#include "runner/tools/replay.hpp"
#include "runner/tools/reset.hpp"

namespace runner {
namespace {

class DevicesCommand : public Command {
 public:
  explicit DevicesCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "devices", "list the devices a runtime can open (probed: PCIe index 0, 1, ...; sim)")) {
    app_->add_option("--device", options_.device,
                     "the runtime: sim (the simulator in process), a runtime library path, or "
                     "unix:SOCKET / tcp:HOST:PORT (a `simdev serve` daemon)")
        ->capture_default_str();
    app_->add_option("--device-config", options_.device_config,
                     "runtime option string for every Device_Create");
    app_->add_option("--max-index", options_.max_index, "PCIe indices probed at most")
        ->check(CLI::Range(1u, 256u))
        ->capture_default_str();
    app_->add_option("--json", options_.json,
                     "write the JSON report (calrt-devices/1) to this file")
        ->check(output_path());
    app_->footer(
        "The ABI has no enumeration call: each kind is opened at index 0, 1, ... until the "
        "runtime answers NOT_FOUND. Exit codes: 0 a device was found and every one answered; 1 "
        "none found, or one failed to open or answer; 2 bad input (a runtime that cannot be "
        "loaded, an unwritable report).");
  }
  int run(int /*argc*/, char** /*argv*/) override { return run_devices(options_); }

 private:
  DevicesOptions options_;
};

class MergeCommand : public Command {
 public:
  explicit MergeCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "merge", "join the --jsonl outputs of a run split with --shard I/N into one")) {
    app_->add_option("SHARD", options_.shards, "every shard's --jsonl file, in any order")
        ->required();
    app_->add_option("--out", options_.out, "where the merged --jsonl goes (- for stdout)")
        ->check(output_path())
        ->capture_default_str();
    app_->footer(
        "Records come out in the order an unsharded run writes them, then one summary: counts "
        "summed, the worst result, the command line without --shard. Exit codes: 0 the run "
        "passed; 1 it failed; 2 bad input (a shard missing, twice, cut short or of another "
        "run) or a run that had bad input.");
  }
  int run(int /*argc*/, char** /*argv*/) override { return run_merge(options_); }

 private:
  MergeOptions options_;
};

class InfoCommand : public Command {
 public:
  explicit InfoCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand("info", "device status and every chip's status")) {
    add_device_options(*app_, {&options_.device, &options_.device_kind, &options_.device_index,
                               &options_.device_config});
    app_->add_option("--json", options_.json, "write the JSON report to this file")
        ->check(output_path());
    app_->footer(kDeviceExitCodes);
  }
  int run(int /*argc*/, char** /*argv*/) override { return run_info(options_); }

 private:
  InfoOptions options_;
};

class ResetCommand : public Command {
 public:
  explicit ResetCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "reset", "reset the device at a level (Device_Reset), then show its status")) {
    InfoOptions& device = options_.device;
    add_device_options(
        *app_, {&device.device, &device.device_kind, &device.device_index, &device.device_config});
    app_->add_option("--level", level_,
                     "job-abort (the running job), cores, chip or full (every chip, every "
                     "calbin unloaded)")
        ->required()
        ->check(CLI::IsMember({"job-abort", "cores", "chip", "full"}));
    app_->add_option("--json", device.json, "write the JSON report to this file")
        ->check(output_path());
    app_->footer(kDeviceExitCodes);
  }
  int run(int /*argc*/, char** /*argv*/) override {
    for (const calrt::ResetLevel level : {calrt::ResetLevel::job_abort, calrt::ResetLevel::cores,
                                          calrt::ResetLevel::chip, calrt::ResetLevel::full}) {
      if (level_ == reset_level_name(level)) options_.level = level;
    }
    return run_reset(options_);
  }

 private:
  ResetOptions options_;
  std::string level_;
};

class CheckCommand : public Command {
 public:
  explicit CheckCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "check", "stage 8 static acceptance of a calbin, device-free: every blocking item")) {
    CLI::App& app = *app_;
    CheckCommandOptions& o = options_;
    app.add_option("CALBIN", o.calbin, "calbin directory");
    app.add_option("--manifest", o.service_manifest,
                   "service manifest (YAML) the calbin must agree with");
    app.add_option("--json", o.json, "write the JSON report to this file (atomically)")
        ->check(output_path());
    app.add_option("--usable-gib", o.usable_gib_per_chip,
                   "physical usable memory per chip for the capacity inequality")
        ->check(finite_range(1.0 / 1024, 1024.0 * 1024))
        ->capture_default_str();
    app.add_flag("--list", o.list, "list every check and exit");
    app.footer("Exit codes: 0 no check failed; 1 a check failed; 2 usage, or no calbin directory.");
  }
  int run(int /*argc*/, char** /*argv*/) override {
    if (options_.calbin.empty() && !options_.list) {
      std::fprintf(stderr, "calrt check: CALBIN is required\n");
      return kExitUsage;
    }
    return run_check(options_);
  }

 private:
  CheckCommandOptions options_;
};

class InspectCommand : public Command {
 public:
  explicit InspectCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "inspect", "what a calbin holds: models, tensors, CSRs, op inventory, memory map")) {
    app_->add_option("CALBIN", options_.calbin, "calbin directory")->required();
    app_->add_option("--json", options_.json, "write the JSON report to this file (atomically)")
        ->check(output_path());
    app_->add_option("--usable-gib", options_.usable_gib_per_chip,
                     "usable memory per chip for the map")
        ->check(finite_range(1.0 / 1024, 1024.0 * 1024))
        ->capture_default_str();
  }
  int run(int /*argc*/, char** /*argv*/) override { return run_inspect(options_); }

 private:
  InspectOptions options_;
};

class PlanCommand : public Command {
 public:
  explicit PlanCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "plan",
            "capacity plan: KV bytes, the per-chip inequality, largest context and batch")) {
    CLI::App& app = *app_;
    PlanOptions& o = options_;
    app.add_option("CALBIN", o.calbin, "calbin directory (optional: flags alone also work)");
    // The manifest holds each of these in 32 bits and none may be zero: a zero geometry needs
    // no KV bytes and would "fit" on any card, a 2^32 context would wrap to zero.
    const auto shape = CLI::Range(uint64_t{1}, uint64_t{std::numeric_limits<uint32_t>::max()});
    given_["layers"] = app.add_option("--layers", layers_, "transformer layers")->check(shape);
    given_["kv_heads"] = app.add_option("--kv-heads", kv_heads_, "KV heads")->check(shape);
    given_["head_dim"] = app.add_option("--head-dim", head_dim_, "head dimension")->check(shape);
    given_["context"] =
        app.add_option("--context", context_, "context length (tokens)")->check(shape);
    given_["batch"] = app.add_option("--batch", batch_, "batch size")->check(shape);
    given_["chips"] = app.add_option("--chips", chips_, "chips the KV heads are split over")
                          ->check(CLI::Range(uint32_t{1}, calbin::kMaxChips));
    given_["k_dtype"] = app.add_option("--k-dtype", k_dtype_, "K cache dtype (bf16, int8, ...)");
    given_["v_dtype"] = app.add_option("--v-dtype", v_dtype_, "V cache dtype (bf16, int8, ...)");
    app.add_option("--params-gib", o.params_gib_per_chip, "parameters per chip (flags only)")
        ->check(finite_range(0.0, 1024.0 * 1024));
    app.add_option("--workspace-mib", o.workspace_mib, "peak workspace per chip (flags only)")
        ->check(finite_range(0.0, 1024.0 * 1024 * 1024));
    app.add_option("--io-mib", o.io_mib, "I/O and command buffers per chip (flags only)")
        ->check(finite_range(0.0, 1024.0 * 1024 * 1024));
    app.add_option("--guard-mib", o.guard_mib, "allocator guard per chip (flags only)")
        ->check(finite_range(0.0, 1024.0 * 1024 * 1024));
    app.add_option("--usable-gib", o.usable_gib_per_chip, "physical usable memory per chip")
        ->check(finite_range(1.0 / 1024, 1024.0 * 1024))
        ->capture_default_str();
    app.add_option("--json", o.json, "write the JSON report to this file (atomically)")
        ->check(output_path());
    app.footer("Exit codes: 0 it fits on every chip; 1 it does not; 2 usage or bad input.");
  }

  // Geometry flags are optional overrides: their values only count when given. Flags-only
  // mode needs the whole geometry.
  int run(int /*argc*/, char** /*argv*/) override {
    PlanOptions& o = options_;
    auto set = [&](const char* key, auto value, auto& target) {
      if (given_.at(key)->count() > 0) target = value;
    };
    set("layers", layers_, o.layers);
    set("kv_heads", kv_heads_, o.kv_heads);
    set("head_dim", head_dim_, o.head_dim);
    set("context", context_, o.context);
    set("batch", batch_, o.batch);
    set("chips", chips_, o.chips);
    set("k_dtype", k_dtype_, o.k_dtype);
    set("v_dtype", v_dtype_, o.v_dtype);
    if (o.calbin.empty() && (!o.layers || !o.kv_heads || !o.head_dim || !o.context)) {
      std::fprintf(stderr,
                   "calrt plan: without a CALBIN, --layers, --kv-heads, --head-dim and "
                   "--context are required\n");
      return kExitUsage;
    }
    return run_plan(o);
  }

 private:
  PlanOptions options_;
  uint64_t layers_ = 0, kv_heads_ = 0, head_dim_ = 0, context_ = 0, batch_ = 0;
  uint32_t chips_ = 0;
  std::string k_dtype_, v_dtype_;
  std::map<std::string, CLI::Option*> given_;
};

class ReplayCommand : public Command {
 public:
  explicit ReplayCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "replay",
            "re-issue a call recording (--record, calrt-calls/1) against a runtime and compare "
            "every result with the recording")) {
    CLI::App& app = *app_;
    app.add_option("FILE", options_.file, "the recording (JSON Lines)")->required();
    app.add_option("--device", options_.device,
                   "sim (the simulator in process), a runtime library path, or unix:SOCKET / "
                   "tcp:HOST:PORT (a `simdev serve` daemon)")
        ->capture_default_str();
    app.add_option("--calbin", options_.calbin,
                   "load this calbin instead of the recorded Calbin_Create paths");
    app.add_option("--json", options_.json, "write the JSON report to this file")
        ->check(output_path());
    app.footer(
        "Exit codes: 0 every call answered as recorded; 1 divergences (one line each); 2 a "
        "bad recording (file, line and field named) or a runtime that cannot be loaded.");
  }
  int run(int /*argc*/, char** /*argv*/) override { return run_replay(options_); }

 private:
  ReplayOptions options_;
};

}  // namespace

std::unique_ptr<Command> add_devices_command(CLI::App& calrt) {
  return std::make_unique<DevicesCommand>(calrt);
}

std::unique_ptr<Command> add_merge_command(CLI::App& calrt) {
  return std::make_unique<MergeCommand>(calrt);
}

std::unique_ptr<Command> add_info_command(CLI::App& calrt) {
  return std::make_unique<InfoCommand>(calrt);
}
std::unique_ptr<Command> add_reset_command(CLI::App& calrt) {
  return std::make_unique<ResetCommand>(calrt);
}
std::unique_ptr<Command> add_check_command(CLI::App& calrt) {
  return std::make_unique<CheckCommand>(calrt);
}
std::unique_ptr<Command> add_inspect_command(CLI::App& calrt) {
  return std::make_unique<InspectCommand>(calrt);
}
std::unique_ptr<Command> add_plan_command(CLI::App& calrt) {
  return std::make_unique<PlanCommand>(calrt);
}
std::unique_ptr<Command> add_replay_command(CLI::App& calrt) {
  return std::make_unique<ReplayCommand>(calrt);
}

}  // namespace runner
