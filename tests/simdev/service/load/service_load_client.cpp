// A client process for the killed-client tests: connects to the daemon at ENDPOINT, loads
// and configures CALBIN, allocates a KV of the whole context and then prefills it chunk by
// chunk (past_kv_cur_seq_len following the fill), starting over after Kv_Clear, until it is
// killed. Before each Job_Wait it prints "inflight N" so that the test can SIGKILL it while
// a job is on the device and a KV, buffers and a configured calbin are held.
//   service_load_client ENDPOINT CALBIN
// It dies with its parent (PR_SET_PDEATHSIG) and gives up after kMaxLifetime on its own, so
// a crashed test leaves no client behind. Exit 0 only at that bound; 1 on any error.
#include <sys/prctl.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <numeric>
#include <vector>

#include "abi/calrt.hpp"
#include "load_support.hpp"
#include "runner/core/session.hpp"
#include "runner/core/submission_inputs.hpp"

namespace {

constexpr auto kMaxLifetime = std::chrono::seconds(60);

int run(const std::string& endpoint, const std::string& calbin_path) {
  runner::SmokeOptions options;
  options.calbin = calbin_path;
  runner::Session session(options);
  session.api = calrt_load::client_api(endpoint);
  session.device =
      calrt::Device::create(session.api, calrt::DeviceKind::sim, 0, {}, session.timeout());
  session.calbin = calrt::Calbin::create(session.device, options.calbin, session.timeout());
  session.info = session.calbin.info();
  runner::StepResult step;
  for (const calrt::ModelDesc& model : session.calbin.models()) {
    runner::ModelIo& io =
        model.type == calrt::ModelType::prefill ? session.prefill : session.decode;
    io.desc = model;
    runner::check_model_io(session.info, io, model.type, step);
  }
  session.calbin.configure(session.timeout());
  runner::create_model_buffers(session, step);
  if (!step.passed()) {
    for (const auto& failure : step.failures) std::fprintf(stderr, "%s\n", failure.c_str());
    return 1;
  }
  const uint32_t chunk = session.info.prefill_chunk;
  const uint32_t chunks = session.info.context / chunk;
  calrt::Kv kv = calrt::Kv::allocate(session.calbin, chunks * chunk);
  kv.apply(session.prefill.input);
  std::vector<int32_t> tokens(chunk);
  std::iota(tokens.begin(), tokens.end(), 1);
  for (auto& token : tokens) token %= static_cast<int32_t>(session.info.vocab);

  const auto deadline = calrt_load::Clock::now() + kMaxLifetime;
  uint64_t submitted = 0;
  while (calrt_load::Clock::now() < deadline) {
    kv.clear();
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint64_t past = static_cast<uint64_t>(c) * chunk;
      runner::write_submission(session.prefill, tokens, static_cast<int32_t>(past), past,
                               session.timeout());
      calrt::Job job = calrt::Job::submit(session.calbin, session.prefill.name(),
                                          session.prefill.input, session.prefill.output);
      std::printf("inflight %llu\n", static_cast<unsigned long long>(++submitted));
      std::fflush(stdout);
      if (job.wait(session.timeout()) != calrt::WaitResult::ready ||
          job.status().state != calrt::JobState::completed) {
        std::fprintf(stderr, "job %llu did not complete\n",
                     static_cast<unsigned long long>(submitted));
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;  // the parent died before prctl took effect
  if (argc != 3) {
    std::fprintf(stderr, "usage: service_load_client ENDPOINT CALBIN\n");
    return 1;
  }
  try {
    return run(argv[1], argv[2]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "service_load_client: %s\n", error.what());
    return 1;
  }
}
