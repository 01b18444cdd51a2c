// VER: version negotiation. abi/CONFORMANCE.md#ver-version-negotiation
#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "abi/call_table.hpp"
#include "abi/calrt_ext.hpp"
#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

void ver_table_major(ClauseContext& ctx) {
  const CalrtApi* table = ctx.api.table();
  require(table->abi_major == CALRT_ABI_MAJOR,
          fmt::format("table abi_major {}, expected {}", table->abi_major, CALRT_ABI_MAJOR));
  if (ctx.get_api != nullptr) {
    require(ctx.get_api(CALRT_ABI_MAJOR) != nullptr, "CalrtGetApi(CALRT_ABI_MAJOR) returned NULL");
  }
  const calrt::Device device = ctx.open_device();
  const calrt::DeviceStatus status = device.status();
  require(status.abi_major == table->abi_major && status.abi_minor == table->abi_minor &&
              status.abi_patch == table->abi_patch,
          fmt::format("Device_Status reports ABI {}.{}.{}, the table {}.{}.{}", status.abi_major,
                      status.abi_minor, status.abi_patch, table->abi_major, table->abi_minor,
                      table->abi_patch));
}

void ver_wrong_major(ClauseContext& ctx) {
  if (ctx.get_api == nullptr) {
    throw ClauseSkip("no CalrtGetApi entry point for this backend (a table passed directly)");
  }
  for (const uint32_t major : {uint32_t{CALRT_ABI_MAJOR + 1}, uint32_t{UINT32_MAX}}) {
    require(ctx.get_api(major) == nullptr,
            fmt::format("CalrtGetApi({}) returned a table, expected NULL", major));
  }
}

void ver_table_size(ClauseContext& ctx) {
  const CalrtApi* table = ctx.api.table();
  const size_t header = offsetof(CalrtApi, Error_GetCode) + sizeof(table->Error_GetCode);
  require(table->struct_size >= header,
          fmt::format("table struct_size {} ends before Error_GetCode ({})", table->struct_size,
                      header));
  if (table->abi_major == CALRT_ABI_MAJOR && table->abi_minor >= CALRT_ABI_MINOR) {
    require(table->struct_size >= CALRT_API_STRUCT_SIZE,
            fmt::format("table of ABI minor {} has struct_size {}, below CALRT_API_STRUCT_SIZE {}",
                        table->abi_minor, table->struct_size, CALRT_API_STRUCT_SIZE));
  }
}

// True when looking up the entry throws UNIMPLEMENTED.
template <class Lookup>
bool unimplemented(Lookup&& lookup) {
  try {
    lookup();
  } catch (const calrt::Error& error) {
    return error.code() == CALRT_UNIMPLEMENTED;
  }
  return false;
}

void ver_missing_entry(ClauseContext& ctx) {
  const CalrtApi* table = ctx.api.table();
  CalrtApi copy{};
  std::memcpy(&copy, table, std::min(sizeof(copy), table->struct_size));
  copy.struct_size = std::min(sizeof(copy), table->struct_size);
  copy.Kv_Clear = nullptr;
  const calrt::Api nulled(&copy);
  require(unimplemented([&] { (void)CALRT_HPP_ENTRY(nulled, Kv_Clear); }),
          "a NULL Kv_Clear entry was not reported as UNIMPLEMENTED");
  CalrtApi cut = copy;
  cut.struct_size = offsetof(CalrtApi, Kv_Info);
  const calrt::Api shortened(&cut);
  require(unimplemented([&] { (void)CALRT_HPP_ENTRY(shortened, Kv_Info); }),
          "an entry beyond struct_size (Kv_Info) was not reported as UNIMPLEMENTED");
  require(!unimplemented([&] { (void)CALRT_HPP_ENTRY(shortened, Kv_Free); }),
          "an entry within struct_size (Kv_Free) was reported as UNIMPLEMENTED");
}

void ver_smaller_struct(ClauseContext& ctx) {
  for (const size_t size : {size_t{CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE - 1}, size_t{0}}) {
    auto create = args_of<Calrt_Device_Create_Args>();
    create.struct_size = size;
    create.kind = CALRT_DEVICE_SIM;
    const CallOutcome outcome = CONF_CALL(ctx, Device_Create, create);
    if (create.device != nullptr) {
      auto destroy = args_of<Calrt_Device_Destroy_Args>();
      destroy.device = create.device;
      (void)CONF_CALL(ctx, Device_Destroy, destroy);
      throw ClauseFailure(fmt::format("Device_Create with struct_size {} created a device", size));
    }
    expect_code(outcome, CALRT_STRUCT_TOO_SMALL,
                fmt::format("Device_Create with struct_size {}", size));
  }
  Fixture f = ctx.fixture(Setup::ready);
  auto status = args_of<Calrt_Device_Status_Args>();
  status.struct_size -= 1;
  status.device = f.device.get();
  status.abi_major = 0xFFFFFFFFu;
  expect_code(CONF_CALL(ctx, Device_Status, status), CALRT_STRUCT_TOO_SMALL,
              "Device_Status with struct_size - 1");
  require(status.abi_major == 0xFFFFFFFFu, "Device_Status wrote out fields of a too-small struct");
  auto info = args_of<Calrt_Calbin_GetInfo_Args>();
  info.struct_size -= 1;
  info.calbin = f.calbin.get();
  expect_code(CONF_CALL(ctx, Calbin_GetInfo, info), CALRT_STRUCT_TOO_SMALL,
              "Calbin_GetInfo with struct_size - 1");
  require(info.model_count == 0, "Calbin_GetInfo wrote out fields of a too-small struct");
  calrt::Job job = ctx.submit(f, f.prefill);
  auto wait = args_of<Calrt_Job_Wait_Args>();
  wait.struct_size = 0;
  wait.job = job.get();
  wait.timeout_ns = 1;
  expect_code(CONF_CALL(ctx, Job_Wait, wait), CALRT_STRUCT_TOO_SMALL,
              "Job_Wait with struct_size 0");
  job.wait(kClauseWait);

  // Every other entry that takes an args struct, each with valid handles, so that only the
  // size is wrong (tests/runner/conformance/struct_size_coverage_test.cpp checks that this
  // list names every *_ARGS_STRUCT_SIZE macro of calrt.h and calrt_ext.h). The code after the
  // call (the macro's last argument) checks what must not have happened.
#define CONF_SMALL(Field, ...)                                        \
  do {                                                                \
    auto small = args_of<Calrt_##Field##_Args>();                     \
    __VA_ARGS__;                                                      \
    small.struct_size -= 1;                                           \
    expect_code(CONF_CALL(ctx, Field, small), CALRT_STRUCT_TOO_SMALL, \
                #Field " with struct_size - 1");                      \
  } while (0)
  // The same for an entry that creates: no handle may come out in `out`.
#define CONF_SMALL_CREATE(Field, out, ...)                                            \
  do {                                                                                \
    auto small = args_of<Calrt_##Field##_Args>();                                     \
    __VA_ARGS__;                                                                      \
    small.struct_size -= 1;                                                           \
    expect_code(CONF_CALL(ctx, Field, small), CALRT_STRUCT_TOO_SMALL,                 \
                #Field " with struct_size - 1");                                      \
    require(small.out == nullptr, #Field " with struct_size - 1 handed out a " #out); \
  } while (0)
  const std::string model = f.prefill.name();
  CONF_SMALL(Device_ChipStatus, small.device = f.device.get());
  CONF_SMALL(Device_SetParallelMode, small.device = f.device.get());
  CONF_SMALL(Calbin_GetModel, small.calbin = f.calbin.get());
  CONF_SMALL(Calbin_GetTensor, small.calbin = f.calbin.get(); small.model_name = model.c_str();
             small.direction = CALRT_INPUT);
  CONF_SMALL(Calbin_GetCsr, small.calbin = f.calbin.get(); small.model_name = model.c_str());
  CONF_SMALL(Buffer_GetCsr, small.buffer = f.prefill.input.get());
  CONF_SMALL(Buffer_SetCsr, small.buffer = f.prefill.input.get());
  CONF_SMALL(Buffer_Map, small.buffer = f.prefill.output.get());
  CONF_SMALL(Buffer_Unmap, small.buffer = f.prefill.output.get());
  // Job_Status also takes its first version, which ends at end_time_ns: one byte less.
  CONF_SMALL(Job_Status, small.job = job.get();
             small.struct_size = CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, end_time_ns));
  CONF_SMALL(Job_Cancel, small.job = job.get());
  CONF_SMALL(Kv_Allocate, small.calbin = f.calbin.get(); small.capacity_tokens = 1);
  CONF_SMALL(Kv_Info, small.kv = f.kv.get());
  CONF_SMALL(Kv_Clear, small.kv = f.kv.get());
  CONF_SMALL(Kv_Capacity, small.calbin = f.calbin.get());
  // Entries that create: refused, and no handle comes out.
  const std::string path = ctx.options.calbin.string();
  CONF_SMALL_CREATE(Calbin_Create, calbin, small.device = f.device.get();
                    small.path = path.c_str());
  CONF_SMALL_CREATE(Buffer_Create, buffer, small.calbin = f.calbin.get();
                    small.model_name = model.c_str());
  CONF_SMALL_CREATE(Job_Submit, job, small.calbin = f.calbin.get();
                    small.model_name = model.c_str(); small.input = f.prefill.input.get();
                    small.output = f.prefill.output.get());
  // Entries that act or release: refused, and the object is still there afterwards.
  CONF_SMALL(Calbin_Configure, small.calbin = f.calbin.get());
  CONF_SMALL(Device_Reset, small.device = f.device.get(); small.level = CALRT_RESET_JOB_ABORT);
  // Kv_Apply also takes its ABI 0.7 version, which ends at input: one byte less.
  CONF_SMALL(Kv_Apply, small.kv = f.kv.get(); small.input = f.prefill.input.get();
             small.struct_size = CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7);
  CONF_SMALL(Kv_Free, small.kv = f.kv.get());
  CONF_SMALL(Job_Destroy, small.job = job.get());
  CONF_SMALL(Buffer_Destroy, small.buffer = f.prefill.output.get());
  CONF_SMALL(Calbin_Destroy, small.calbin = f.calbin.get());
  CONF_SMALL(Device_Destroy, small.device = f.device.get());
  require(f.kv.info().capacity_tokens == kJobKvTokens, "the KV after Kv_Free with a small struct");
  require(job.status().is_final(), "the job after Job_Destroy with a small struct");
  (void)f.prefill.output.map(0);
  require(f.calbin.info().configured, "the calbin after Calbin_Destroy with a small struct");
  require(f.device.status().chip_count > 0, "the device after Device_Destroy with a small struct");

  // The extensions' entries, for each extension the runtime offers.
#define CONF_SMALL_EXT(Field, Ext, type, size, ...)                                               \
  if (const auto* ext = reinterpret_cast<const Ext*>(calrt::find_extension(ctx.api, type, size)); \
      ext != nullptr && ext->Field != nullptr) {                                                  \
    auto small = args_of<Calrt_##Field##_Args>();                                                 \
    __VA_ARGS__;                                                                                  \
    small.struct_size -= 1;                                                                       \
    expect_code(ctx.take(ext->Field(&small)), CALRT_STRUCT_TOO_SMALL,                             \
                #Field " with struct_size - 1");                                                  \
  }
  CONF_SMALL_EXT(Clock_Get, CalrtClockExtension, CALRT_EXT_CLOCK, CALRT_CLOCK_EXTENSION_STRUCT_SIZE,
                 small.device = f.device.get())
  CONF_SMALL_EXT(Clock_HostSpend, CalrtClockExtension, CALRT_EXT_CLOCK,
                 CALRT_CLOCK_EXTENSION_STRUCT_SIZE, small.device = f.device.get())
  CONF_SMALL_EXT(Trace_Enable, CalrtTraceExtension, CALRT_EXT_TRACE,
                 CALRT_TRACE_EXTENSION_STRUCT_SIZE, small.device = f.device.get())
  CONF_SMALL_EXT(Trace_Read, CalrtTraceExtension, CALRT_EXT_TRACE,
                 CALRT_TRACE_EXTENSION_STRUCT_SIZE, small.device = f.device.get())
  CONF_SMALL_EXT(Fault_SetPlan, CalrtFaultExtension, CALRT_EXT_FAULT,
                 CALRT_FAULT_EXTENSION_STRUCT_SIZE, small.device = f.device.get())
  CONF_SMALL_EXT(Fault_GetHits, CalrtFaultExtension, CALRT_EXT_FAULT,
                 CALRT_FAULT_EXTENSION_STRUCT_SIZE, small.device = f.device.get())
  CONF_SMALL_EXT(Diag_Report, CalrtDiagExtension, CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE,
                 small.device = f.device.get())
  CONF_SMALL_EXT(Diag_StateHash, CalrtDiagExtension, CALRT_EXT_DIAG,
                 CALRT_DIAG_EXTENSION_STRUCT_SIZE, small.device = f.device.get())
  CONF_SMALL_EXT(Probe_Read, CalrtProbeExtension, CALRT_EXT_PROBE,
                 CALRT_PROBE_EXTENSION_STRUCT_SIZE, small.job = job.get())
#undef CONF_SMALL_EXT
#undef CONF_SMALL_CREATE
#undef CONF_SMALL
}

// An args struct followed by bytes the runtime must neither need nor write.
template <class Args>
struct Padded {
  Args args;
  unsigned char tail[64];
  Padded() {
    std::memset(static_cast<void*>(this), 0xA5, sizeof(*this));
    args = args_of<Args>();
    args.struct_size = sizeof(Args) + sizeof(tail);
  }
  bool tail_intact() const {
    for (const unsigned char byte : tail) {
      if (byte != 0xA5) {
        return false;
      }
    }
    return true;
  }
};

void ver_larger_struct(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  Padded<Calrt_Device_Status_Args> status;
  status.args.device = f.device.get();
  expect_code(CONF_CALL(ctx, Device_Status, status.args), CALRT_OK,
              "Device_Status with 64 extra bytes");
  require(status.tail_intact(), "Device_Status wrote past the fields it knows");
  require(status.args.abi_major == CALRT_ABI_MAJOR,
          "Device_Status with a larger struct: abi_major");
  Padded<Calrt_Calbin_GetInfo_Args> info;
  info.args.calbin = f.calbin.get();
  expect_code(CONF_CALL(ctx, Calbin_GetInfo, info.args), CALRT_OK,
              "Calbin_GetInfo with 64 extra bytes");
  require(info.tail_intact(), "Calbin_GetInfo wrote past the fields it knows");
  require(info.args.model_count == f.info.model_count, "Calbin_GetInfo with a larger struct");

  calrt::Job job = ctx.submit(f, f.prefill);
  job.wait(kClauseWait);
  auto old = args_of<Calrt_Job_Status_Args>();
  old.struct_size = offsetof(Calrt_Job_Status_Args, end_time_ns) + sizeof(old.end_time_ns);
  old.job = job.get();
  old.h2d_end_time_ns = 0x5A5A5A5A;
  old.compute_start_time_ns = 0x5A5A5A5A;
  old.compute_end_time_ns = 0x5A5A5A5A;
  expect_code(CONF_CALL(ctx, Job_Status, old), CALRT_OK,
              "Job_Status with the struct ending at end_time_ns");
  require(old.state == CALRT_JOB_COMPLETED, "Job_Status (old size): job not COMPLETED");
  require(old.h2d_end_time_ns == 0x5A5A5A5A && old.compute_start_time_ns == 0x5A5A5A5A &&
              old.compute_end_time_ns == 0x5A5A5A5A,
          "Job_Status wrote the appended profiling fields past the caller's struct_size");
}

// The out fields of one call that differ between a zero-filled and a 0xA5-filled args
// struct: a runtime that skips writing a field (because its value is 0, say) leaves the
// caller's bytes there, which a zero-filled struct hides.
class OutFields {
 public:
  template <class T>
  void operator()(const char* name, const T& zeroed, const T& canaried) {
    bool same = false;
    if constexpr (std::is_same_v<T, const char*>) {
      const char* untouched = nullptr;
      std::memset(static_cast<void*>(&untouched), 0xA5, sizeof untouched);
      // A canary pointer is never dereferenced: it means the field was not written.
      same = canaried != untouched &&
             (zeroed == nullptr || canaried == nullptr ? zeroed == canaried
                                                       : std::strcmp(zeroed, canaried) == 0);
    } else {
      // Compared as bytes: an unwritten enum field holds no enumerator, and loading it as one
      // would be undefined.
      same = std::memcmp(&zeroed, &canaried, sizeof(T)) == 0;
    }
    if (!same) unwritten_.push_back(name);
  }
  const std::vector<std::string>& unwritten() const { return unwritten_; }

 private:
  std::vector<std::string> unwritten_;
};

// Out fields whose value may differ between two calls made one after the other: the device
// clock moves on a paced clock, and over a service while another client works.
bool may_differ(std::string_view call, std::string_view field) {
  return call == "Device_Status" && field == "device_time_ns";
}

// How many elements of an array out field the runtime must write: dims up to the rank.
size_t elements_written(const Calrt_Calbin_GetTensor_Args& args, std::string_view field,
                        size_t extent) {
  return field == "dims" ? std::min<size_t>(args.rank, extent) : extent;
}
template <class Args>
size_t elements_written(const Args&, std::string_view, size_t extent) {
  return extent;
}

// Calls `call` on a zero-filled and a 0xA5-filled `Args`, both given the same in fields by
// `setup` (which sets every in field: the canary fills the rest), and requires every out field
// of the call table to be equal in both.
template <class Args, class Call, class Setup>
void require_outs_written(Call call, Setup setup) {
  using calrt::calls::Dir;
  using calrt::calls::Kind;
  const char* name = calrt::calls::CallInfo<Args>::name;
  Args zeroed = args_of<Args>();
  Args canaried;
  std::memset(static_cast<void*>(&canaried), 0xA5, sizeof canaried);
  canaried.struct_size = zeroed.struct_size;
  canaried.extension = nullptr;
  setup(zeroed);
  setup(canaried);
  expect_code(call(zeroed), CALRT_OK, std::string(name) + " (zero-filled args)");
  expect_code(call(canaried), CALRT_OK, std::string(name) + " (0xA5-filled args)");
  OutFields out;
  calrt::calls::for_each_field<Args>([&](const auto& field) {
    using F = std::remove_cvref_t<decltype(field)>;
    if constexpr (F::dir == Dir::out) {
      if (may_differ(name, field.name)) {
        return;
      }
      const auto& z = F::get(zeroed);
      const auto& c = F::get(canaried);
      if constexpr (F::kind == Kind::array) {
        const size_t n = elements_written(zeroed, field.name, std::extent_v<typename F::Type>);
        for (size_t i = 0; i < n; ++i) {
          out((std::string(field.name) + "[]").c_str(), z[i], c[i]);
        }
      } else {
        out(field.name, z, c);
      }
    }
  });
  require(out.unwritten().empty(),
          fmt::format("{}: out fields {} differ between a zero-filled and a 0xA5-filled args "
                      "struct: left unwritten",
                      name, fmt::join(out.unwritten(), ", ")));
}

#define CONF_OUTS(Field, setup)               \
  require_outs_written<Calrt_##Field##_Args>( \
      [&](Calrt_##Field##_Args& a) { return CONF_CALL(ctx, Field, a); }, setup)

void ver_outs_written(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "Job_Wait: NOT_READY");
  const std::string model = f.prefill.name();
  CONF_OUTS(Device_Status, [&](auto& a) { a.device = f.device.get(); });
  CONF_OUTS(Device_ChipStatus, [&](auto& a) {
    a.device = f.device.get();
    a.chip = 0;
  });
  CONF_OUTS(Calbin_GetInfo, [&](auto& a) { a.calbin = f.calbin.get(); });
  CONF_OUTS(Calbin_GetModel, [&](auto& a) {
    a.calbin = f.calbin.get();
    a.model_index = 0;
  });
  CONF_OUTS(Calbin_GetTensor, [&](auto& a) {
    a.calbin = f.calbin.get();
    a.model_name = model.c_str();
    a.direction = CALRT_INPUT;
    a.index = 0;
  });
  CONF_OUTS(Calbin_GetCsr, [&](auto& a) {
    a.calbin = f.calbin.get();
    a.model_name = model.c_str();
    a.index = 0;
  });
  // A fresh input buffer's CSRs are 0: the value a skipped write hides best.
  const calrt::Buffer fresh = calrt::Buffer::create(f.calbin, model, calrt::Direction::input);
  CONF_OUTS(Buffer_GetCsr, [&](auto& a) {
    a.buffer = fresh.get();
    a.csr_index = 0;
  });
  CONF_OUTS(Job_Wait, [&](auto& a) {
    a.job = job.get();
    a.timeout_ns = 1;
  });
  CONF_OUTS(Job_Status, [&](auto& a) { a.job = job.get(); });
  // A KV that no job has written: its fill level is 0.
  const calrt::Kv empty = calrt::Kv::allocate(f.calbin, 8);
  CONF_OUTS(Kv_Info, [&](auto& a) { a.kv = empty.get(); });
  CONF_OUTS(Kv_Capacity, [&](auto& a) { a.calbin = f.calbin.get(); });
}
#undef CONF_OUTS

}  // namespace

std::vector<Clause> clauses_ver() {
  return {
      {"VER.1", "VER", "table of the current major", ver_table_major},
      {"VER.2", "VER", "wrong major is refused", ver_wrong_major},
      {"VER.3", "VER", "table struct_size", ver_table_size},
      {"VER.4", "VER", "missing entry is UNIMPLEMENTED", ver_missing_entry},
      {"VER.5", "VER", "smaller args struct_size", ver_smaller_struct},
      {"VER.6", "VER", "larger args struct_size", ver_larger_struct},
      {"VER.7", "VER", "out fields are written", ver_outs_written},
  };
}

}  // namespace runner
