// The setup of `calrt bench`: the calbin read on the host, then the device opened, the
// calbin created and configured, and the prefill/decode models found by exact name with
// the I/O the bench drives (the smoke's own checks, session_expect.cpp). Members are
// declared in creation order so that they are destroyed children first.
#pragma once

#include <stdexcept>
#include <string>

#include "abi/calrt.hpp"
#include "calbin/manifest.hpp"
#include "runner/bench/bench_options.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/core/session.hpp"

namespace runner {

// Bad input found on the host, or options the calbin cannot serve (exit 2). The message
// names the flag, file or field and the value.
class BenchUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BenchSession {
  explicit BenchSession(const BenchOptions& bench_options) : options(bench_options) {}

  const BenchOptions& options;
  calbin::Manifest manifest;
  std::string manifest_sha256;
  DeviceSpec device_spec;
  calrt::Api api;
  calrt::Device device;
  calrt::DeviceStatus device_status;  // right after Device_Create
  calrt::Calbin calbin;
  calrt::CalbinInfo info;
  // Descriptors and tensor/CSR indices; the bench creates its own buffers per slot, so the
  // buffers of these two stay empty.
  ModelIo prefill;
  ModelIo decode;
  calrt::ConfigureResult configured;

  calrt::Timeout timeout() const { return std::chrono::milliseconds(options.timeout_ms); }
  // KV positions one request needs: the prompt plus every decode step's token.
  uint32_t kv_tokens_per_request() const { return options.prompt_len + options.gen_len - 1; }
};

// Host side, before any device step: the --device value, CALBIN/manifest.json (read and
// hashed), whether the prompt and generation fit the calbin's context, and the runtime
// (library loaded, table checked). Throws BenchUsageError.
void load_bench_inputs(BenchSession& session);

// Device side: open the device and the runtime, create and inspect the calbin, select and
// check the models, configure, and check that --concurrency requests fit the KV
// reservation (BenchUsageError if not). Runtime errors are thrown as calrt::Error,
// mismatching model I/O as std::runtime_error.
void open_bench_device(BenchSession& session);

}  // namespace runner
