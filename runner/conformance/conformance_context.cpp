#include "runner/conformance/conformance_context.hpp"

#include <fmt/format.h>

#include <vector>

#include "abi/calrt_ext.hpp"
#include "runner/core/submission_inputs.hpp"

namespace runner {

void require(bool condition, const std::string& what) {
  if (!condition) {
    throw ClauseFailure(what);
  }
}

namespace {

std::string describe(const CallOutcome& outcome) {
  return outcome.ok() ? "OK" : calrt::code_name(outcome.code) + " (" + outcome.message + ")";
}

}  // namespace

void expect_code(const CallOutcome& outcome, CalrtCode code, const std::string& what) {
  if (outcome.code != code) {
    throw ClauseFailure(
        fmt::format("{}: expected {}, got {}", what, calrt::code_name(code), describe(outcome)));
  }
}

void expect_code(const CallOutcome& outcome, CalrtCode code, CalrtCode other,
                 const std::string& what) {
  if (outcome.code != code && outcome.code != other) {
    throw ClauseFailure(fmt::format("{}: expected {} or {}, got {}", what, calrt::code_name(code),
                                    calrt::code_name(other), describe(outcome)));
  }
}

calrt::JobStatus expect_final(calrt::Job& job, calrt::JobState want, const std::string& what) {
  require(job.wait(kClauseWait) == calrt::WaitResult::ready,
          what + ": Job_Wait still NOT_READY after 30 s of device time");
  calrt::JobStatus s = job.status();
  require(s.state == want,
          fmt::format("{}: the job is {} ({}: {}), expected {}", what, calrt::to_string(s.state),
                      calrt::code_name(s.code), s.message, calrt::to_string(want)));
  return s;
}

CallOutcome ClauseContext::take(CalrtError* error) const {
  CallOutcome out;
  if (error == nullptr) {
    return out;
  }
  auto code = args_of<Calrt_Error_GetCode_Args>();
  code.error = error;
  CALRT_HPP_ENTRY(api, Error_GetCode)(&code);
  out.code = code.code;
  auto message = args_of<Calrt_Error_Message_Args>();
  message.error = error;
  CALRT_HPP_ENTRY(api, Error_Message)(&message);
  if (message.message != nullptr) {
    out.message.assign(message.message, message.message_size);
  }
  auto destroy = args_of<Calrt_Error_Destroy_Args>();
  destroy.error = error;
  CALRT_HPP_ENTRY(api, Error_Destroy)(&destroy);
  if (out.code == CALRT_OK) {
    // An error object must carry a failure; OK in one would read as success to a caller
    // that checks the code.
    throw ClauseFailure("the runtime returned an error object with code OK: " + out.message);
  }
  return out;
}

calrt::Device ClauseContext::open_device(ClockNeed clock) const {
  DeviceSpec device_spec = spec;
  if (!options.device_config.empty()) {
    device_spec.config = options.device_config;
  }
  if (clock == ClockNeed::real && device_spec.kind == calrt::DeviceKind::sim) {
    if (device_spec.config.find("clock=") != std::string::npos) {
      if (device_spec.config.find("clock=paced") == std::string::npos) {
        throw ClauseSkip(
            "the device config sets the simulator's clock; this clause needs "
            "clock=paced (device time that follows wall time)");
      }
    } else {
      device_spec.config += (device_spec.config.empty() ? "" : ";") + std::string("clock=paced");
    }
  }
  return runner::open_device(api, device_spec, kClauseWait);
}

ModelIo ClauseContext::model_io(const Fixture& f, calrt::ModelType type, uint32_t slot) const {
  ModelIo io;
  bool found = false;
  for (const calrt::ModelDesc& model : f.calbin.models()) {
    if (model.type == type) {
      io.desc = model;
      found = true;
      break;
    }
  }
  if (!found) {
    throw ClauseFailure(fmt::format("the calbin reports no {} model", calrt::to_string(type)));
  }
  StepResult step;
  check_model_io(f.info, io, type, step);
  if (!step.passed()) {
    throw ClauseFailure(fmt::format("{}", fmt::join(step.failures, "; ")));
  }
  if (f.info.configured != 0) {
    io.input = calrt::Buffer::create(f.calbin, io.name(), calrt::Direction::input, slot);
    io.output = calrt::Buffer::create(f.calbin, io.name(), calrt::Direction::output, slot);
  }
  return io;
}

void ClauseContext::write_inputs(ModelIo& io, size_t tokens) const {
  const std::vector<int32_t> zeros(tokens, 0);
  write_submission(io, zeros, 0, 0, kClauseWait);
}

calrt::Kv ClauseContext::apply_kv(const Fixture& f, ModelIo& io, uint32_t capacity) const {
  calrt::Kv kv = calrt::Kv::allocate(f.calbin, capacity != 0 ? capacity : kJobKvTokens);
  kv.apply(io.input);
  return kv;
}

Fixture ClauseContext::fixture(Setup upto, uint32_t slot, ClockNeed clock) const {
  Fixture f;
  f.device = open_device(clock);
  if (upto == Setup::device) {
    return f;
  }
  f.calbin = calrt::Calbin::create(f.device, options.calbin, kClauseWait);
  f.info = f.calbin.info();
  if (upto == Setup::calbin) {
    return f;
  }
  f.calbin.configure(kClauseWait);
  f.info = f.calbin.info();
  if (upto == Setup::configured) {
    return f;
  }
  f.prefill = model_io(f, calrt::ModelType::prefill, slot);
  if (upto == Setup::buffers) {
    return f;
  }
  f.kv = apply_kv(f, f.prefill);
  write_inputs(f.prefill, kJobTokens);
  return f;
}

calrt::Job ClauseContext::submit(const Fixture& f, const ModelIo& io) const {
  return calrt::Job::submit(f.calbin, io.name(), io.input, io.output);
}

CallOutcome ClauseContext::create_buffer(const Fixture& f, const std::string& model, int direction,
                                         uint32_t slot) const {
  auto args = args_of<Calrt_Buffer_Create_Args>();
  args.calbin = f.calbin.get();
  args.model_name = model.c_str();
  set_raw(args.direction, direction);
  args.slot = slot;
  const CallOutcome outcome = CONF_CALL(*this, Buffer_Create, args);
  const calrt::Buffer adopted(args.buffer, {api});
  return outcome;
}

CallOutcome ClauseContext::submit_raw(const Fixture& f, const std::string& model,
                                      CalrtBuffer* input, CalrtBuffer* output,
                                      calrt::Job* job) const {
  auto args = args_of<Calrt_Job_Submit_Args>();
  args.calbin = f.calbin.get();
  args.model_name = model.c_str();
  args.input = input;
  args.output = output;
  const CallOutcome outcome = CONF_CALL(*this, Job_Submit, args);
  calrt::Job adopted(args.job, {api});
  if (adopted && !outcome.ok()) {
    throw ClauseFailure("Job_Submit failed with " + calrt::code_name(outcome.code) +
                        " but created a job");
  }
  if (job != nullptr) {
    *job = std::move(adopted);
  } else if (adopted) {
    adopted.cancel();
  }
  return outcome;
}

CallOutcome ClauseContext::wait_raw(CalrtJob* job, uint64_t timeout_ns,
                                    CalrtWaitResult* result) const {
  auto args = args_of<Calrt_Job_Wait_Args>();
  args.job = job;
  args.timeout_ns = timeout_ns;
  const CallOutcome outcome = CONF_CALL(*this, Job_Wait, args);
  if (result != nullptr) {
    *result = args.result;
  }
  return outcome;
}

bool ClauseContext::has_fault() const {
  return calrt::find_extension(api, CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE) != nullptr;
}

void ClauseContext::set_plan(const calrt::Device& device, const std::string& yaml) const {
  const calrt::DeviceFaults faults = calrt::DeviceFaults::of(device);
  if (!faults) {
    throw ClauseSkip("needs CALRT_EXT_FAULT (Fault_SetPlan): the runtime does not offer it");
  }
  faults.set_plan(yaml);
}

void ClauseContext::plan_hang(const calrt::Device& device) const {
  set_plan(device, "seed: 1\nfaults:\n  - kind: job_hang\n    during: prefill\n    at_op: 1\n");
}

calrt::Job ClauseContext::submit_held(const Fixture& f, const ModelIo& io) const {
  if (has_fault()) {
    // Slow, not hung: a hang is a device fault (FAULTED refuses maps), a slow job is
    // merely in flight until cancelled, as long as no wait reaches the watchdog.
    set_plan(f.device,
             "seed: 1\nfaults:\n  - kind: slow_completion\n    during: prefill\n    at_op: 1\n"
             "    factor: 1000000\n");
    return submit(f, io);
  }
  calrt::Job job = submit(f, io);
  if (job.status().is_final()) {
    throw ClauseSkip(
        "needs a job that stays in flight: without CALRT_EXT_FAULT (job_hang) the job was "
        "final already");
  }
  return job;
}

}  // namespace runner
