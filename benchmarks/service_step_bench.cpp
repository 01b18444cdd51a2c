// One decode step over the service socket against the same step in process: set the CSRs,
// map/write/unmap the token and position, submit, wait, map/read/unmap the logits, on the
// tiny calbin (virtual clock, so the device's modelled time costs no wall time and the
// difference is the transport: a round trip per call plus the tensors' bytes).
//   BM_DecodeStepInProcess  the simulator linked in (calrt_sim_get_api);
//   BM_DecodeStepSocket     a `simdev serve` daemon started by the benchmark, over its Unix
//                           socket (calrt_client_get_api).
//   BM_DecodeStepSocketBesideFlood
//                           the same, while another session of the same daemon keeps 64
//                           Diag_Report requests (each a full JSON dump of the device)
//                           pipelined without pause: the daemon's fairness. PROTOCOL.md's
//                           bound is 2x BM_DecodeStepSocket.
//   BM_DecodeStepSocketBesideInProcess
//                           the first two interleaved, one step of each per iteration: what
//                           the service adds per step, measured within one run.
//   BM_RoundTripSocket      one Device_Status over the socket.
// Time is wall time per step (the daemon's work is not on this process's CPU clock).
// The calbin comes from $CALRT_BENCH_CALBIN, or is generated into a temporary directory.
#include <benchmark/benchmark.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <cstdlib>
#include <filesystem>
#include <functional>
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
#include "simdev/service/protocol.hpp"

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

// `timed_from` runs just before the timed steps.
void run_steps(benchmark::State& state, const calrt::Api& api,
               const std::function<void()>& timed_from = {}) {
  std::optional<DecodeSession> session;
  try {
    session.emplace(api, calbin_path());
    session->step();  // the first step pays for lazily built state; not timed
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (timed_from) timed_from();
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

// The runtimes under test: the simulator linked in, and the client of the benchmark's
// daemon (started on first use). Both throw when the table is unusable.
calrt::Api sim_api() {
  const CalrtApi* table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  calrt::validate_table(table, CALRT_ABI_MAJOR, "sim (in-process)");
  return calrt::Api(table);
}

calrt::Api client_api() {
  const std::string endpoint = daemon().endpoint();
  const CalrtApi* table = calrt_client_get_api(CALRT_ABI_MAJOR, endpoint.c_str());
  calrt::validate_table(table, CALRT_ABI_MAJOR, "calrt_client " + endpoint);
  return calrt::Api(table);
}

void BM_DecodeStepInProcess(benchmark::State& state) { run_steps(state, sim_api()); }
BENCHMARK(BM_DecodeStepInProcess)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DecodeStepSocket(benchmark::State& state) {
  calrt::Api api;
  try {
    api = client_api();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  run_steps(state, api);
}
BENCHMARK(BM_DecodeStepSocket)->UseRealTime()->Unit(benchmark::kMicrosecond);

double median_us(std::vector<double> samples) {
  if (samples.empty()) return 0;
  auto mid = samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2);
  std::nth_element(samples.begin(), mid, samples.end());
  return *mid;
}

// The two steps above interleaved, one of each per iteration: on a shared machine the load
// moves between two separate benchmarks, and what the service adds is their difference.
// Counters: each step's median (us), the difference and the ratio of the medians.
void BM_DecodeStepSocketBesideInProcess(benchmark::State& state) {
  std::optional<DecodeSession> local, served;
  try {
    local.emplace(sim_api(), calbin_path());
    served.emplace(client_api(), calbin_path());
    local->step();
    served->step();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  using Clock = std::chrono::steady_clock;
  std::vector<double> local_us, served_us;
  for (auto _ : state) {
    try {
      const auto t0 = Clock::now();
      local->step();
      const auto t1 = Clock::now();
      served->step();
      const auto t2 = Clock::now();
      local_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      served_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
  const double in_process = median_us(std::move(local_us));
  const double socket = median_us(std::move(served_us));
  state.counters["in_process_p50_us"] = in_process;
  state.counters["socket_p50_us"] = socket;
  state.counters["added_p50_us"] = socket - in_process;
  state.counters["ratio_p50"] = in_process > 0 ? socket / in_process : 0;
}
BENCHMARK(BM_DecodeStepSocketBesideInProcess)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One round trip and nothing else: Device_Status over the socket, the floor under every call
// a step still sends.
void BM_RoundTripSocket(benchmark::State& state) {
  try {
    calrt::Device device = calrt::Device::create(client_api(), calrt::DeviceKind::sim);
    for (auto _ : state) benchmark::DoNotOptimize(device.status());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(BM_RoundTripSocket)->UseRealTime()->Unit(benchmark::kMicrosecond);

namespace svc = simdev::service;

// A session that floods the daemon: raw frames over its own connection, `depth` Diag_Report
// requests in flight at all times, until stop() (bounded: every read waits at most 10 s).
class Flooder {
 public:
  Flooder(const std::filesystem::path& socket_path, size_t depth) : depth_(depth) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("flooder: cannot connect to " + socket_path.string());
    }
    svc::Hello hello;
    hello.client_name = "flooder";
    send_frame(svc::MessageType::hello, 0, svc::encode_payload(hello));
    expect(svc::MessageType::welcome);
    svc::DeviceCreate::In create;
    create.kind = CALRT_DEVICE_SIM;
    send_frame(svc::MessageType::request, 1,
               svc::encode_request_payload<svc::DeviceCreate>(create));
    const std::vector<uint8_t> created = expect(svc::MessageType::response);
    auto decoded = svc::decode_response_payload<svc::DeviceCreate>(created);
    if (!decoded || decoded->code != CALRT_OK) throw std::runtime_error("flooder: no device");
    report_.device = decoded->out.device;
    report_.capacity = uint64_t{1} << 20;
    thread_ = std::thread([this] { run(); });
  }
  ~Flooder() {
    stop();
    ::close(fd_);
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t answered() const { return answered_; }

 private:
  void send_frame(svc::MessageType type, uint32_t id, const std::vector<uint8_t>& payload) {
    const std::vector<uint8_t> frame = svc::encode_frame(type, id, payload);
    size_t sent = 0;
    while (sent < frame.size()) {
      const ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("flooder: send failed");
      sent += static_cast<size_t>(n);
    }
  }
  void read_exact(uint8_t* data, size_t n) {
    size_t got = 0;
    while (got < n) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 10000) != 1) throw std::runtime_error("flooder: no answer in 10 s");
      const ssize_t r = ::recv(fd_, data + got, n - got, 0);
      if (r <= 0) throw std::runtime_error("flooder: connection closed");
      got += static_cast<size_t>(r);
    }
  }
  // The payload of the next frame other than a keepalive, which must be of `type`.
  std::vector<uint8_t> expect(svc::MessageType type) {
    while (true) {
      uint8_t header[svc::kHeaderBytes];
      read_exact(header, sizeof header);
      auto decoded = svc::decode_header(header);
      if (!decoded) throw std::runtime_error("flooder: " + decoded.error());
      std::vector<uint8_t> payload(decoded->payload_bytes());
      read_exact(payload.data(), payload.size());
      if (decoded->type == svc::MessageType::keepalive) continue;
      if (decoded->type != type) throw std::runtime_error("flooder: unexpected frame");
      return payload;
    }
  }
  void run() {
    try {
      uint32_t id = 2;
      for (size_t i = 0; i < depth_; ++i) {
        send_frame(svc::MessageType::request, id++,
                   svc::encode_request_payload<svc::DiagReport>(report_));
      }
      while (!stop_) {
        expect(svc::MessageType::response);
        ++answered_;
        send_frame(svc::MessageType::request, id++,
                   svc::encode_request_payload<svc::DiagReport>(report_));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
  }

  int fd_ = -1;
  size_t depth_;
  svc::DiagReport::In report_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> answered_{0};
};

void BM_DecodeStepSocketBesideFlood(benchmark::State& state) {
  calrt::Api api;
  std::unique_ptr<Flooder> flooder;
  try {
    api = client_api();
    flooder = std::make_unique<Flooder>(daemon().socket(), 64);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  uint64_t answered_before = 0;
  run_steps(state, api, [&] { answered_before = flooder->answered(); });
  const uint64_t answered = flooder->answered() - answered_before;
  flooder->stop();
  // The flooding session's share of the daemon: its answers per step of the other session.
  state.counters["flood_per_step"] =
      static_cast<double>(answered) / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
}
BENCHMARK(BM_DecodeStepSocketBesideFlood)->UseRealTime()->Unit(benchmark::kMicrosecond);

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
