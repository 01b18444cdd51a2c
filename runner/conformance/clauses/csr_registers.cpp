// CSR: control/status registers. abi/CONFORMANCE.md#csr-controlstatus-registers
#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

void csr_roundtrip(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  calrt::Buffer other = calrt::Buffer::create(f.calbin, f.prefill.name(), calrt::Direction::input);
  for (const calrt::CsrDesc& csr : f.prefill.desc.csrs) {
    for (const uint64_t value : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40, ~uint64_t{0}}) {
      f.prefill.input.set_csr(csr.index, value);
      expect_equal(f.prefill.input.csr(csr.index), value, "CSR " + csr.name + " read back");
      expect_equal(other.csr(csr.index), 0u, "CSR " + csr.name + " of another buffer");
    }
  }
}

void csr_range(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::buffers);
  const auto count = static_cast<uint32_t>(f.prefill.desc.csrs.size());
  expect_code(set_csr(ctx, f.prefill.input.get(), count, 1), CALRT_OUT_OF_RANGE,
              "Buffer_SetCsr(csr_count)");
  uint64_t value = 0;
  expect_code(get_csr(ctx, f.prefill.input.get(), count, &value), CALRT_OUT_OF_RANGE,
              "Buffer_GetCsr(csr_count)");
}

void csr_output(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::buffers);
  expect_code(set_csr(ctx, f.prefill.output.get(), 0, 1), CALRT_INVALID_ARGUMENT,
              "Buffer_SetCsr of an output buffer");
  uint64_t value = 0;
  expect_code(get_csr(ctx, f.prefill.output.get(), 0, &value), CALRT_INVALID_ARGUMENT,
              "Buffer_GetCsr of an output buffer");
}

}  // namespace

std::vector<Clause> clauses_csr() {
  return {
      {"CSR.1", "CSR", "set and get exactly", csr_roundtrip},
      {"CSR.2", "CSR", "CSR index out of range", csr_range},
      {"CSR.3", "CSR", "output buffers have no CSRs", csr_output},
  };
}

}  // namespace runner
