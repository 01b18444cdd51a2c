#include "llm/engine.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "llm/engine_impl.hpp"

namespace calrt::llm {
namespace {

// The service manifest a calbin implies when the caller has none: its only prefill and decode
// models, their tensors by role and the CSRs by their MODEL.md names. The contract check then
// holds the device to the calbin's own manifest.
Result<calbin::ServiceManifest> derive_service_manifest(const calbin::Manifest& m) {
  calbin::ServiceManifest s;
  s.architecture = m.architecture;
  s.calbin_version = m.calbin_version;
  s.runtime_abi = m.runtime_abi;
  s.context = m.llm.context;
  s.batch = m.llm.batch;
  s.vocab = m.llm.vocab;
  for (const calbin::Model& model : m.models) {
    if (model.type != calbin::ModelType::kPrefill && model.type != calbin::ModelType::kDecode) {
      continue;
    }
    std::string& name =
        model.type == calbin::ModelType::kPrefill ? s.prefill_model : s.decode_model;
    if (!name.empty()) {
      return tl::unexpected(request_error(
          ErrorCode::invalid_request,
          fmt::format("the calbin has two {} models (\"{}\", \"{}\"): name one in a service "
                      "manifest",
                      to_string(model.type), name, model.name)));
    }
    name = model.name;
    const auto index_of = [](const std::vector<calbin::TensorDesc>& list, calbin::TensorRole role) {
      for (uint32_t i = 0; i < list.size(); ++i) {
        if (list[i].role == role) return i;
      }
      return uint32_t{0};
    };
    s.token = {false, index_of(model.inputs, calbin::TensorRole::kToken)};
    s.position = {false, index_of(model.inputs, calbin::TensorRole::kPosition)};
    if (model.type == calbin::ModelType::kPrefill) {
      s.logits = {true, index_of(model.outputs, calbin::TensorRole::kLogits)};
    }
    for (const calbin::TensorDesc& t : model.outputs) {
      if (model.type == calbin::ModelType::kDecode && t.role == calbin::TensorRole::kTopIds &&
          t.shape.size() == 2) {
        s.decode_top_k = static_cast<uint32_t>(t.shape[1]);
      }
    }
  }
  s.current = {"cur_seq_len", 0};
  s.past_current = {"past_kv_cur_seq_len", 0};
  return s;
}

}  // namespace

// Host files in, or an error naming the file: a bad path or manifest is the caller's input.
Result<void> Engine::Impl::read_inputs() {
  auto read = calbin::read_manifest(config.calbin);
  if (!read) {
    return tl::unexpected(request_error(ErrorCode::invalid_request, read.error().to_string()));
  }
  manifest = std::move(*read);
  if (config.service_manifest.empty()) {
    auto derived = derive_service_manifest(manifest);
    if (!derived) return tl::unexpected(derived.error());
    service = std::move(*derived);
    service_file = "(service manifest derived from the calbin)";
    return {};
  }
  service_file = config.service_manifest.string();
  auto parsed = calbin::read_service_manifest(config.service_manifest);
  if (!parsed) {
    return tl::unexpected(request_error(ErrorCode::invalid_request, parsed.error().to_string()));
  }
  service = std::move(*parsed);
  return {};
}

namespace {

Result<void> validate(const Request& r, const Capabilities& caps) {
  if (r.prompt.empty()) {
    return tl::unexpected(request_error(ErrorCode::invalid_request, "prompt is empty"));
  }
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || static_cast<uint32_t>(r.prompt[i]) >= caps.vocab) {
      return tl::unexpected(
          request_error(ErrorCode::invalid_request,
                        fmt::format("prompt[{}] is token {}, outside the vocabulary of {}", i,
                                    r.prompt[i], caps.vocab)));
    }
  }
  const SamplingConfig& s = r.sampling;
  if (r.max_new_tokens == 0 || !(s.temperature > 0.0) || !(s.top_p > 0.0 && s.top_p <= 1.0) ||
      (s.method == SamplingMethod::top_k && s.top_k == 0)) {
    return tl::unexpected(request_error(
        ErrorCode::invalid_request,
        fmt::format("max_new_tokens {} (>= 1), temperature {} (> 0), top_p {} (in (0, 1]), "
                    "top_k {} (>= 1 for top-k sampling): one is out of range",
                    r.max_new_tokens, s.temperature, s.top_p, s.top_k)));
  }
  if (caps.decode_top_k > 0 && s.method == SamplingMethod::top_k && s.top_k > caps.decode_top_k) {
    return tl::unexpected(request_error(
        ErrorCode::invalid_request,
        fmt::format("top_k {}: the decode ranks on the device and gives its best {} ids only",
                    s.top_k, caps.decode_top_k)));
  }
  if (r.prompt.size() > caps.n_ctx) {
    return tl::unexpected(request_error(
        ErrorCode::context_exceeded,
        fmt::format("prompt of {} tokens exceeds n_ctx {}", r.prompt.size(), caps.n_ctx)));
  }
  // The last generated token is never fed, so the KV holds prompt + max_new - 1 positions.
  const uint64_t positions = r.prompt.size() + uint64_t{r.max_new_tokens} - 1;
  if (!r.context_shift && positions > caps.n_ctx) {
    return tl::unexpected(request_error(
        ErrorCode::context_exceeded,
        fmt::format("prompt {} + max_new_tokens {} - 1 = {} KV positions exceed n_ctx {} (a "
                    "context shift is opt-in: Request::context_shift)",
                    r.prompt.size(), r.max_new_tokens, positions, caps.n_ctx)));
  }
  if (r.context_shift && r.context_shift->n_keep + 2 > caps.n_ctx) {
    return tl::unexpected(
        request_error(ErrorCode::invalid_request,
                      fmt::format("context_shift.n_keep {} leaves nothing to shift in n_ctx {}",
                                  r.context_shift->n_keep, caps.n_ctx)));
  }
  return {};
}

}  // namespace

Result<void> Engine::Impl::load() {
  try {
    calbin = calrt::Calbin::create(device, config.calbin, config.call_timeout);
    const ContractSources sources{manifest, (config.calbin / "manifest.json").string(), service,
                                  service_file};
    auto checked = check_contract(calbin, sources);
    if (!checked) return tl::unexpected(checked.error());
    contract = std::move(*checked);
    calbin.configure(config.call_timeout);
    auto found = llm::capabilities(calbin, manifest);
    if (!found) return tl::unexpected(found.error());
    found->decode_top_k = contract.decode.top_k;
    if (config.slot_context > 0) {
      found->slot_context = config.slot_context;
      found->n_ctx = std::min(found->n_ctx, config.slot_context);
    }
    contract.caps = *found;
    {
      const std::lock_guard lock(mutex);
      caps = *found;
    }
    const bool parallel = config.parallel;
    device.set_parallel_mode(parallel);
    for (uint32_t s = 0; s < (parallel ? 2u : 1u); ++s) {
      Slot& slot = slots.emplace_back();
      const auto make = [&](const ModelBinding& m, calrt::Direction d) {
        ++stats.buffers_alive;
        return calrt::Buffer::create(calbin, m.name(), d, s);
      };
      slot.prefill_in = make(contract.prefill, calrt::Direction::input);
      slot.prefill_out = make(contract.prefill, calrt::Direction::output);
      slot.decode_in = make(contract.decode, calrt::Direction::input);
      slot.decode_out = make(contract.decode, calrt::Direction::output);
    }
  } catch (const calrt::Error& error) {
    return tl::unexpected(from_runtime(error, fmt::format("loading {}", config.calbin.string())));
  }
  return {};
}

Result<std::unique_ptr<Engine>> Engine::open(EngineConfig config) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  if (auto read = impl->read_inputs(); !read) return tl::unexpected(read.error());
  try {
    const DeviceSource& d = impl->config.device;
    impl->device =
        calrt::Device::create(d.api, d.kind, d.index, d.config, impl->config.call_timeout);
  } catch (const calrt::Error& error) {
    return tl::unexpected(from_runtime(error, "opening the device"));
  }
  if (auto loaded = impl->load(); !loaded) return tl::unexpected(loaded.error());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  if (impl_) impl_->release_flights();
}

const Capabilities& Engine::capabilities() const { return impl_->contract.caps; }

const calrt::Device& Engine::device() const { return impl_->device; }

Result<RequestId> Engine::submit(Request request) {
  Impl& e = *impl_;
  const std::lock_guard lock(e.mutex);
  if (auto valid = validate(request, e.caps); !valid) {
    return tl::unexpected(valid.error());
  }
  if (!e.model_available) {
    return tl::unexpected(
        model_error(ErrorCode::model_unavailable,
                    fmt::format("calbin {} stopped after a model fault; no new work",
                                e.config.calbin.string())));
  }
  if (e.down) return tl::unexpected(*e.down);
  if (e.queue.size() >= e.config.queue_capacity) {
    return tl::unexpected(request_error(
        ErrorCode::queue_full,
        fmt::format("queue holds {} requests, its capacity", e.config.queue_capacity)));
  }
  auto live = std::make_unique<Live>();
  live->id = e.next_id++;
  live->request = std::move(request);
  live->submitted = SteadyClock::now();
  const RequestId id = live->id;
  e.live_ids.insert(id);
  e.queue.push_back(std::move(live));
  ++e.stats.submitted;
  return id;
}

bool Engine::cancel(RequestId id) {
  Impl& e = *impl_;
  const std::lock_guard lock(e.mutex);
  if (!e.live_ids.contains(id)) return false;
  return e.cancels.insert(id).second;
}

void Engine::Impl::take_queue_updates() {
  std::vector<std::unique_ptr<Live>> cancelled;
  {
    const std::lock_guard lock(mutex);
    for (auto it = queue.begin(); it != queue.end();) {
      if (cancels.contains((*it)->id)) {
        cancelled.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& live : active) {
      if (cancels.contains(live->id)) live->cancel = true;
    }
  }
  for (auto& live : cancelled) {
    finish(*live, request_error(ErrorCode::cancelled, "cancelled while queued"));
  }
  // An admitted request not in flight stops now; one in flight at its job's end.
  for (auto& live : active) {
    if (live->cancel && !live->in_flight && live->seq) {
      finish(*live, request_error(ErrorCode::cancelled, fmt::format("cancelled after {} tokens",
                                                                    live->generated.size())));
    }
  }
  remove_finished();
}

// First come first served: the queue's head is admitted when a sequence can be had; a head
// whose KV does not fit waits for others to end, unless nothing else holds KV.
void Engine::Impl::admit() {
  const uint32_t n_ctx = contract.caps.n_ctx;
  while (active.size() < config.max_sequences) {
    std::unique_ptr<Live> live;
    {
      const std::lock_guard lock(mutex);
      if (queue.empty() || !model_available || down) return;
      live = std::move(queue.front());
      queue.pop_front();
    }
    const Request& r = live->request;
    const uint32_t positions = static_cast<uint32_t>(r.prompt.size() + r.max_new_tokens - 1);
    const uint32_t capacity = r.context_shift ? n_ctx : std::min(n_ctx, positions);
    auto seq = Sequence::create(calbin, capacity, r.prompt, ledger_of(*live));
    if (!seq && seq.error().code == ErrorCode::kv_exhausted && !active.empty()) {
      const std::lock_guard lock(mutex);
      queue.push_front(std::move(live));  // its turn comes when a sequence ends
      return;
    }
    if (!seq) {
      const Error error = reclassify(seq.error());
      if (error.kind == ErrorKind::device) {
        active.push_back(std::move(live));
        device_fault(error);
        return;
      }
      finish(*live, error);
      continue;
    }
    live->seq.emplace(std::move(*seq));
    active.push_back(std::move(live));
  }
}

void Engine::Impl::finish(Live& live, std::optional<Error> error) {
  live.seq.reset();  // Kv_Free; the ledger's KV counts return
  const auto now = SteadyClock::now();
  Outcome outcome;
  outcome.id = live.id;
  outcome.tokens = live.generated;
  outcome.error = std::move(error);
  outcome.timing = live.timing;
  outcome.timing.total = now - live.submitted;
  if (!live.first_job) outcome.timing.queue = now - live.submitted;
  if (live.generated.size() > 1) {
    outcome.timing.tpot =
        (live.last_token - *live.first_token) / static_cast<int64_t>(live.generated.size() - 1);
  }
  outcome.ledger = live.ledger;
  outcome.context_shifts = live.shifts;
  {
    const std::lock_guard lock(mutex);
    live_ids.erase(live.id);
    cancels.erase(live.id);
    if (!outcome.error) {
      ++stats.completed;
    } else if (outcome.error->code == ErrorCode::cancelled) {
      ++stats.cancelled;
    } else {
      ++stats.failed;
    }
  }
  live.id = 0;  // marks it for remove_finished()
  if (events != nullptr) events->push_back(std::move(outcome));
}

void Engine::Impl::remove_finished() {
  std::erase_if(active, [](const std::unique_ptr<Live>& live) { return live->id == 0; });
  if (cursor >= active.size()) cursor = 0;
}

void Engine::poll(std::chrono::nanoseconds timeout, std::vector<Event>& events) {
  Impl& e = *impl_;
  e.events = &events;
  const auto deadline = SteadyClock::now() + timeout;
  const size_t before = events.size();
  // Bounded: every round finishes a job or returns, and it returns as soon as there is an
  // event, so that a caller streams tokens as they come.
  for (;;) {
    e.take_queue_updates();
    e.admit();
    e.fill();
    e.remove_finished();
    if (e.flights.empty() || events.size() > before) break;
    const auto left = deadline - SteadyClock::now();
    if (left <= std::chrono::nanoseconds::zero()) break;
    if (!e.complete_oldest(left)) break;
    e.remove_finished();
    if (events.size() > before) {
      e.fill();  // keep the device busy while the caller handles the events
      break;
    }
  }
  e.events = nullptr;
}

bool Engine::idle() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->queue.empty() && impl_->active.empty() && impl_->flights.empty();
}

bool Engine::run_until_idle(std::chrono::nanoseconds timeout, std::vector<Event>& events) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!idle()) {
    const auto left = deadline - SteadyClock::now();
    if (left <= std::chrono::nanoseconds::zero()) return false;
    poll(left, events);
  }
  return true;
}

EngineStats Engine::stats() const {
  const std::lock_guard lock(impl_->mutex);
  EngineStats out = impl_->stats;
  out.queued = impl_->queue.size();
  out.active = impl_->active.size();
  out.model_available = impl_->model_available && !impl_->down;
  if (impl_->calbin) {
    try {
      out.device_kv_handles = impl_->calbin.kv_capacity().live_handles;
    } catch (const calrt::Error&) {
      out.device_kv_handles = -1;  // a faulted or lost device: the ledger stands alone
    }
  }
  return out;
}

Outcome run_alone(Engine& engine, Request request, std::chrono::nanoseconds timeout,
                  std::vector<TokenEvent>* tokens) {
  auto id = engine.submit(std::move(request));
  if (!id) {
    Outcome refused;
    refused.error = id.error();
    return refused;
  }
  const auto deadline = SteadyClock::now() + timeout;
  std::vector<Event> events;
  while (SteadyClock::now() < deadline) {
    engine.poll(deadline - SteadyClock::now(), events);
    for (Event& event : events) {
      if (auto* token = std::get_if<TokenEvent>(&event); token && token->id == *id && tokens) {
        tokens->push_back(std::move(*token));
      } else if (auto* outcome = std::get_if<Outcome>(&event); outcome && outcome->id == *id) {
        return std::move(*outcome);
      }
    }
    events.clear();
  }
  engine.cancel(*id);
  Outcome late;
  late.id = *id;
  late.error = request_error(ErrorCode::timeout, "run_alone: no outcome within the timeout");
  return late;
}

}  // namespace calrt::llm
