// One decode step over the service socket against the same step in process: set the CSRs,
// map/write/unmap the token and position, submit, wait, map/read/unmap the logits, on the
// tiny calbin (virtual clock, so the device's modelled time costs no wall time and the
// difference is the transport: a round trip per call plus the tensors' bytes).
//   BM_DecodeStepInProcess  the simulator linked in (calrt_sim_get_api);
//   BM_DecodeStepSocket     a `simdev serve` daemon started by the benchmark, over its Unix
//                           socket (calrt_client_get_api).
// Time is wall time per step (the daemon's work is not on this process's CPU clock).
// The calbin comes from $CALRT_BENCH_CALBIN, or is generated into a temporary directory.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "abi/calrt_loader.hpp"
#include "benchmarks/checked_main.hpp"
#include "daemon_process.hpp"
#include "runner/core/tensor_io.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/runtime/sim_api.h"
#include "simdev/service/client/client_api.h"

namespace {

std::filesystem::path g_scratch;

std::filesystem::path scratch_dir() {
  if (g_scratch.empty()) {
    g_scratch = std::filesystem::temp_directory_path() /
                ("calrt-service-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(g_scratch);
  }
  return g_scratch;
}

std::filesystem::path calbin_path() {
  if (const char* path = std::getenv("CALRT_BENCH_CALBIN"); path != nullptr && *path != '\0') {
    return path;
  }
  simdev::gen::GenOptions options;
  options.preset = "tiny";
  options.out_dir = scratch_dir() / "tiny";
  if (std::filesystem::exists(options.out_dir / "manifest.json")) {
    return options.out_dir;
  }
  options.with_golden = false;
  options.long_cases = false;
  options.force = true;
  if (auto made = simdev::gen::generate(options); !made) {
    throw std::runtime_error("generating the tiny calbin failed: " + made.error().to_string());
  }
  return options.out_dir;
}

// The daemon, started on first use and kept for the whole run.
calrt_test::DaemonProcess& daemon() {
  static calrt_test::DaemonProcess process(scratch_dir() / "daemon");
  return process;
}

const calrt::TensorDesc& tensor(const calrt::ModelDesc& model, calrt::Direction direction,
                                calrt::TensorRole role) {
  const calrt::TensorDesc* desc = model.find_tensor(direction, role);
  if (desc == nullptr) {
    throw std::runtime_error("decode model " + model.name + " lacks a tensor of role " +
                             calrt::to_string(role));
  }
  return *desc;
}

uint32_t csr_index(const calrt::ModelDesc& model, const char* name) {
  const calrt::CsrDesc* csr = model.find_csr(name);
  if (csr == nullptr) throw std::runtime_error("decode model " + model.name + " has no " + name);
  return csr->index;
}

// The decode model configured with its buffers and a KV of the whole context, declared
// parent first so that members are destroyed children first.
struct DecodeSession {
  calrt::Device device;
  calrt::Calbin calbin;
  calrt::ModelDesc model;
  calrt::Buffer input;
  calrt::Buffer output;
  calrt::Kv kv;
  uint32_t capacity = 0;
  uint32_t filled = 0;
  std::vector<float> logits;

  DecodeSession(const calrt::Api& api, const std::filesystem::path& path) {
    device = calrt::Device::create(api, calrt::DeviceKind::sim);
    calbin = calrt::Calbin::create(device, path);
    calbin.configure();
    for (calrt::ModelDesc& m : calbin.models()) {
      if (m.type == calrt::ModelType::decode) model = std::move(m);
    }
    if (model.name.empty()) throw std::runtime_error(path.string() + " has no decode model");
    input = calrt::Buffer::create(calbin, model.name, calrt::Direction::input);
    output = calrt::Buffer::create(calbin, model.name, calrt::Direction::output);
    capacity = calbin.info().context;
    kv = calrt::Kv::allocate(calbin, capacity);
    kv.apply(input);
  }

  // One teacher-forced-style step at the KV's fill level; starts the sequence over when the
  // KV is full (once in thousands of steps).
  void step() {
    if (filled == capacity) {
      kv.clear();
      filled = 0;
    }
    const auto& token = tensor(model, calrt::Direction::input, calrt::TensorRole::token);
    const auto& position = tensor(model, calrt::Direction::input, calrt::TensorRole::position);
    const auto& out = tensor(model, calrt::Direction::output, calrt::TensorRole::logits);
    input.set_csr(csr_index(model, "cur_seq_len"), 1);
    input.set_csr(csr_index(model, "past_kv_cur_seq_len"), filled);
    {
      calrt::Mapping map = input.map(token.index);
      const int32_t value[] = {static_cast<int32_t>(filled % 97 + 1)};
      runner::write_row_i32(map.bytes(), token, value);
    }
    {
      calrt::Mapping map = input.map(position.index);
      const int32_t value[] = {static_cast<int32_t>(filled)};
      runner::write_row_i32(map.bytes(), position, value);
    }
    calrt::Job job = calrt::Job::submit(calbin, model.name, input, output);
    if (job.wait(std::chrono::seconds(30)) != calrt::WaitResult::ready ||
        job.status().state != calrt::JobState::completed) {
      throw std::runtime_error("decode job did not complete");
    }
    {
      const calrt::Mapping map = output.map(out.index);
      logits.resize(physical_cols(out));
      runner::read_row_f32_into(map.bytes(), out, 0, logits);
    }
    ++filled;
  }

  static size_t physical_cols(const calrt::TensorDesc& desc) {
    return runner::physical_shape(desc).cols;
  }
};

void run_steps(benchmark::State& state, const calrt::Api& api) {
  std::optional<DecodeSession> session;
  try {
    session.emplace(api, calbin_path());
    session->step();  // the first step pays for lazily built state; not timed
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    try {
      session->step();
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      break;
    }
  }
  state.counters["us_per_step"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_DecodeStepInProcess(benchmark::State& state) {
  const CalrtApi* table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  calrt::validate_table(table, CALRT_ABI_MAJOR, "sim (in-process)");
  run_steps(state, calrt::Api(table));
}
BENCHMARK(BM_DecodeStepInProcess)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DecodeStepSocket(benchmark::State& state) {
  std::string endpoint;
  try {
    endpoint = daemon().endpoint();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const CalrtApi* table = calrt_client_get_api(CALRT_ABI_MAJOR, endpoint.c_str());
  calrt::validate_table(table, CALRT_ABI_MAJOR, "calrt_client " + endpoint);
  run_steps(state, calrt::Api(table));
}
BENCHMARK(BM_DecodeStepSocket)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  const size_t failed = calrt_bench::run_benchmarks_checked();
  benchmark::Shutdown();
  if (!g_scratch.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(g_scratch, ignored);
  }
  return failed == 0 ? 0 : 1;
}
