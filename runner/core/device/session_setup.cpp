// Smoke steps 1-4: device, calbin, configure, buffers.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "runner/core/session.hpp"
#include "runner/core/tensor_io.hpp"

namespace runner {
namespace {

std::string mib_text(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

double ms(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

nlohmann::json tensor_json(const calrt::TensorDesc& t) {
  return {{"name", t.name},
          {"role", calrt::to_string(t.role)},
          {"dtype", calrt::to_string(t.dtype)},
          {"shape", t.shape},
          {"layout", calrt::to_string(t.layout)},
          {"tile_d0", t.tile_d0},
          {"bytes", t.bytes}};
}

nlohmann::json model_json(const calrt::ModelDesc& m) {
  nlohmann::json doc = {{"name", m.name}, {"type", calrt::to_string(m.type)}};
  for (const auto& t : m.inputs) {
    doc["inputs"].push_back(tensor_json(t));
  }
  for (const auto& t : m.outputs) {
    doc["outputs"].push_back(tensor_json(t));
  }
  for (const auto& c : m.csrs) {
    doc["csrs"].push_back({{"name", c.name}, {"index", c.index}});
  }
  return doc;
}

// The model named exactly `wanted`, or the calbin's unique model of `type`.
const calrt::ModelDesc* select_model(const std::vector<calrt::ModelDesc>& models,
                                     const std::string& wanted, calrt::ModelType type,
                                     StepResult& step) {
  std::vector<const calrt::ModelDesc*> matches;
  std::string names;
  for (const auto& model : models) {
    names += (names.empty() ? "" : ", ") + model.name;
    if (wanted.empty() ? model.type == type : model.name == wanted) {
      matches.push_back(&model);
    }
  }
  if (matches.size() == 1) {
    return matches.front();
  }
  const std::string what = wanted.empty()
                               ? fmt::format("{} {} models", matches.size(), to_string(type))
                               : fmt::format("no model named exactly '{}'", wanted);
  step.fail(fmt::format("{} in the calbin (models: {}); choose one with --{}-model", what, names,
                        to_string(type)));
  return nullptr;
}

}  // namespace

StepResult step_device(Session& s) {
  return run_guarded(1, "device", [&](StepResult& step) {
    s.device = open_device(s.api, s.device_spec, s.timeout());
    const calrt::DeviceStatus status = s.device.status();
    s.chip_count = status.chip_count;
    // A device this process alone opened is OPEN; one shared with other processes (a driver's
    // card, `simdev serve`) may already be CONFIGURED or RUNNING for them. Anything else
    // (FAULTED, RESETTING, LOST) needs a reset before a smoke means anything.
    if (status.state != calrt::DeviceState::open &&
        status.state != calrt::DeviceState::configured &&
        status.state != calrt::DeviceState::running) {
      step.fail(
          fmt::format("device state {} after Device_Create, expected OPEN (or CONFIGURED "
                      "or RUNNING on a shared device)",
                      calrt::to_string(status.state)));
    }
    if (status.abi_major != CALRT_ABI_MAJOR) {
      step.fail(fmt::format("runtime implements ABI major {}, this runner {}", status.abi_major,
                            CALRT_ABI_MAJOR));
    }
    if (status.runtime_version.empty() || status.firmware_version.empty()) {
      step.fail("Device_Status reports no runtime or no firmware version");
    }
    if (status.chip_count == 0 || status.chip_count > CALRT_MAX_CHIPS) {
      step.fail(fmt::format("Device_Status reports {} chips", status.chip_count));
    }
    std::vector<std::string> chips;
    for (uint32_t c = 0; c < status.chip_count && c < CALRT_MAX_CHIPS; ++c) {
      const calrt::ChipStatus chip = s.device.chip_status(c);
      chips.push_back(fmt::format("chip{} {} {}", c, calrt::to_string(chip.health),
                                  mib_text(chip.dram_total_bytes)));
      step.details["chips"].push_back({{"chip", c},
                                       {"health", calrt::to_string(chip.health)},
                                       {"dram_total_bytes", chip.dram_total_bytes},
                                       {"dram_used_bytes", chip.dram_used_bytes}});
      if (chip.health == calrt::ChipHealth::hung || chip.health == calrt::ChipHealth::failed) {
        step.fail(fmt::format("chip {} health {}", c, calrt::to_string(chip.health)));
      }
    }
    step.summary =
        fmt::format("state={} name={} runtime={} firmware={} driver={} abi={}.{}.{} chips={} ({})",
                    calrt::to_string(status.state), status.device_name, status.runtime_version,
                    status.firmware_version, status.driver_version, status.abi_major,
                    status.abi_minor, status.abi_patch, status.chip_count, fmt::join(chips, ", "));
    step.details.update(
        {{"device", describe(s.device_spec)},
         {"state", calrt::to_string(status.state)},
         {"device_name", status.device_name},
         {"runtime_version", status.runtime_version},
         {"firmware_version", status.firmware_version},
         {"driver_version", status.driver_version},
         {"abi", fmt::format("{}.{}.{}", status.abi_major, status.abi_minor, status.abi_patch)},
         {"chip_count", status.chip_count}});
  });
}

void load_calbin_models(Session& s, StepResult& step) {
  s.calbin = calrt::Calbin::create(s.device, s.options.calbin, s.timeout());
  s.info = s.calbin.info();
  const auto models = s.calbin.models();
  for (const auto& model : models) {
    step.details["models"].push_back(model_json(model));
    spdlog::debug("model {} ({})", model.name, to_string(model.type));
    for (const auto* tensors : {&model.inputs, &model.outputs}) {
      for (const auto& t : *tensors) {
        spdlog::debug("  {} {} role {} {} [{}] {} tile_d0 {} {} B",
                      tensors == &model.inputs ? "input " : "output", t.name,
                      calrt::to_string(t.role), calrt::to_string(t.dtype), fmt::join(t.shape, ","),
                      calrt::to_string(t.layout), t.tile_d0, t.bytes);
      }
    }
  }
  const auto* prefill =
      select_model(models, s.options.prefill_model, calrt::ModelType::prefill, step);
  const auto* decode = select_model(models, s.options.decode_model, calrt::ModelType::decode, step);
  if (s.info.vocab != s.inputs.golden.vocab) {
    step.fail(
        fmt::format("LLM info vocab {} != golden vocab {}", s.info.vocab, s.inputs.golden.vocab));
  }
  if (prefill != nullptr) {
    s.prefill.desc = *prefill;
    check_model_io(s.info, s.prefill, calrt::ModelType::prefill, step);
  }
  if (decode != nullptr) {
    s.decode.desc = *decode;
    check_model_io(s.info, s.decode, calrt::ModelType::decode, step);
  }
  s.models_ok = step.passed();
  step.summary = fmt::format(
      "version={} arch={} abi={} models={} prefill={} decode={} vocab={} context={} "
      "chunk={} batch={} layers={} kv={}{}{}",
      s.info.calbin_version, s.info.architecture, s.info.runtime_abi, s.info.model_count,
      prefill ? prefill->name : "?", decode ? decode->name : "?", s.info.vocab, s.info.context,
      s.info.prefill_chunk, s.info.batch, s.info.layers, calrt::to_string(s.info.kv_dtype),
      // The ABI reports one KV type, the K-cache's; an S8 V-cache shows in the manifest.
      s.inputs.manifest.llm.v_dtype == s.inputs.manifest.llm.k_dtype
          ? ""
          : fmt::format(" (v {})", calbin::to_string(s.inputs.manifest.llm.v_dtype)),
      // The ABI does not describe the model's MLP; a mixture of experts shows in the manifest.
      s.inputs.manifest.llm.experts == 0
          ? ""
          : fmt::format(" experts={} (top-{}{})", s.inputs.manifest.llm.experts,
                        s.inputs.manifest.llm.active_experts,
                        s.inputs.manifest.llm.norm_topk_prob ? ", renormalised" : ""));
  step.details.update({{"calbin_version", s.info.calbin_version},
                       {"architecture", s.info.architecture},
                       {"runtime_abi", s.info.runtime_abi},
                       {"llm",
                        {{"vocab", s.info.vocab},
                         {"context", s.info.context},
                         {"batch", s.info.batch},
                         {"layers", s.info.layers},
                         {"hidden", s.info.hidden},
                         {"q_heads", s.info.q_heads},
                         {"kv_heads", s.info.kv_heads},
                         {"head_dim", s.info.head_dim},
                         {"prefill_chunk", s.info.prefill_chunk},
                         {"kv_dtype", calrt::to_string(s.info.kv_dtype)}}}});
}

FinishedJob run_model_job(Session& s, ModelIo& io) {
  FinishedJob done;
  done.job = calrt::Job::submit(s.calbin, io.name(), io.input, io.output);
  if (done.job.wait(s.timeout()) == calrt::WaitResult::not_ready) {
    done.job.cancel();
    done.failure =
        fmt::format("job did not finish within {} ms (timed out, cancelled)", s.options.timeout_ms);
    return done;
  }
  done.status = done.job.status();
  if (done.status.state != calrt::JobState::completed) {
    done.failure = fmt::format("job {}: {} ({}): {}", calrt::to_string(done.status.state),
                               calrt::code_name(done.status.code),
                               calrt::to_string(done.status.fault_class()), done.status.message);
  }
  return done;
}

StepResult step_calbin(Session& s) {
  return run_guarded(2, "calbin", [&](StepResult& step) { load_calbin_models(s, step); });
}

StepResult step_configure(Session& s) {
  return run_guarded(3, "configure", [&](StepResult& step) {
    // The residents first, as models already serving: this calbin must fit next to them.
    std::vector<std::string> residents;
    for (const std::filesystem::path& path : s.options.resident) {
      calrt::Calbin& resident =
          s.residents.emplace_back(calrt::Calbin::create(s.device, path, s.timeout()));
      const calrt::ConfigureResult configured = resident.configure(s.timeout());
      uint64_t bytes = 0;
      for (const uint64_t chip : configured.memory_used_bytes) bytes = std::max(bytes, chip);
      residents.push_back(
          fmt::format("{} ({} per chip)", path.filename().string(), mib_text(bytes)));
      step.details["residents"].push_back(
          {{"calbin", path.string()}, {"memory_used_bytes", configured.memory_used_bytes}});
    }
    const Stopwatch wall;
    const calrt::ConfigureResult result = s.calbin.configure(s.timeout());
    const double wall_ms = wall.elapsed_ms();
    s.configured = true;
    if (!s.calbin.info().configured) {
      step.fail("Calbin_Configure succeeded but Calbin_GetInfo says not configured");
    }
    std::vector<std::string> memory;
    for (size_t c = 0; c < result.memory_used_bytes.size(); ++c) {
      const auto chip = s.device.chip_status(static_cast<uint32_t>(c));
      memory.push_back(
          fmt::format("chip{} {} (DRAM {} of {})", c, mib_text(result.memory_used_bytes[c]),
                      mib_text(chip.dram_used_bytes), mib_text(chip.dram_total_bytes)));
      step.details["chips"].push_back({{"chip", c},
                                       {"memory_used_bytes", result.memory_used_bytes[c]},
                                       {"dram_used_bytes", chip.dram_used_bytes},
                                       {"dram_total_bytes", chip.dram_total_bytes}});
    }
    step.summary = fmt::format("device {:.3f} ms, host wall {:.1f} ms; {}",
                               ms(result.configure_time), wall_ms, fmt::join(memory, ", "));
    if (!residents.empty()) {
      step.summary += fmt::format("; next to {}", fmt::join(residents, ", "));
    }
    step.details["device_time_ms"] = ms(result.configure_time);
    step.details["host_wall_ms"] = wall_ms;
  });
}

StepResult step_residents(Session& s) {
  return run_guarded(9, "resident", [&](StepResult& step) {
    std::vector<std::string> names;
    for (size_t i = 0; i < s.residents.size(); ++i) {
      const std::string name = s.options.resident[i].filename().string();
      if (!s.residents[i].info().configured) {
        step.fail(fmt::format("{}: no longer configured after the run", name));
      }
      names.push_back(name);
    }
    step.summary = fmt::format("still configured: {}", fmt::join(names, ", "));
  });
}

namespace {

// Creates one model's buffers and checks every tensor's mapped size and the CSRs' reset
// value; returns a short "in N B, out M B" fact.
std::string create_buffers(Session& s, ModelIo& io, StepResult& step) {
  io.input = calrt::Buffer::create(s.calbin, io.name(), calrt::Direction::input);
  io.output = calrt::Buffer::create(s.calbin, io.name(), calrt::Direction::output);
  uint64_t bytes[2] = {0, 0};
  for (int side = 0; side < 2; ++side) {
    calrt::Buffer& buffer = side == 0 ? io.input : io.output;
    const auto& tensors = side == 0 ? io.desc.inputs : io.desc.outputs;
    for (const auto& tensor : tensors) {
      const calrt::Mapping mapping = buffer.map(tensor.index, s.timeout());
      bytes[side] += mapping.size();
      if (mapping.size() != tensor.bytes) {
        step.fail(fmt::format("model {}: tensor {}: mapped {} bytes, descriptor says {}", io.name(),
                              tensor.name, mapping.size(), tensor.bytes));
      }
    }
  }
  for (const uint32_t csr : {io.cur_seq_len_csr, io.past_kv_csr}) {
    if (const uint64_t value = io.input.csr(csr); value != 0) {
      step.fail(fmt::format("model {}: CSR {} is {} in a new buffer, expected 0", io.name(),
                            io.desc.csrs[csr].name, value));
    }
  }
  return fmt::format("{} in {} B out {} B", io.name(), bytes[0], bytes[1]);
}

}  // namespace

void create_model_buffers(Session& s, StepResult& step) {
  const std::string prefill = create_buffers(s, s.prefill, step);
  const std::string decode = create_buffers(s, s.decode, step);
  s.buffers_ok = step.passed();
  step.summary = prefill + "; " + decode;
}

StepResult step_buffers(Session& s) {
  return run_guarded(4, "buffers", [&](StepResult& step) { create_model_buffers(s, step); });
}

}  // namespace runner
