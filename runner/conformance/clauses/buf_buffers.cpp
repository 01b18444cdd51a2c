// BUF: buffers. abi/CONFORMANCE.md#buf-buffers
#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

void buf_exact_name(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const std::string name = ctx.manifest.models.front().name;
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  expect_code(ctx.create_buffer(f, name, CALRT_INPUT, 0), CALRT_OK, "Buffer_Create(" + name + ")");
  for (const std::string& wrong : {name.substr(0, name.size() - 1), name + "_x", upper}) {
    const CallOutcome outcome = ctx.create_buffer(f, wrong, CALRT_INPUT, 0);
    expect_code(outcome, CALRT_NOT_FOUND, "Buffer_Create('" + wrong + "')");
    require(outcome.message.find(name) != std::string::npos, "Buffer_Create('" + wrong +
                                                                 "'): message '" + outcome.message +
                                                                 "' does not list the models");
  }
}

void buf_tensors(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  for (int side = 0; side < 2; ++side) {
    calrt::Buffer& buffer = side == 0 ? f.prefill.input : f.prefill.output;
    for (const calrt::TensorDesc& tensor :
         side == 0 ? f.prefill.desc.inputs : f.prefill.desc.outputs) {
      const calrt::Mapping mapping = buffer.map(tensor.index, kClauseWait);
      expect_equal(mapping.size(), tensor.bytes, "mapped size of " + tensor.name);
      const auto bytes = mapping.bytes();
      require(
          std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; }),
          "tensor " + tensor.name + " of a new buffer is not zero");
    }
  }
  for (const calrt::CsrDesc& csr : f.prefill.desc.csrs) {
    expect_equal(f.prefill.input.csr(csr.index), 0u, "CSR " + csr.name + " of a new buffer");
  }
}

void buf_direction_slot(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const std::string name = ctx.manifest.models.front().name;
  for (const int direction : {0, int{CALRT_DIRECTION_COUNT_}}) {
    expect_code(ctx.create_buffer(f, name, direction, 0), CALRT_INVALID_ARGUMENT,
                fmt::format("Buffer_Create with direction {}", direction));
  }
  expect_code(ctx.create_buffer(f, name, CALRT_INPUT, 1), CALRT_INVALID_ARGUMENT,
              "Buffer_Create with slot 1 in sync mode");
}

}  // namespace

std::vector<Clause> clauses_buf() {
  return {
      {"BUF.1", "BUF", "buffers by exact model name", buf_exact_name},
      {"BUF.2", "BUF", "tensors as described", buf_tensors},
      {"BUF.3", "BUF", "direction and slot checked", buf_direction_slot},
  };
}

}  // namespace runner
