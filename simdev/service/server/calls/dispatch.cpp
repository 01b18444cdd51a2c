#include "simdev/service/server/calls/dispatch.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>

#include <spdlog/spdlog.h>

#include "abi/calrt_ext.h"
#include "simdev/service/server/access/calbin_roots.hpp"
#include "simdev/service/server/calls/sim_call.hpp"

namespace simdev::service::server {
namespace {

// Bounds on what one response may carry, so that it stays inside one frame.
constexpr uint64_t kMaxMapBytes = kMaxPayloadBytes - 4096;
constexpr uint64_t kMaxTraceEvents = 1u << 16;
constexpr uint64_t kMaxFaultHits = 1u << 12;
constexpr uint64_t kMaxReportBytes = kMaxPayloadBytes - 4096;

using Ctx = DispatchContext;

const char* c_str(const std::optional<std::string>& s) { return s ? s->c_str() : nullptr; }
std::string str(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

template <class T>
tl::expected<T*, Failure> get(const Ctx& c, WireHandle h, HandleKind kind, const char* field) {
  auto found = c.objects->handles.find(h.id, kind, field);
  if (!found) {
    return tl::unexpected(
        Failure{CALRT_INVALID_HANDLE, std::string(c.call_name) + ": " + found.error()});
  }
  return static_cast<T*>(*found);
}

Failure call(const Ctx& c, CalrtError* error) { return take_error(c.api, error); }

template <class Ext>
tl::expected<const Ext*, Failure> extension(const Ctx& c, CalrtExtensionType type, size_t size,
                                            const char* name) {
  const auto* ext = find_extension(c.api, type, size);
  if (ext == nullptr) {
    return tl::unexpected(Failure{
        CALRT_UNIMPLEMENTED,
        std::string(c.call_name) + ": the daemon's runtime offers no " + name + " extension"});
  }
  return reinterpret_cast<const Ext*>(ext);
}

#define SIMDEV_GET(var, Type, kind, wire, field)           \
  auto var##_found = get<Type>(c, wire, kind, field);      \
  if (!var##_found) return std::move(var##_found.error()); \
  Type* var = *var##_found

#define SIMDEV_EXT(var, Ext, type, size, name)             \
  auto var##_found = extension<Ext>(c, type, size, name);  \
  if (!var##_found) return std::move(var##_found.error()); \
  const Ext* var = *var##_found

// ---- Copies between a request and its args struct, from the call table ------------------

constexpr HandleKind handle_kind(const CalrtDevice*) { return HandleKind::device; }
constexpr HandleKind handle_kind(const CalrtCalbin*) { return HandleKind::calbin; }
constexpr HandleKind handle_kind(const CalrtBuffer*) { return HandleKind::buffer; }
constexpr HandleKind handle_kind(const CalrtJob*) { return HandleKind::job; }
constexpr HandleKind handle_kind(const CalrtKv*) { return HandleKind::kv; }

// Stores one in field of a request into the args struct; a handle is looked up in the
// session's table, and the first that is not live there fails the call.
struct ToArgs {
  const Ctx& c;
  Failure failed;

  template <class T>
  void operator()(const char* name, const WireHandle& wire, T*& field) {
    if (!failed.ok()) return;
    auto found = get<T>(c, wire, handle_kind(field), name);
    if (found) {
      field = *found;
    } else {
      failed = std::move(found.error());
    }
  }
  template <class E>
  requires std::is_enum_v<E>
  void operator()(const char*, uint32_t wire, E& field) { put_enum(field, wire); }
  void operator()(const char*, const std::optional<std::string>& wire, const char*& field) {
    field = c_str(wire);
  }
  template <class T>
  requires std::is_integral_v<T>
  void operator()(const char*, T wire, T& field) { field = wire; }
};

// Stores one out field of the args struct into the answer. A handle the call created is the
// call's own business: it enters the session's table under an id only when the call succeeds.
struct FromArgs {
  template <class T>
  void operator()(const char*, WireHandle&, T* const&) {}
  template <class E>
  requires std::is_enum_v<E>
  void operator()(const char*, uint32_t& wire, const E& field) { wire = get_enum(field); }
  void operator()(const char*, std::string& wire, const char* const& field) { wire = str(field); }
  template <class T>
  requires std::is_integral_v<T>
  void operator()(const char*, T& wire, const T& field) { wire = field; }
  template <class T, size_t N>
  void operator()(const char*, std::array<T, N>& wire, const T (&field)[N]) {
    std::copy(std::begin(field), std::end(field), wire.begin());
  }
};

template <class C>
tl::expected<typename C::Args, Failure> args_from(const Ctx& c, const typename C::In& in) {
  auto args = make_args<typename C::Args>();
  ToArgs to{c, {}};
  C::In::zip(in, args, to);
  if (!to.failed.ok()) return tl::unexpected(std::move(to.failed));
  return args;
}

template <class C>
void outs_from(const typename C::Args& args, typename C::Out& out) {
  C::Out::zip(out, args, FromArgs{});
}

// Calls the simulator's entry of C: in its table, or in the extension that holds it.
template <class C>
Failure invoke(const Ctx& c, typename C::Args& args) {
  using Info = calrt::calls::CallInfo<typename C::Args>;
  using Table = typename Info::Table;
  if constexpr (std::is_same_v<Table, CalrtApi>) {
    return call(c, (c.api->*Info::entry)(&args));
  } else {
    using Ext = calrt::calls::TableInfo<Table>;
    auto ext = extension<Table>(c, Ext::type, Ext::min_size, Ext::name);
    if (!ext) return std::move(ext.error());
    return call(c, ((*ext)->*Info::entry)(&args));
  }
}

// A call that the daemon only forwards: its fields in, the runtime's answer out (out fields
// are copied whatever the code: a failed call reports what it wrote, zeros elsewhere).
template <class C>
Failure forward_call(Ctx& c, const typename C::In& in, typename C::Out& out) {
  auto args = args_from<C>(c, in);
  if (!args) return std::move(args.error());
  Failure f = invoke<C>(c, *args);
  outs_from<C>(*args, out);
  return f;
}

// Every call is forward_call()ed, unless it has a run() of its own below.
template <class C>
Failure run(Ctx& c, const typename C::In& in, typename C::Out& out) {
  return forward_call<C>(c, in, out);
}

// ---- Device -------------------------------------------------------------------------

template <>
Failure run<DeviceCreate>(Ctx& c, const DeviceCreate::In& in, DeviceCreate::Out& out) {
  if (c.objects->attached) {
    return {CALRT_WRONG_STATE, "Device_Create: this session is attached to the device already"};
  }
  auto device = c.host->attach(in.kind, in.index, in.config, in.timeout_ns);
  if (!device) return std::move(device.error());
  c.objects->attached = true;
  c.host->join(c.objects);
  out.device.id = c.objects->handles.add(HandleKind::device, *device);
  if (auto clock = extension<CalrtClockExtension>(c, CALRT_EXT_CLOCK,
                                                  CALRT_CLOCK_EXTENSION_STRUCT_SIZE, "clock")) {
    auto args = make_args<Calrt_Clock_Get_Args>();
    args.device = *device;
    if (call(c, (*clock)->Clock_Get(&args)).ok()) out.clock_mode = get_enum(args.mode);
  }
  c.host->set_virtual_clock(out.clock_mode == CALRT_CLOCK_VIRTUAL);
  return {};
}

template <>
Failure run<DeviceDestroy>(Ctx& c, const DeviceDestroy::In& in, DeviceDestroy::Out&) {
  SIMDEV_GET(device, CalrtDevice, HandleKind::device, in.device, "device");
  if (device == nullptr) {
    return {CALRT_INVALID_HANDLE, "Device_Destroy: field 'device': the NULL handle"};
  }
  return release_session(c);
}

std::optional<CalrtJobState> job_state(const CalrtApi* api, void* job) {
  auto args = make_args<Calrt_Job_Status_Args>();
  args.job = static_cast<CalrtJob*>(job);
  if (take_error(api, api->Job_Status(&args)).code != CALRT_OK) return std::nullopt;
  return args.state;
}

template <>
Failure run<DeviceReset>(Ctx& c, const DeviceReset::In& in, DeviceReset::Out& out) {
  auto args = args_from<DeviceReset>(c, in);
  if (!args) return std::move(args.error());
  // The other sessions' jobs in flight now are the ones this reset will cancel: each is
  // marked, so that its owner learns it was preempted instead of seeing a cancel it never
  // asked for.
  std::vector<std::pair<SessionObjects*, uint64_t>> in_flight;
  for (SessionObjects* other : c.host->sessions()) {
    if (other == c.objects) continue;
    for (const auto& [id, handle] : other->handles.of_kind(HandleKind::job)) {
      const auto state = job_state(c.api, handle);
      if (state && !calrt_job_state_final(*state)) in_flight.emplace_back(other, id);
    }
  }
  Failure f = invoke<DeviceReset>(c, *args);
  outs_from<DeviceReset>(*args, out);
  for (const auto& [other, id] : in_flight) {
    const auto handle = other->handles.find(id, HandleKind::job, "job");
    const auto state = handle ? job_state(c.api, *handle) : std::nullopt;
    if (state == CALRT_JOB_CANCELLED) other->preempted_by[id] = c.session_id;
  }
  if (!in_flight.empty()) {
    spdlog::info("session {}: Device_Reset level {} ended {} job(s) of other sessions",
                 c.session_id, in.level, in_flight.size());
  }
  return f;
}

// ---- Calbin -------------------------------------------------------------------------

template <>
Failure run<CalbinCreate>(Ctx& c, const CalbinCreate::In& asked, CalbinCreate::Out& out) {
  auto args = args_from<CalbinCreate>(c, asked);
  if (!args) return std::move(args.error());
  CalbinCreate::In in = asked;
  if (in.path && c.calbin_roots != nullptr && !c.calbin_roots->empty()) {
    auto confined = confine_to_roots(*in.path, *c.calbin_roots);
    if (!confined) return Failure{CALRT_INVALID_ARGUMENT, "Calbin_Create: " + confined.error()};
    in.path = confined->string();  // the checked path is the one opened
    args->path = in.path->c_str();
  }
  Failure f = invoke<CalbinCreate>(c, *args);
  if (f.ok()) out.calbin.id = c.objects->handles.add(HandleKind::calbin, args->calbin);
  return f;
}

void forget_buffer_mappings(SessionObjects& objects, uint64_t buffer_id) {
  std::erase_if(objects.mappings, [&](const auto& m) { return m.first.first == buffer_id; });
}

template <>
Failure run<CalbinDestroy>(Ctx& c, const CalbinDestroy::In& in, CalbinDestroy::Out& out) {
  Failure f = forward_call<CalbinDestroy>(c, in, out);
  if (f.ok()) {
    // The runtime released the calbin's buffers, jobs and KV handles with it.
    c.objects->handles.remove(in.calbin.id);
    for (uint64_t child : c.objects->handles.remove_children(in.calbin.id)) {
      forget_buffer_mappings(*c.objects, child);
    }
  }
  return f;
}

// ---- Buffer -------------------------------------------------------------------------

template <>
Failure run<BufferCreate>(Ctx& c, const BufferCreate::In& in, BufferCreate::Out& out) {
  auto args = args_from<BufferCreate>(c, in);
  if (!args) return std::move(args.error());
  Failure f = invoke<BufferCreate>(c, *args);
  if (f.ok()) {
    out.buffer.id = c.objects->handles.add(HandleKind::buffer, args->buffer, in.calbin.id);
  }
  return f;
}

template <>
Failure run<BufferDestroy>(Ctx& c, const BufferDestroy::In& in, BufferDestroy::Out& out) {
  Failure f = forward_call<BufferDestroy>(c, in, out);
  if (f.ok()) {
    c.objects->handles.remove(in.buffer.id);
    forget_buffer_mappings(*c.objects, in.buffer.id);
  }
  return f;
}

template <>
Failure run<BufferMap>(Ctx& c, const BufferMap::In& in, BufferMap::Out& out) {
  auto mapped = args_from<BufferMap>(c, in);
  if (!mapped) return std::move(mapped.error());
  Calrt_Buffer_Map_Args& args = *mapped;
  Failure f = invoke<BufferMap>(c, args);
  if (!f.ok()) return f;
  if (args.size_bytes > kMaxMapBytes || (args.data == nullptr && args.size_bytes > 0)) {
    auto unmap = make_args<Calrt_Buffer_Unmap_Args>();
    unmap.buffer = args.buffer;
    unmap.tensor_index = in.tensor_index;
    (void)call(c, c.api->Buffer_Unmap(&unmap));
    return {CALRT_OUT_OF_RANGE,
            "Buffer_Map: buffer " + std::to_string(in.buffer.id) + " tensor " +
                std::to_string(in.tensor_index) + ": " + std::to_string(args.size_bytes) +
                " bytes exceed the service's frame limit of " + std::to_string(kMaxMapBytes)};
  }
  const auto* bytes = static_cast<const uint8_t*>(args.data);
  if (!c.in_batch) out.data.assign(bytes, bytes + args.size_bytes);
  c.objects->mappings[{in.buffer.id, in.tensor_index}] = {args.data, args.size_bytes};
  return {};
}

template <>
Failure run<BufferUnmap>(Ctx& c, const BufferUnmap::In& in, BufferUnmap::Out&) {
  SIMDEV_GET(buffer, CalrtBuffer, HandleKind::buffer, in.buffer, "buffer");
  if (in.write_back > 1) {
    return {CALRT_INVALID_ARGUMENT, "Buffer_Unmap: field 'write_back': " +
                                        std::to_string(in.write_back) + " is neither 0 nor 1"};
  }
  const auto key = std::make_pair(in.buffer.id, in.tensor_index);
  const auto mapping = c.objects->mappings.find(key);
  if (in.write_back == 1 && mapping != c.objects->mappings.end()) {
    if (in.data.size() != mapping->second.size) {
      return {CALRT_INVALID_ARGUMENT, "Buffer_Unmap: buffer " + std::to_string(in.buffer.id) +
                                          " tensor " + std::to_string(in.tensor_index) +
                                          ": write-back of " + std::to_string(in.data.size()) +
                                          " bytes, the tensor has " +
                                          std::to_string(mapping->second.size)};
    }
    if (!in.data.empty()) std::memcpy(mapping->second.data, in.data.data(), in.data.size());
  }
  auto args = make_args<Calrt_Buffer_Unmap_Args>();
  args.buffer = buffer;
  args.tensor_index = in.tensor_index;
  Failure f = call(c, c.api->Buffer_Unmap(&args));
  if (f.ok()) c.objects->mappings.erase(key);
  return f;
}

// ---- Job ----------------------------------------------------------------------------

template <>
Failure run<JobSubmit>(Ctx& c, const JobSubmit::In& in, JobSubmit::Out& out) {
  auto args = args_from<JobSubmit>(c, in);
  if (!args) return std::move(args.error());
  Failure f = invoke<JobSubmit>(c, *args);
  if (f.ok()) {
    out.job.id = c.objects->handles.add(HandleKind::job, args->job, in.calbin.id);
    c.host->trace().job_submitted(c.session_id);
  }
  return f;
}

// The simulator's Job_Status, without the daemon's PREEMPTED rewrite of a cancelled job.
Failure job_status(Ctx& c, CalrtJob* job, JobStatusOut& out) {
  auto args = make_args<Calrt_Job_Status_Args>();
  args.job = job;
  Failure f = invoke<JobStatus>(c, args);
  outs_from<JobStatus>(args, out);
  return f;
}

// The tensors a completed job's wait brings along: each mapped, copied and unmapped at once,
// exclusive of the device lane, so no other call sees the mapping. A tensor that cannot be
// mapped now (the host mapped it meanwhile, a bad index) is left out: the client then maps it
// with a call of its own, which reports why.
void fetch_outputs(Ctx& c, const JobWait::In& in, JobWait::Out& out) {
  auto found = c.objects->handles.find(in.output.id, HandleKind::buffer, "output");
  if (!found) return;
  auto* buffer = static_cast<CalrtBuffer*>(*found);
  uint64_t total = 0;
  for (const TensorIndex& tensor : in.fetch) {
    if (c.objects->mappings.contains({in.output.id, tensor.index})) continue;
    auto map = make_args<Calrt_Buffer_Map_Args>();
    map.buffer = buffer;
    map.tensor_index = tensor.index;
    if (!call(c, c.api->Buffer_Map(&map)).ok()) continue;
    total += map.size_bytes;
    if (total <= kMaxMapBytes && (map.data != nullptr || map.size_bytes == 0)) {
      const auto* bytes = static_cast<const uint8_t*>(map.data);
      out.outputs.push_back(FetchedTensor{tensor.index, Bytes(bytes, bytes + map.size_bytes)});
    }
    auto unmap = make_args<Calrt_Buffer_Unmap_Args>();
    unmap.buffer = buffer;
    unmap.tensor_index = tensor.index;
    (void)call(c, c.api->Buffer_Unmap(&unmap));
  }
}

// Runs on the session's wait lane (or on the device lane, at the end of a batch): it reads
// the handle table (which locks itself) and the simulator, never the session's device-lane
// state (preempted_by concerns cancelled jobs, whose status is not sent along).
template <>
Failure run<JobWait>(Ctx& c, const JobWait::In& in, JobWait::Out& out) {
  SIMDEV_GET(job, CalrtJob, HandleKind::job, in.job, "job");
  auto args = make_args<Calrt_Job_Wait_Args>();
  args.job = job;
  args.timeout_ns = in.timeout_ns;
  Failure f = call(c, c.api->Job_Wait(&args));
  out.job = in.job;
  out.result = get_enum(args.result);
  out.state = get_enum(args.state);
  if (args.state == CALRT_JOB_COMPLETED || args.state == CALRT_JOB_FAILED ||
      args.state == CALRT_JOB_TIMED_OUT) {
    JobStatusOut status;
    if (job_status(c, job, status).ok() && status.state == out.state) {
      out.status.push_back(std::move(status));
    }
  }
  if (args.state == CALRT_JOB_COMPLETED && !in.fetch.empty() && c.on_device_lane) {
    c.on_device_lane([&] { fetch_outputs(c, in, out); });
  }
  return f;
}

// Job 0: the job of the session's last batch that waits (SessionObjects::batch_job).
template <class In>
In job_named(const Ctx& c, In in) {
  if (in.job.id == 0) in.job.id = c.objects->batch_job;
  return in;
}

template <>
Failure run<JobStatus>(Ctx& c, const JobStatus::In& named, JobStatus::Out& out) {
  const JobStatus::In in = job_named(c, named);
  SIMDEV_GET(job, CalrtJob, HandleKind::job, in.job, "job");
  Failure f = job_status(c, job, out);
  if (const auto by = c.objects->preempted_by.find(in.job.id);
      by != c.objects->preempted_by.end() && out.state == CALRT_JOB_CANCELLED) {
    out.code = CALRT_PREEMPTED;
    out.message = "preempted: session " + std::to_string(by->second) +
                  " reset the shared device while this job was in flight (" + out.message + ")";
  }
  return f;
}

template <>
Failure run<JobCancel>(Ctx& c, const JobCancel::In& named, JobCancel::Out& out) {
  return forward_call<JobCancel>(c, job_named(c, named), out);
}

template <>
Failure run<JobDestroy>(Ctx& c, const JobDestroy::In& named, JobDestroy::Out& out) {
  const JobDestroy::In in = job_named(c, named);
  Failure f = forward_call<JobDestroy>(c, in, out);
  if (f.ok()) {
    c.objects->handles.remove(in.job.id);
    c.objects->preempted_by.erase(in.job.id);
  }
  return f;
}

// ---- KV -----------------------------------------------------------------------------

template <>
Failure run<KvAllocate>(Ctx& c, const KvAllocate::In& in, KvAllocate::Out& out) {
  auto args = args_from<KvAllocate>(c, in);
  if (!args) return std::move(args.error());
  Failure f = invoke<KvAllocate>(c, *args);
  if (f.ok()) out.kv.id = c.objects->handles.add(HandleKind::kv, args->kv, in.calbin.id);
  return f;
}

template <>
Failure run<KvFree>(Ctx& c, const KvFree::In& in, KvFree::Out& out) {
  Failure f = forward_call<KvFree>(c, in, out);
  if (f.ok()) c.objects->handles.remove(in.kv.id);
  return f;
}

// ---- Extensions ---------------------------------------------------------------------

template <>
Failure run<TraceEnable>(Ctx& c, const TraceEnable::In& in, TraceEnable::Out&) {
  SIMDEV_GET(device, CalrtDevice, HandleKind::device, in.device, "device");
  SIMDEV_EXT(ext, CalrtTraceExtension, CALRT_EXT_TRACE, CALRT_TRACE_EXTENSION_STRUCT_SIZE, "trace");
  // This session's recording only (trace_demux.hpp).
  return c.host->trace().enable({c.api, ext, device}, c.session_id, in.enable != 0,
                                in.capacity_events);
}

template <>
Failure run<TraceRead>(Ctx& c, const TraceRead::In& in, TraceRead::Out& out) {
  SIMDEV_GET(device, CalrtDevice, HandleKind::device, in.device, "device");
  SIMDEV_EXT(ext, CalrtTraceExtension, CALRT_EXT_TRACE, CALRT_TRACE_EXTENSION_STRUCT_SIZE, "trace");
  // The caller may ask for more than one frame carries; it reads the rest on the next call.
  return c.host->trace().read({c.api, ext, device}, c.session_id,
                              std::min(in.capacity, kMaxTraceEvents), out.events, out.dropped);
}

template <>
Failure run<FaultSetPlan>(Ctx& c, const FaultSetPlan::In& in, FaultSetPlan::Out&) {
  SIMDEV_GET(device, CalrtDevice, HandleKind::device, in.device, "device");
  SIMDEV_EXT(ext, CalrtFaultExtension, CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE, "fault");
  if (in.plan_null > 1) {
    return {CALRT_INVALID_ARGUMENT, "Fault_SetPlan: field 'plan_null': " +
                                        std::to_string(in.plan_null) + " is neither 0 nor 1"};
  }
  // plan_size is the caller's; with a plan present it must describe the bytes that came,
  // or the runtime would read past them.
  if (in.plan_null == 0 && in.plan_size != in.plan.size()) {
    return {CALRT_INVALID_ARGUMENT,
            "Fault_SetPlan: field 'plan_size': " + std::to_string(in.plan_size) +
                " but the plan has " + std::to_string(in.plan.size()) + " bytes"};
  }
  static const char kEmpty[1] = {0};
  auto args = make_args<Calrt_Fault_SetPlan_Args>();
  args.device = device;
  args.plan = in.plan_null      ? nullptr
              : in.plan.empty() ? kEmpty
                                : reinterpret_cast<const char*>(in.plan.data());
  args.plan_size = static_cast<size_t>(in.plan_size);
  return call(c, ext->Fault_SetPlan(&args));
}

template <>
Failure run<FaultGetHits>(Ctx& c, const FaultGetHits::In& in, FaultGetHits::Out& out) {
  SIMDEV_GET(device, CalrtDevice, HandleKind::device, in.device, "device");
  SIMDEV_EXT(ext, CalrtFaultExtension, CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE, "fault");
  const auto capacity = static_cast<size_t>(std::min<uint64_t>(in.capacity, kMaxFaultHits));
  const auto hits = std::make_unique_for_overwrite<CalrtFaultHit[]>(capacity);  // as above
  auto args = make_args<Calrt_Fault_GetHits_Args>();
  args.device = device;
  args.hits = capacity == 0 ? nullptr : hits.get();
  args.hit_struct_size = sizeof(CalrtFaultHit);
  args.capacity = capacity;
  Failure f = call(c, ext->Fault_GetHits(&args));
  out.count = args.count;
  const size_t written = std::min<size_t>(args.count, capacity);
  for (size_t i = 0; f.ok() && i < written; ++i) {
    out.hits.push_back({str(hits[i].kind), str(hits[i].site), hits[i].count});
  }
  return f;
}

template <>
Failure run<DiagReport>(Ctx& c, const DiagReport::In& in, DiagReport::Out& out) {
  SIMDEV_GET(device, CalrtDevice, HandleKind::device, in.device, "device");
  SIMDEV_EXT(ext, CalrtDiagExtension, CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE, "diag");
  // A client's capacity is only a bound: the buffer is left unfilled, so a call costs what
  // the report needs, not what a client asks for (2^64-1 made the daemon zero 64 MiB a call,
  // and a stream of them stalled every other tenant).
  const auto capacity = static_cast<size_t>(std::min<uint64_t>(in.capacity, kMaxReportBytes));
  const auto buffer = std::make_unique_for_overwrite<char[]>(capacity);
  auto args = make_args<Calrt_Diag_Report_Args>();
  args.device = device;
  args.buffer = capacity == 0 ? nullptr : buffer.get();
  args.capacity = capacity;
  Failure f = call(c, ext->Diag_Report(&args));
  out.size = args.size;
  if (f.ok() && args.size <= capacity) {
    out.report.assign(buffer.get(), buffer.get() + args.size);
  }
  return f;
}

// ---- Service ------------------------------------------------------------------------

// The held calls run as if they had come one by one (the same handlers, the same errors),
// only without a lane visit and a round trip each.
template <>
Failure run<Batch>(Ctx& c, const Batch::In& in, Batch::Out& out) {
  if (in.calls.size() > kMaxBatchCalls) {
    return {CALRT_INVALID_ARGUMENT, "Batch: " + std::to_string(in.calls.size()) +
                                        " calls, at most " + std::to_string(kMaxBatchCalls)};
  }
  std::vector<Request> requests;
  requests.reserve(in.calls.size());
  for (size_t i = 0; i < in.calls.size(); ++i) {
    const std::string where = "Batch: calls[" + std::to_string(i) + "]: ";
    auto decoded = decode_request_payload(in.calls[i].request);
    if (!decoded) return {CALRT_INVALID_ARGUMENT, where + decoded.error()};
    const Call call = call_of(*decoded);
    const bool held = call == Call::buffer_map || call == Call::buffer_unmap ||
                      call == Call::buffer_set_csr || call == Call::job_destroy;
    const bool last_submit = call == Call::job_submit && i + 1 == in.calls.size();
    if (!held && !last_submit) {
      return {CALRT_INVALID_ARGUMENT,
              where + to_string(call) +
                  " cannot be batched (only Buffer_Map, Buffer_Unmap, Buffer_SetCsr, "
                  "Job_Destroy, then Job_Submit, then Job_Wait of job 0)"};
    }
    requests.push_back(std::move(*decoded));
  }
  c.in_batch = true;
  for (const Request& request : requests) {
    Outcome outcome = dispatch(c, request);
    ++out.ran;
    out.response = std::move(outcome.payload);
    if (outcome.code != CALRT_OK) break;
  }
  c.in_batch = false;
  c.call_name = to_string(Call::batch);
  return {};
}

#undef SIMDEV_GET
#undef SIMDEV_EXT

void log_release_error(const char* what, uint64_t id, const Failure& f) {
  if (!f.ok()) spdlog::debug("session release: {} {}: {}", what, id, f.message);
}

}  // namespace

namespace {

// Calls that act on every session's work, not only the caller's: the control role's
// (PROTOCOL.md, "Security model").
bool device_wide(Call call) {
  return call == Call::device_reset || call == Call::device_set_parallel_mode ||
         call == Call::fault_set_plan;
}

}  // namespace

Outcome dispatch(DispatchContext& context, const Request& request) {
  return std::visit(
      [&](const auto& tagged) {
        using C = typename std::decay_t<decltype(tagged)>::CallType;
        Response<C> response;
        context.call_name = to_string(C::kCall);
        if (device_wide(C::kCall) && !context.control) {
          response.code = CALRT_PERMISSION_DENIED;
          response.message = std::string(context.call_name) +
                             ": acts on every session of the shared device, and this session "
                             "has no control role (the daemon's uid, root, --control-uid, or "
                             "TCP with the token)";
          return Outcome{C::kCall, response.code, encode_response_payload<C>(response)};
        }
        try {
          Failure f = run<C>(context, tagged.in, response.out);
          response.code = f.code;
          response.message = std::move(f.message);
        } catch (const std::exception& e) {
          response = Response<C>{};
          response.code = CALRT_INTERNAL;
          response.message = std::string(to_string(C::kCall)) + ": daemon exception: " + e.what();
        }
        return Outcome{C::kCall, response.code, encode_response_payload<C>(response)};
      },
      request);
}

Outcome refused_outcome(const Request& request, uint32_t code, const std::string& message) {
  return std::visit(
      [&](const auto& tagged) {
        using C = typename std::decay_t<decltype(tagged)>::CallType;
        Response<C> response;
        response.code = code;
        response.message = std::string(to_string(C::kCall)) + ": " + message;
        return Outcome{C::kCall, code, encode_response_payload<C>(response)};
      },
      request);
}

Failure release_session(DispatchContext& c) {
  SessionObjects& objects = *c.objects;
  const CalrtApi* api = c.api;
  // Jobs first: a job owns its buffers and KV until it is final.
  for (const auto& [id, handle] : objects.handles.of_kind(HandleKind::job)) {
    auto cancel = make_args<Calrt_Job_Cancel_Args>();
    cancel.job = static_cast<CalrtJob*>(handle);
    log_release_error("job cancel", id, take_error(api, api->Job_Cancel(&cancel)));
    auto destroy = make_args<Calrt_Job_Destroy_Args>();
    destroy.job = static_cast<CalrtJob*>(handle);
    log_release_error("job destroy", id, take_error(api, api->Job_Destroy(&destroy)));
  }
  for (const auto& [id, handle] : objects.handles.of_kind(HandleKind::kv)) {
    auto args = make_args<Calrt_Kv_Free_Args>();
    args.kv = static_cast<CalrtKv*>(handle);
    log_release_error("KV free", id, take_error(api, api->Kv_Free(&args)));
  }
  for (const auto& [key, mapping] : objects.mappings) {
    auto buffer = objects.handles.find(key.first, HandleKind::buffer, "buffer");
    if (!buffer) continue;
    auto args = make_args<Calrt_Buffer_Unmap_Args>();
    args.buffer = static_cast<CalrtBuffer*>(*buffer);
    args.tensor_index = key.second;
    log_release_error("buffer unmap", key.first, take_error(api, api->Buffer_Unmap(&args)));
  }
  objects.mappings.clear();
  for (const auto& [id, handle] : objects.handles.of_kind(HandleKind::buffer)) {
    auto args = make_args<Calrt_Buffer_Destroy_Args>();
    args.buffer = static_cast<CalrtBuffer*>(handle);
    log_release_error("buffer destroy", id, take_error(api, api->Buffer_Destroy(&args)));
  }
  for (const auto& [id, handle] : objects.handles.of_kind(HandleKind::calbin)) {
    auto args = make_args<Calrt_Calbin_Destroy_Args>();
    args.calbin = static_cast<CalrtCalbin*>(handle);
    log_release_error("calbin destroy", id, take_error(api, api->Calbin_Destroy(&args)));
  }
  objects.handles.clear();
  Failure detached;
  if (objects.attached) {
    objects.attached = false;
    c.host->leave(c.objects);
    c.host->trace().leave(c.host->trace_device(), c.session_id);
    detached = c.host->detach();
  }
  return detached;
}

bool is_wait_call(const Request& request) {
  return std::holds_alternative<Tagged<JobWait>>(request);
}

std::optional<JobWait::In> take_trailing_wait(Request& request) {
  auto* batch = std::get_if<Tagged<Batch>>(&request);
  if (batch == nullptr || batch->in.calls.size() < 2) return std::nullopt;
  std::vector<HeldCall>& calls = batch->in.calls;
  auto wait = decode_request_payload(calls.back().request);
  auto submit = decode_request_payload(calls[calls.size() - 2].request);
  if (!wait || !submit || !std::holds_alternative<Tagged<JobSubmit>>(*submit)) return std::nullopt;
  const auto* tagged = std::get_if<Tagged<JobWait>>(&*wait);
  // Any other wait stays in the batch, which then refuses it, naming it.
  if (tagged == nullptr || tagged->in.job.id != 0) return std::nullopt;
  calls.pop_back();
  return tagged->in;
}

std::optional<WireHandle> submitted_job(const Outcome& batch) {
  auto answer = decode_response_payload<Batch>(batch.payload);
  if (!answer || answer->code != CALRT_OK) return std::nullopt;
  // The last call run answered; a submit's answer decodes only as a submit's.
  auto submit = decode_response_payload<JobSubmit>(answer->out.response);
  if (!submit || submit->code != CALRT_OK || submit->out.job.id == 0) return std::nullopt;
  return submit->out.job;
}

Call call_of(const Request& request) {
  return std::visit(
      [](const auto& tagged) { return std::decay_t<decltype(tagged)>::CallType::kCall; }, request);
}

Call scheduled_as(const Request& request) {
  const auto* batch = std::get_if<Tagged<Batch>>(&request);
  if (batch == nullptr) return call_of(request);
  // A batch ending with a submit is queued as that submit (PROTOCOL.md, "Late joiners").
  if (!batch->in.calls.empty()) {
    const Bytes& last = batch->in.calls.back().request;
    if (last.size() >= 2 && (last[0] | last[1] << 8) == static_cast<int>(Call::job_submit)) {
      return Call::job_submit;
    }
  }
  return Call::batch;
}

}  // namespace simdev::service::server
