// PAR: parallel mode, ping and pong. abi/CONFORMANCE.md#par-parallel-mode-ping-and-pong
#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>
#include "abi/calrt_ext.hpp"

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

void par_mode(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  f.device.set_parallel_mode(true);
  require(f.device.status().parallel_mode, "Device_Status: parallel_mode 0 after enabling it");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 0), CALRT_OK,
              "Buffer_Create slot 0 in parallel mode");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 1), CALRT_OK,
              "Buffer_Create slot 1 in parallel mode");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 2), CALRT_INVALID_ARGUMENT,
              "Buffer_Create slot 2 in parallel mode");
  f.device.set_parallel_mode(false);
  require(!f.device.status().parallel_mode, "Device_Status: parallel_mode 1 after disabling it");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 1), CALRT_INVALID_ARGUMENT,
              "Buffer_Create slot 1 after leaving parallel mode");
}

// A prefill model's buffers on `slot` with their own KV and the clause inputs.
struct SlotIo {
  ModelIo io;
  calrt::Kv kv;
};

SlotIo slot_io(ClauseContext& ctx, const Fixture& f, uint32_t slot) {
  SlotIo out{ctx.model_io(f, calrt::ModelType::prefill, slot), {}};
  out.kv = ctx.apply_kv(f, out.io);
  ctx.write_inputs(out.io, kJobTokens);
  return out;
}

void par_one_job_per_slot(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  f.device.set_parallel_mode(true);
  SlotIo ping = slot_io(ctx, f, 0);
  SlotIo pong = slot_io(ctx, f, 1);
  SlotIo third = slot_io(ctx, f, 0);
  const bool held = ctx.has_fault();
  if (held) {
    // Both computes slowed a millionfold: in flight whatever the device's clock does.
    const std::string slow =
        "  - kind: slow_completion\n    during: prefill\n    factor: 1000000\n    at_op: ";
    ctx.set_plan(f.device, "seed: 1\nfaults:\n" + slow + "1\n" + slow + "2\n");
  }
  calrt::Job a = ctx.submit(f, ping.io);
  calrt::Job b = ctx.submit(f, pong.io);
  const auto in_flight = [&] { return !a.status().is_final() && !b.status().is_final(); };
  // On a device whose clock runs on its own (paced, hardware) a job can end between the
  // check and the call; a success is only a failure when both jobs were still in flight
  // after it.
  const auto expect_refused = [&](const CallOutcome& outcome, CalrtCode code,
                                  const std::string& what) {
    if (outcome.code != code && !in_flight()) {
      throw ClauseSkip("a slot's job ended during the check of: " + what);
    }
    expect_code(outcome, code, what);
  };
  const bool both_in_flight = in_flight();
  if (both_in_flight) {
    expect_refused(ctx.submit_raw(f, third.io.name(), third.io.input.get(), third.io.output.get()),
                   CALRT_BUSY, "a third Job_Submit while ping and pong are in flight");
    auto mode = args_of<Calrt_Device_SetParallelMode_Args>();
    mode.device = f.device.get();
    mode.enable = 0;
    expect_refused(CONF_CALL(ctx, Device_SetParallelMode, mode), CALRT_WRONG_STATE,
                   "Device_SetParallelMode while jobs are in flight");
  }
  if (held) {
    a.cancel();
    b.cancel();
    ctx.set_plan(f.device, "");
    a = ctx.submit(f, ping.io);
    b = ctx.submit(f, pong.io);
  }
  for (calrt::Job* job : {&a, &b}) {
    expect_final(*job, calrt::JobState::completed, "a slot's job");
  }
  if (!both_in_flight) {
    throw ClauseSkip("the jobs were final right after submission: the slot limit is unchecked");
  }
}

std::vector<std::byte> run_and_read(ClauseContext& ctx, const Fixture& f, ModelIo& io) {
  calrt::Job job = ctx.submit(f, io);
  expect_final(job, calrt::JobState::completed, "the job run alone");
  const calrt::Mapping mapping = io.output.map(io.logits_output, kClauseWait);
  return {mapping.bytes().begin(), mapping.bytes().end()};
}

void par_no_crosstalk(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  const std::vector<std::byte> alone = run_and_read(ctx, f, f.prefill);
  f.kv.free();
  f.prefill.input.destroy();
  f.prefill.output.destroy();
  f.device.set_parallel_mode(true);
  SlotIo ping = slot_io(ctx, f, 0);
  SlotIo pong = slot_io(ctx, f, 1);
  calrt::Job a = ctx.submit(f, ping.io);
  calrt::Job b = ctx.submit(f, pong.io);
  std::vector<std::vector<std::byte>> outputs;
  for (auto [job, io] : {std::pair{&a, &ping.io}, std::pair{&b, &pong.io}}) {
    expect_final(*job, calrt::JobState::completed, "a slot's job");
    const calrt::Mapping mapping = io->output.map(io->logits_output, kClauseWait);
    outputs.emplace_back(mapping.bytes().begin(), mapping.bytes().end());
  }
  require(outputs[0] == outputs[1], "ping and pong outputs differ for the same inputs");
  require(outputs[0] == alone, "the parallel outputs differ from the same input run alone");
}

}  // namespace

std::vector<Clause> clauses_par() {
  return {
      {"PAR.1", "PAR", "parallel mode and slots", par_mode},
      {"PAR.2", "PAR", "one job per slot", par_one_job_per_slot},
      {"PAR.3", "PAR", "no crosstalk between slots", par_no_crosstalk},
  };
}

}  // namespace runner
