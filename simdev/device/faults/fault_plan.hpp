// The fault plan (FAULTS.md): which faults happen where, seeded and declarative, and the
// injector that the device asks at each of its device operations. The injector decides
// only *whether* a fault fires; what the fault does to the device is the device's business
// (device_faults.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "simdev/device/base/random_stream.hpp"
#include "simdev/device/base/sim_time.hpp"
#include "simdev/device/base/status.hpp"

namespace simdev {

enum class FaultKind : uint8_t {
  kDmaH2d,
  kDmaD2h,
  kJobHang,
  kChipHang,
  kEccCorrectable,
  kEccUncorrectable,
  kDeviceLost,
  kFirmwareCrash,
  kD2dLinkDown,
  kThermalThrottle,
  kKvExhaustion,
  kCorruptedOutput,
  kSlowCompletion,
};
inline constexpr size_t kFaultKindCount = 13;

// Where an operation happens: the phase a scenario speaks of.
enum class FaultSite : uint8_t { kConfigure, kPrefill, kDecode, kKvUpdate, kKv };
inline constexpr size_t kFaultSiteCount = 5;

// Which device operation within the site.
enum class FaultPoint : uint8_t {
  kUpload,      // Calbin_Configure's parameter upload
  kInputDma,    // a job's input DMA
  kCompute,     // a job's compute
  kOutputDma,   // a job's output DMA
  kKvAllocate,  // Kv_Allocate
  kKvClear,     // Kv_Clear
};

const char* to_string(FaultKind kind);    // "dma_h2d", ...
const char* to_string(FaultSite site);    // "configure", ...
const char* to_string(FaultPoint point);  // "upload", "input DMA", ...
std::optional<FaultKind> parse_fault_kind(std::string_view name);
std::optional<FaultSite> parse_fault_site(std::string_view name);
// Whether `kind` can happen at `point` (the table of FAULTS.md).
bool can_happen(FaultKind kind, FaultPoint point);
// Whether `kind` can happen anywhere in `site`.
bool can_happen(FaultKind kind, FaultSite site);

struct FaultSpec {
  FaultKind kind = FaultKind::kDmaH2d;
  std::optional<FaultSite> during;  // nullopt: any site
  enum class Trigger : uint8_t { kOp, kJob, kTime, kProbability };
  Trigger trigger = Trigger::kOp;
  uint64_t at_op = 1;            // kOp: 1-based among this fault's eligible operations
  uint64_t at_job = 1;           // kJob: the job serial
  TimePs at_time_ps = 0;         // kTime
  uint32_t probability_ppm = 0;  // kProbability: parts per million, 1..1000000
  bool persistent = false;
  uint32_t chip = 0;
  uint32_t factor = 0;     // 0: the kind's default (parse_fault_plan fills it in)
  TimePs duration_ps = 0;  // 0: the kind's default (parse_fault_plan fills it in)
  uint32_t segment = 1;

  friend bool operator==(const FaultSpec&, const FaultSpec&) = default;
};

// The defaults FAULTS.md gives; fault_factor/fault_duration_ps resolve a spec's 0.
inline constexpr uint32_t kDefaultThrottleFactor = 4;
inline constexpr uint32_t kDefaultSlowFactor = 100;
inline constexpr TimePs kDefaultThrottlePs = 10000 * kPsPerUs;
uint32_t fault_factor(const FaultSpec& spec);
TimePs fault_duration_ps(const FaultSpec& spec);

struct FaultPlanSpec {
  uint64_t seed = 0;
  std::vector<FaultSpec> faults;

  friend bool operator==(const FaultPlanSpec&, const FaultPlanSpec&) = default;
};

// Parses the YAML plan; errors are INVALID_ARGUMENT naming "faults[i].field" and the value.
// `chips` bounds the `chip` field.
Expected<FaultPlanSpec> parse_fault_plan(std::string_view yaml, uint32_t chips);
// The canonical YAML of a plan (flow style, one line): parse_fault_plan(to_yaml(p)) == p.
std::string to_yaml(const FaultPlanSpec& plan);

// One device operation, as the device describes it to the injector.
struct FaultOperation {
  FaultSite site = FaultSite::kConfigure;
  FaultPoint point = FaultPoint::kUpload;
  uint64_t job_serial = 0;  // 0 when not a job's operation
  TimePs now_ps = 0;
};

// A fault that fires at an operation.
struct Injection {
  FaultKind kind = FaultKind::kDmaH2d;
  const FaultSpec* spec = nullptr;  // valid until the plan is replaced
  uint64_t draw = 0;                // from the plan's stream: where to flip bits, etc.
};

// Injection counts of one (kind, site) pair.
struct FaultHitCount {
  FaultKind kind = FaultKind::kDmaH2d;
  FaultSite site = FaultSite::kConfigure;
  uint64_t count = 0;
};

class FaultInjector {
 public:
  FaultInjector() = default;  // injects nothing
  explicit FaultInjector(FaultPlanSpec plan);

  // Every fault of the plan that fires at `op`, in plan order; counts the eligible ones.
  // The plan's stream is drawn only for a probability fault that is still armed (one draw
  // per eligible operation) and once per injection (Injection::draw), in plan order, so a
  // plan on the same sequence of operations always draws the same numbers.
  std::vector<Injection> at(const FaultOperation& op);

  const FaultPlanSpec& plan() const { return plan_; }

 private:
  FaultPlanSpec plan_;
  std::vector<uint64_t> eligible_seen_;  // per fault: eligible operations so far
  std::vector<bool> fired_;              // per fault: has it fired (persistent ones keep firing)
  RandomStream stream_{0, "faults"};
};

}  // namespace simdev
