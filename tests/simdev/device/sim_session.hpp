// Test helpers over the raw C ABI (through calrt_sim_get_api): error capture, a tiny calbin
// and a session that runs prefill/decode steps and reads logits back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "abi/calrt.h"
#include "simdev/runtime/sim_api.h"

namespace simdev::test {

struct ApiError {
  CalrtCode code = CALRT_OK;
  std::string message;
};

const CalrtApi& api();
// Converts (and destroys) an error returned by an entry point.
ApiError take(CalrtError* error);

#define SIM_OK(expr)                                                     \
  do {                                                                   \
    const ::simdev::test::ApiError sim_ok_ = ::simdev::test::take(expr); \
    ASSERT_EQ(sim_ok_.code, CALRT_OK) << sim_ok_.message;                \
  } while (false)

// The device's state hash (the diag extension), asserting success.
uint64_t state_hash(CalrtDevice* device);

// Buffer_SetCsr, asserting success.
void set_csr(CalrtBuffer* buffer, uint32_t index, uint64_t value);

// Path of a tiny functional calbin: $CALRT_TEST_CALBIN (the ctest fixture), else one
// generated once per process under the build directory.
std::filesystem::path tiny_calbin();

// Arg structs with struct_size set to this ABI's size.
template <class Args>
Args make_args(size_t size) {
  Args args{};
  args.struct_size = size;
  return args;
}

struct StepResult {
  ApiError submit;
  CalrtJobState state = CALRT_JOB_SUBMITTED;
  CalrtCode code = CALRT_OK;
  std::string message;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::vector<float> logits;         // logical, widened from BF16
  std::vector<uint16_t> logits_raw;  // the output tensor's bytes as stored
};

// One device with a calbin configured (the tiny one unless `calbin` names another), prefill
// and decode buffers and a KV handle.
class Session {
 public:
  explicit Session(const std::string& config = "", uint32_t kv_tokens = 4608,
                   const std::filesystem::path& calbin = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs one step of model (prefill or decode) with tokens at positions, P = past.
  StepResult step(bool prefill, const std::vector<int32_t>& tokens,
                  const std::vector<int32_t>& positions, uint64_t past, uint64_t cur_override = 0);
  // Prefills a whole prompt in chunks; returns the last step.
  StepResult prefill(const std::vector<int32_t>& prompt, size_t chunk = 256);

  CalrtDevice* device = nullptr;
  CalrtCalbin* calbin = nullptr;
  CalrtKv* kv = nullptr;
  CalrtBuffer* prefill_in = nullptr;
  CalrtBuffer* prefill_out = nullptr;
  CalrtBuffer* decode_in = nullptr;
  CalrtBuffer* decode_out = nullptr;
  std::string prefill_name;
  std::string decode_name;
  uint32_t vocab = 0;
  uint32_t tile_d0 = 0;
  uint64_t configure_ns = 0;
};

}  // namespace simdev::test
