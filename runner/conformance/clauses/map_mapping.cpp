// MAP: map and unmap. abi/CONFORMANCE.md#map-map-and-unmap
#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

CallOutcome map_tensor(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index,
                       void** data = nullptr) {
  auto args = args_of<Calrt_Buffer_Map_Args>();
  args.buffer = buffer;
  args.tensor_index = index;
  args.timeout_ns = kClauseWaitNs;
  const CallOutcome outcome = CONF_CALL(ctx, Buffer_Map, args);
  if (data != nullptr) {
    *data = args.data;
  }
  return outcome;
}

CallOutcome unmap_tensor(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index) {
  auto args = args_of<Calrt_Buffer_Unmap_Args>();
  args.buffer = buffer;
  args.tensor_index = index;
  return CONF_CALL(ctx, Buffer_Unmap, args);
}

void map_persists(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  const uint32_t index = f.prefill.token_input;
  {
    const calrt::Mapping mapping = f.prefill.input.map(index, kClauseWait);
    auto bytes = mapping.bytes();
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<std::byte>((i * 7 + 3) & 0x7f);
    }
  }
  const calrt::Mapping mapping = f.prefill.input.map(index, kClauseWait);
  const auto bytes = mapping.bytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    require(bytes[i] == static_cast<std::byte>((i * 7 + 3) & 0x7f),
            fmt::format("byte {} of the token tensor changed between unmap and map", i));
  }
}

void map_twice(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  const calrt::Mapping first = f.prefill.input.map(0, kClauseWait);
  expect_code(map_tensor(ctx, f.prefill.input.get(), 0), CALRT_BUSY, "a second Buffer_Map");
}

void map_unmap_rules(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  CalrtBuffer* buffer = f.prefill.input.get();
  expect_code(unmap_tensor(ctx, buffer, 0), CALRT_WRONG_STATE,
              "Buffer_Unmap of an unmapped tensor");
  expect_code(map_tensor(ctx, buffer, 0), CALRT_OK, "Buffer_Map");
  expect_code(unmap_tensor(ctx, buffer, 0), CALRT_OK, "Buffer_Unmap");
  expect_code(unmap_tensor(ctx, buffer, 0), CALRT_WRONG_STATE, "a second Buffer_Unmap");
  const auto count = static_cast<uint32_t>(f.prefill.desc.inputs.size());
  expect_code(map_tensor(ctx, buffer, count), CALRT_OUT_OF_RANGE, "Buffer_Map(tensor count)");
  expect_code(unmap_tensor(ctx, buffer, count), CALRT_OUT_OF_RANGE, "Buffer_Unmap(tensor count)");
}

CallOutcome destroy_buffer(ClauseContext& ctx, CalrtBuffer* buffer) {
  auto args = args_of<Calrt_Buffer_Destroy_Args>();
  args.buffer = buffer;
  return CONF_CALL(ctx, Buffer_Destroy, args);
}

void map_in_flight(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit_held(f, f.prefill);
  CalrtBuffer* input = f.prefill.input.get();
  CalrtBuffer* output = f.prefill.output.get();
  const CallOutcome mapped = map_tensor(ctx, input, 0);
  expect_code(mapped, CALRT_BUSY, "Buffer_Map of an in-flight job's input");
  require(mapped.message.find("job") != std::string::npos,
          "Buffer_Map BUSY message '" + mapped.message + "' does not name the job");
  expect_code(map_tensor(ctx, output, 0), CALRT_BUSY, "Buffer_Map of an in-flight job's output");
  expect_code(set_csr(ctx, input, 0, 1), CALRT_BUSY, "Buffer_SetCsr of an in-flight job's input");
  uint64_t value = 0;
  expect_code(get_csr(ctx, input, f.prefill.cur_seq_len_csr, &value), CALRT_OK,
              "Buffer_GetCsr of an in-flight job's input");
  expect_equal(value, kJobTokens, "cur_seq_len read while in flight");
  expect_code(destroy_buffer(ctx, input), CALRT_BUSY, "Buffer_Destroy of an in-flight job's input");
  expect_code(destroy_buffer(ctx, output), CALRT_BUSY,
              "Buffer_Destroy of an in-flight job's output");
  require(!job.status().is_final(), "the held job became final during the checks");
  job.cancel();
  job.wait(kClauseWait);
  expect_code(map_tensor(ctx, input, 0), CALRT_OK, "Buffer_Map after the job is final");
  expect_code(unmap_tensor(ctx, input, 0), CALRT_OK, "Buffer_Unmap");
  expect_code(set_csr(ctx, input, 0, 1), CALRT_OK, "Buffer_SetCsr after the job is final");
}

void map_then_submit(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  for (int side = 0; side < 2; ++side) {
    calrt::Buffer& buffer = side == 0 ? f.prefill.input : f.prefill.output;
    const calrt::Mapping mapping = buffer.map(0, kClauseWait);
    expect_code(ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get()),
                CALRT_BUSY,
                std::string("Job_Submit with a mapped ") + (side == 0 ? "input" : "output"));
  }
}

}  // namespace

std::vector<Clause> clauses_map() {
  return {
      {"MAP.1", "MAP", "mapped data persists", map_persists},
      {"MAP.2", "MAP", "one mapping at a time", map_twice},
      {"MAP.3", "MAP", "unmap and index rules", map_unmap_rules},
      {"MAP.4", "MAP", "no map while a job owns the buffer", map_in_flight},
      {"MAP.5", "MAP", "no submit with a mapped tensor", map_then_submit},
  };
}

}  // namespace runner
