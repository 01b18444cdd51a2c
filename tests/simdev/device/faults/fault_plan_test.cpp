// The fault plan (simdev/device/FAULTS.md): names, the kind/site table, YAML parsing with
// every error path, the canonical to_yaml round trip, and the injector's triggers,
// eligibility counting and deterministic draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "simdev/device/base/random_stream.hpp"
#include "simdev/device/faults/fault_plan.hpp"
#include "tests/simdev/device/text_match.hpp"

namespace simdev {
namespace {

constexpr uint32_t kChips = 2;

FaultPlanSpec parse_ok(const std::string& yaml) {
  auto plan = parse_fault_plan(yaml, kChips);
  EXPECT_TRUE(plan) << yaml << ": " << plan.error().message;
  return plan ? *plan : FaultPlanSpec{};
}

FaultOperation op(FaultSite site, FaultPoint point, uint64_t job = 0, TimePs now = 0) {
  return FaultOperation{site, point, job, now};
}

// ---- names and the table ------------------------------------------------------------------

TEST(FaultNames, EveryKindAndSiteRoundTrips) {
  const std::vector<std::string> kinds = {
      "dma_h2d",         "dma_d2h",           "job_hang",      "chip_hang",
      "ecc_correctable", "ecc_uncorrectable", "device_lost",   "firmware_crash",
      "d2d_link_down",   "thermal_throttle",  "kv_exhaustion", "corrupted_output",
      "slow_completion"};
  ASSERT_EQ(kinds.size(), kFaultKindCount);
  for (size_t i = 0; i < kinds.size(); ++i) {
    const auto kind = static_cast<FaultKind>(i);
    EXPECT_EQ(to_string(kind), kinds[i]);
    EXPECT_EQ(parse_fault_kind(kinds[i]), kind);
  }
  const std::vector<std::string> sites = {"configure", "prefill", "decode", "kv_update", "kv"};
  ASSERT_EQ(sites.size(), kFaultSiteCount);
  for (size_t i = 0; i < sites.size(); ++i) {
    EXPECT_EQ(to_string(static_cast<FaultSite>(i)), sites[i]);
    EXPECT_EQ(parse_fault_site(sites[i]), static_cast<FaultSite>(i));
  }
  EXPECT_FALSE(parse_fault_kind("DMA_H2D"));  // names are exact
  EXPECT_FALSE(parse_fault_kind(""));
  EXPECT_FALSE(parse_fault_site("any"));  // `any` is the plan's word for "no site"
  EXPECT_STREQ(to_string(static_cast<FaultKind>(200)), "?");
}

// The sites column of FAULTS.md's table, written out by hand.
TEST(FaultTable, KindsHappenExactlyAtTheirDocumentedSites) {
  using K = FaultKind;
  using S = FaultSite;
  const S kC = S::kConfigure, kP = S::kPrefill, kD = S::kDecode, kU = S::kKvUpdate, kK = S::kKv;
  const std::vector<std::pair<K, std::vector<S>>> table = {
      {K::kDmaH2d, {kC, kP, kD, kU}},
      {K::kDmaD2h, {kP, kD, kU}},
      {K::kJobHang, {kC, kP, kD, kU}},
      {K::kChipHang, {kP, kD, kU}},
      {K::kEccCorrectable, {kC, kP, kD, kU, kK}},
      {K::kEccUncorrectable, {kC, kP, kD, kU, kK}},
      {K::kDeviceLost, {kC, kP, kD, kU, kK}},
      {K::kFirmwareCrash, {kC, kP, kD, kU, kK}},
      {K::kD2dLinkDown, {kP, kD, kU}},
      {K::kThermalThrottle, {kP, kD, kU}},
      {K::kKvExhaustion, {kK}},
      {K::kCorruptedOutput, {kP, kD, kU}},
      {K::kSlowCompletion, {kC, kP, kD, kU}},
  };
  ASSERT_EQ(table.size(), kFaultKindCount);
  size_t pairs = 0;
  for (const auto& [kind, sites] : table) {
    for (size_t s = 0; s < kFaultSiteCount; ++s) {
      const auto site = static_cast<S>(s);
      const bool listed = std::find(sites.begin(), sites.end(), site) != sites.end();
      EXPECT_EQ(can_happen(kind, site), listed) << to_string(kind) << " at " << to_string(site);
    }
    pairs += sites.size();
  }
  EXPECT_EQ(pairs, 48u);
}

TEST(FaultTable, OperationsWithinASite) {
  // The operation column: which step of a job or call each kind can hit.
  EXPECT_TRUE(can_happen(FaultKind::kDmaH2d, FaultPoint::kInputDma));
  EXPECT_TRUE(can_happen(FaultKind::kDmaH2d, FaultPoint::kUpload));
  EXPECT_FALSE(can_happen(FaultKind::kDmaH2d, FaultPoint::kOutputDma));
  EXPECT_FALSE(can_happen(FaultKind::kDmaH2d, FaultPoint::kCompute));
  EXPECT_TRUE(can_happen(FaultKind::kDmaD2h, FaultPoint::kOutputDma));
  EXPECT_FALSE(can_happen(FaultKind::kDmaD2h, FaultPoint::kInputDma));
  EXPECT_TRUE(can_happen(FaultKind::kKvExhaustion, FaultPoint::kKvAllocate));
  EXPECT_FALSE(can_happen(FaultKind::kKvExhaustion, FaultPoint::kKvClear));
  EXPECT_TRUE(can_happen(FaultKind::kCorruptedOutput, FaultPoint::kOutputDma));
  EXPECT_FALSE(can_happen(FaultKind::kCorruptedOutput, FaultPoint::kCompute));
  EXPECT_TRUE(can_happen(FaultKind::kEccUncorrectable, FaultPoint::kKvClear));
  EXPECT_FALSE(can_happen(FaultKind::kEccUncorrectable, FaultPoint::kInputDma));
  for (FaultPoint point : {FaultPoint::kUpload, FaultPoint::kInputDma, FaultPoint::kCompute,
                           FaultPoint::kOutputDma, FaultPoint::kKvAllocate, FaultPoint::kKvClear}) {
    EXPECT_TRUE(can_happen(FaultKind::kDeviceLost, point)) << to_string(point);
    EXPECT_TRUE(can_happen(FaultKind::kEccCorrectable, point)) << to_string(point);
  }
  for (FaultKind kind :
       {FaultKind::kChipHang, FaultKind::kD2dLinkDown, FaultKind::kThermalThrottle}) {
    EXPECT_TRUE(can_happen(kind, FaultPoint::kCompute));
    EXPECT_FALSE(can_happen(kind, FaultPoint::kUpload));
  }
}

// ---- parsing --------------------------------------------------------------------------------

TEST(FaultPlanParse, EveryFieldAndTheDefaults) {
  const FaultPlanSpec plan = parse_ok(R"(
seed: 7
faults:
  - kind: dma_h2d
    during: prefill
    at_op: 2
  - kind: chip_hang
    at_job: 3
    chip: 1
    segment: 4
    persistent: true
  - kind: thermal_throttle
    at_time_us: 1500
  - kind: slow_completion
    during: any
    probability: 0.25
    factor: 9
  - kind: thermal_throttle
    at_op: 1
    factor: 2
    duration_us: 30
)");
  EXPECT_EQ(plan.seed, 7u);
  ASSERT_EQ(plan.faults.size(), 5u);
  const FaultSpec& dma = plan.faults[0];
  EXPECT_EQ(dma.kind, FaultKind::kDmaH2d);
  EXPECT_EQ(dma.during, FaultSite::kPrefill);
  EXPECT_EQ(dma.trigger, FaultSpec::Trigger::kOp);
  EXPECT_EQ(dma.at_op, 2u);
  EXPECT_FALSE(dma.persistent);
  const FaultSpec& hang = plan.faults[1];
  EXPECT_EQ(hang.trigger, FaultSpec::Trigger::kJob);
  EXPECT_EQ(hang.at_job, 3u);
  EXPECT_EQ(hang.chip, 1u);
  EXPECT_EQ(hang.segment, 4u);
  EXPECT_TRUE(hang.persistent);
  EXPECT_FALSE(hang.during);
  const FaultSpec& hot = plan.faults[2];
  EXPECT_EQ(hot.trigger, FaultSpec::Trigger::kTime);
  EXPECT_EQ(hot.at_time_ps, 1500 * kPsPerUs);
  EXPECT_EQ(hot.chip, 0u);                    // default chip
  EXPECT_EQ(hot.factor, 4u);                  // FAULTS.md: thermal_throttle default 4
  EXPECT_EQ(hot.duration_ps, 10 * kPsPerMs);  // default 10000 us
  const FaultSpec& slow = plan.faults[3];
  EXPECT_FALSE(slow.during);  // `any` is no restriction
  EXPECT_EQ(slow.trigger, FaultSpec::Trigger::kProbability);
  EXPECT_EQ(slow.probability_ppm, 250000u);
  EXPECT_EQ(slow.factor, 9u);
  EXPECT_EQ(plan.faults[4].factor, 2u);
  EXPECT_EQ(plan.faults[4].duration_ps, 30 * kPsPerUs);
  // slow_completion's own default is 100; segment defaults to 1.
  EXPECT_EQ(parse_ok("faults: [{kind: slow_completion, at_op: 1}]").faults[0].factor, 100u);
  EXPECT_EQ(parse_ok("faults: [{kind: d2d_link_down, at_op: 1}]").faults[0].segment, 1u);
}

TEST(FaultPlanParse, EmptyPlansInjectNothing) {
  EXPECT_TRUE(parse_ok("").faults.empty());
  EXPECT_TRUE(parse_ok("faults: []").faults.empty());
  EXPECT_TRUE(parse_ok("faults:").faults.empty());
  EXPECT_EQ(parse_ok("seed: 3").seed, 3u);
  EXPECT_EQ(parse_ok("{}").seed, 0u);
}

// Measured before the YAML parser sees it: a plan can come from another client of a shared
// device, and 4 MiB of '[' cost the parser about 1 GB.
TEST(FaultPlanParse, OversizedAndDeeplyNestedPlansAreRefusedBeforeParsing) {
  const std::string huge = "faults: []\n#" + std::string(size_t{1} << 20, 'x');
  auto too_big = parse_fault_plan(huge, kChips);
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(too_big.error().message.find("more than the limit of 1048576"), std::string::npos)
      << too_big.error().message;

  const std::string deep = "faults: " + std::string(33, '[') + std::string(33, ']');
  auto too_deep = parse_fault_plan(deep, kChips);
  ASSERT_FALSE(too_deep);
  EXPECT_NE(too_deep.error().message.find("nested deeper than 32 at byte 40"), std::string::npos)
      << too_deep.error().message;
  auto flood = parse_fault_plan(std::string(size_t{4} << 20, '['), kChips);
  ASSERT_FALSE(flood);

  // Brackets in quotes and comments are text, and a plan within both bounds parses.
  const std::string brackets = std::string(40, '[');
  parse_ok("seed: 7  # " + brackets + "\nfaults: []");
  for (const std::string& quoted : {"'" + brackets + "'", "\"\\\"" + brackets + "\""}) {
    // Refused by the reader (no such key), not by the depth bound.
    auto read = parse_fault_plan("seed: 7\nnote: " + quoted + "\nfaults: []", kChips);
    ASSERT_FALSE(read) << quoted;
    EXPECT_NE(read.error().message.find("unknown key"), std::string::npos) << read.error().message;
  }
  const std::string plan = "faults: [{kind: job_hang, at_job: 1}]";
  EXPECT_EQ(
      parse_ok(plan + "\n#" + std::string((size_t{1} << 20) - plan.size() - 2, 'x')).faults.size(),
      1u);
}

struct BadPlan {
  const char* yaml;
  std::vector<std::string> mentions;  // the field and the value the message must name
};

TEST(FaultPlanParse, EveryErrorNamesTheFieldAndTheValue) {
  const std::vector<BadPlan> cases = {
      {"faults: [", {"YAML syntax error", "line"}},
      {"- kind: dma_h2d", {"mapping", "a sequence"}},
      {"seedling: 3", {"seedling", "\"3\""}},
      {"seed: 3\nseed: 4", {"seed", "repeated", "\"4\""}},
      {"seed: -1", {"seed", "\"-1\""}},
      {"seed: 99999999999999999999", {"seed", "99999999999999999999"}},
      {"faults: 3", {"faults", "\"3\"", "sequence"}},
      {"faults: [3]", {"faults[0]", "\"3\"", "mapping"}},
      {"faults: [{at_op: 1}]", {"faults[0].kind", "missing"}},
      {"faults: [{kind: dma, at_op: 1}]", {"faults[0].kind", "\"dma\"", "dma_h2d"}},
      {"faults: [{kind: [a], at_op: 1}]", {"faults[0].kind", "a sequence"}},
      {"faults: [{kind: dma_h2d, at_op: 1, colour: red}]", {"faults[0].colour", "\"red\""}},
      {"faults: [{kind: dma_h2d, at_op: 1, at_op: 2}]", {"faults[0].at_op", "repeated", "\"2\""}},
      {"faults: [{kind: dma_h2d}]", {"faults[0]", "no trigger"}},
      {"faults: [{kind: dma_h2d, at_op: 1, at_job: 2}]", {"faults[0].at_job", "second trigger"}},
      {"faults: [{kind: dma_h2d, probability: 0.5, at_time_us: 9}]",
       {"faults[0].at_time_us", "second trigger"}},
      {"faults: [{kind: dma_h2d, during: moon, at_op: 1}]", {"faults[0].during", "\"moon\""}},
      {"faults: [{kind: kv_exhaustion, during: prefill, at_op: 1}]",
       {"faults[0].during", "kv_exhaustion", "prefill", "its sites: kv"}},
      {"faults: [{kind: dma_d2h, during: configure, at_op: 1}]",
       {"faults[0].during", "dma_d2h", "configure"}},
      {"faults: [{kind: corrupted_output, during: kv, at_op: 1}]", {"faults[0].during", "kv"}},
      {"faults: [{kind: chip_hang, chip: 2, at_op: 1}]", {"faults[0].chip", "2", "[0, 1]"}},
      {"faults: [{kind: dma_h2d, chip: 0, at_op: 1}]",
       {"faults[0].chip", "does not apply", "dma_h2d", "\"0\""}},
      {"faults: [{kind: dma_h2d, at_op: 1, factor: 2}]", {"faults[0].factor", "does not apply"}},
      {"faults: [{kind: slow_completion, at_op: 1, duration_us: 5}]",
       {"faults[0].duration_us", "does not apply"}},
      {"faults: [{kind: ecc_correctable, at_op: 1, segment: 5}]",
       {"faults[0].segment", "does not apply"}},
      {"faults: [{kind: slow_completion, at_op: 1, factor: 0}]", {"faults[0].factor", "0"}},
      {"faults: [{kind: slow_completion, at_op: 1, factor: 1000001}]",
       {"faults[0].factor", "1000001"}},
      {"faults: [{kind: thermal_throttle, at_op: 1, duration_us: 0}]",
       {"faults[0].duration_us", "0"}},
      {"faults: [{kind: chip_hang, at_op: 1, segment: -1}]", {"faults[0].segment", "\"-1\""}},
      {"faults: [{kind: dma_h2d, at_op: 0}]", {"faults[0].at_op", "0"}},
      {"faults: [{kind: dma_h2d, at_op: -1}]", {"faults[0].at_op", "\"-1\""}},
      {"faults: [{kind: dma_h2d, at_op: 1.5}]", {"faults[0].at_op", "\"1.5\""}},
      {"faults: [{kind: dma_h2d, at_job: 0}]", {"faults[0].at_job", "0"}},
      {"faults: [{kind: dma_h2d, at_job: two}]", {"faults[0].at_job", "\"two\""}},
      {"faults: [{kind: dma_h2d, at_time_us: 18446744073709552}]",
       {"faults[0].at_time_us", "18446744073709552"}},
      {"faults: [{kind: dma_h2d, probability: 0}]", {"faults[0].probability", "0", "(0, 1]"}},
      {"faults: [{kind: dma_h2d, probability: 1.5}]", {"faults[0].probability", "1.5"}},
      {"faults: [{kind: dma_h2d, probability: -0.5}]", {"faults[0].probability", "-0.5"}},
      {"faults: [{kind: dma_h2d, probability: nan}]", {"faults[0].probability", "nan"}},
      {"faults: [{kind: dma_h2d, probability: often}]", {"faults[0].probability", "\"often\""}},
      {"faults: [{kind: dma_h2d, probability: 0.0000001}]",
       {"faults[0].probability", "0.0000001", "resolution"}},
      {"faults: [{kind: dma_h2d, at_op: 1, persistent: maybe}]",
       {"faults[0].persistent", "\"maybe\""}},
      {"faults: [{kind: dma_h2d, at_op: 1}, {kind: job_hang, during: kv, at_op: 1}]",
       {"faults[1].during", "job_hang", "kv"}},
  };
  for (const BadPlan& bad : cases) {
    auto plan = parse_fault_plan(bad.yaml, kChips);
    ASSERT_FALSE(plan) << bad.yaml;
    EXPECT_EQ(plan.error().code, CALRT_INVALID_ARGUMENT) << bad.yaml;
    EXPECT_TRUE(contains(plan.error().message, "fault plan")) << plan.error().message;
    for (const std::string& part : bad.mentions) {
      EXPECT_TRUE(contains(plan.error().message, part))
          << bad.yaml << ": \"" << plan.error().message << "\" lacks \"" << part << "\"";
    }
  }
}

TEST(FaultPlanParse, ChipBoundFollowsTheDevice) {
  EXPECT_TRUE(parse_fault_plan("faults: [{kind: chip_hang, chip: 3, at_op: 1}]", 4));
  EXPECT_FALSE(parse_fault_plan("faults: [{kind: chip_hang, chip: 1, at_op: 1}]", 1));
  auto none = parse_fault_plan("faults: [{kind: chip_hang, chip: 0, at_op: 1}]", 0);
  ASSERT_FALSE(none);
  EXPECT_TRUE(contains(none.error().message, "faults[0].chip")) << none.error().message;
}

// ---- to_yaml --------------------------------------------------------------------------------

TEST(FaultPlanYaml, CanonicalOneLineFlowStyle) {
  FaultPlanSpec plan;
  plan.seed = 7;
  FaultSpec dma;
  dma.kind = FaultKind::kDmaH2d;
  dma.during = FaultSite::kPrefill;
  dma.at_op = 2;
  plan.faults.push_back(dma);
  FaultSpec hot;
  hot.kind = FaultKind::kThermalThrottle;
  hot.trigger = FaultSpec::Trigger::kProbability;
  hot.probability_ppm = 250000;
  hot.persistent = true;
  hot.chip = 1;
  hot.factor = 3;
  hot.duration_ps = 40 * kPsPerUs;
  plan.faults.push_back(hot);
  EXPECT_EQ(to_yaml(plan),
            "{seed: 7, faults: [{kind: dma_h2d, during: prefill, at_op: 2}, {kind: "
            "thermal_throttle, probability: 0.25, persistent: true, chip: 1, factor: 3, "
            "duration_us: 40}]}");
  EXPECT_EQ(to_yaml(FaultPlanSpec{}), "{seed: 0, faults: []}");
}

TEST(FaultPlanYaml, RoundTripsEveryKindAndTrigger) {
  FaultPlanSpec plan;
  plan.seed = 18446744073709551615u;
  const std::vector<FaultSpec::Trigger> triggers = {
      FaultSpec::Trigger::kOp, FaultSpec::Trigger::kJob, FaultSpec::Trigger::kTime,
      FaultSpec::Trigger::kProbability};
  for (size_t k = 0; k < kFaultKindCount; ++k) {
    FaultSpec f;
    f.kind = static_cast<FaultKind>(k);
    f.trigger = triggers[k % triggers.size()];
    f.at_op = 3 + k;
    f.at_job = 5 + k;
    f.at_time_ps = (100 + k) * kPsPerUs;
    f.probability_ppm = k % 2 == 0 ? 1 : 1000000;
    f.persistent = k % 3 == 0;
    for (size_t s = 0; s < kFaultSiteCount; ++s) {
      if (k % 2 == 1 && can_happen(f.kind, static_cast<FaultSite>(s))) {
        f.during = static_cast<FaultSite>(s);
      }
    }
    plan.faults.push_back(f);
  }
  // parse_fault_plan fills in the kinds' defaults, and so must a plan to compare with.
  auto parsed = parse_fault_plan(to_yaml(plan), kChips);
  ASSERT_TRUE(parsed) << to_yaml(plan) << ": " << parsed.error().message;
  ASSERT_EQ(parsed->faults.size(), plan.faults.size());
  for (size_t i = 0; i < plan.faults.size(); ++i) {
    FaultSpec& f = plan.faults[i];
    // Fields the kind ignores are not written: the parse leaves them at their defaults.
    const FaultSpec defaults;
    f.at_op = f.trigger == FaultSpec::Trigger::kOp ? f.at_op : defaults.at_op;
    f.at_job = f.trigger == FaultSpec::Trigger::kJob ? f.at_job : defaults.at_job;
    f.at_time_ps = f.trigger == FaultSpec::Trigger::kTime ? f.at_time_ps : defaults.at_time_ps;
    f.probability_ppm = f.trigger == FaultSpec::Trigger::kProbability ? f.probability_ppm : 0;
    if (f.kind == FaultKind::kThermalThrottle) {
      f.factor = 4;
      f.duration_ps = 10 * kPsPerMs;
    }
    if (f.kind == FaultKind::kSlowCompletion) {
      f.factor = 100;
    }
    EXPECT_EQ(parsed->faults[i], f) << i << ": " << to_yaml(plan);
  }
  EXPECT_EQ(parsed->seed, plan.seed);
  // And a parsed plan is a fixed point.
  EXPECT_EQ(parse_fault_plan(to_yaml(*parsed), kChips).value(), *parsed);
}

// ---- the injector ---------------------------------------------------------------------------

TEST(FaultInjector, DefaultInjectsNothing) {
  FaultInjector none;
  EXPECT_TRUE(none.at(op(FaultSite::kPrefill, FaultPoint::kCompute, 1)).empty());
}

TEST(FaultInjector, AtOpCountsOnlyEligibleOperations) {
  // dma_h2d is eligible at uploads and input DMAs; compute and output DMA do not count.
  FaultInjector faults(parse_ok("faults: [{kind: dma_h2d, at_op: 3}]"));
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kInputDma, 1)).empty());   // 1
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kCompute, 1)).empty());    // -
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kOutputDma, 1)).empty());  // -
  EXPECT_TRUE(faults.at(op(FaultSite::kKv, FaultPoint::kKvAllocate)).empty());         // -
  EXPECT_TRUE(faults.at(op(FaultSite::kConfigure, FaultPoint::kUpload)).empty());      // 2
  const auto fired = faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, 2));      // 3
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].kind, FaultKind::kDmaH2d);
  EXPECT_EQ(fired[0].spec, &faults.plan().faults[0]);
  // One-shot: spent.
  EXPECT_TRUE(faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, 3)).empty());
}

TEST(FaultInjector, DuringRestrictsTheSiteAndItsCount) {
  FaultInjector faults(parse_ok("faults: [{kind: dma_h2d, during: decode, at_op: 2}]"));
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kInputDma, 1)).empty());
  EXPECT_TRUE(faults.at(op(FaultSite::kConfigure, FaultPoint::kUpload)).empty());
  EXPECT_TRUE(faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, 2)).empty());  // 1st
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kInputDma, 3)).empty());
  EXPECT_EQ(faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, 4)).size(), 1u);  // 2nd
}

TEST(FaultInjector, AtJobFiresAtThatJobsFirstEligibleOperation) {
  FaultInjector faults(parse_ok("faults: [{kind: ecc_correctable, at_job: 3}]"));
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kInputDma, 2)).empty());
  EXPECT_TRUE(faults.at(op(FaultSite::kKv, FaultPoint::kKvAllocate, 0)).empty());
  EXPECT_EQ(faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, 3)).size(), 1u);
  EXPECT_TRUE(faults.at(op(FaultSite::kDecode, FaultPoint::kCompute, 3)).empty());
  EXPECT_TRUE(faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, 4)).empty());
}

TEST(FaultInjector, AtTimeFiresAtTheFirstEligibleOperationFromThen) {
  FaultInjector faults(parse_ok("faults: [{kind: slow_completion, at_time_us: 5}]"));
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kCompute, 1, 4 * kPsPerUs)).empty());
  // Not eligible (an output DMA) although it is time: does not consume the trigger.
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kOutputDma, 1, 6 * kPsPerUs)).empty());
  EXPECT_EQ(faults.at(op(FaultSite::kConfigure, FaultPoint::kUpload, 0, 7 * kPsPerUs)).size(), 1u);
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kCompute, 2, 8 * kPsPerUs)).empty());
}

TEST(FaultInjector, PersistentKeepsFiringAtEveryEligibleOperation) {
  FaultInjector faults(parse_ok("faults: [{kind: dma_d2h, at_op: 2, persistent: true}]"));
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kOutputDma, 1)).empty());
  for (uint64_t job = 2; job < 6; ++job) {
    EXPECT_TRUE(faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, job)).empty());
    EXPECT_EQ(faults.at(op(FaultSite::kDecode, FaultPoint::kOutputDma, job)).size(), 1u) << job;
  }
}

TEST(FaultInjector, SeveralFaultsFireAtOneOperationInPlanOrder) {
  FaultInjector faults(
      parse_ok("faults: [{kind: thermal_throttle, at_op: 1}, {kind: dma_h2d, at_op: 1}, "
               "{kind: ecc_correctable, at_op: 1}]"));
  const auto fired = faults.at(op(FaultSite::kPrefill, FaultPoint::kCompute, 1));
  ASSERT_EQ(fired.size(), 2u);  // dma_h2d cannot happen at compute
  EXPECT_EQ(fired[0].kind, FaultKind::kThermalThrottle);
  EXPECT_EQ(fired[1].kind, FaultKind::kEccCorrectable);
  EXPECT_EQ(fired[1].spec, &faults.plan().faults[2]);
}

// The stream is RandomStream(seed, "faults"), drawn once per injection and once per eligible
// operation of a still-armed probability fault, in plan order (FAULTS.md).
TEST(FaultInjector, DrawsComeFromThePlansStreamOnlyWhenNeeded) {
  FaultInjector faults(parse_ok("seed: 11\nfaults: [{kind: slow_completion, at_op: 2}]"));
  RandomStream expected(11, "faults");
  EXPECT_TRUE(faults.at(op(FaultSite::kPrefill, FaultPoint::kCompute, 1)).empty());  // no draw
  const auto fired = faults.at(op(FaultSite::kPrefill, FaultPoint::kCompute, 2));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].draw, expected.next());

  // P = 1: the first eligible operation draws its chance, then the injection's value.
  FaultInjector certain(parse_ok("seed: 11\nfaults: [{kind: dma_h2d, probability: 1}]"));
  RandomStream again(11, "faults");
  const auto now = certain.at(op(FaultSite::kPrefill, FaultPoint::kInputDma, 1));
  ASSERT_EQ(now.size(), 1u);
  (void)again.next();  // the chance
  EXPECT_EQ(now[0].draw, again.next());
  // One-shot and spent: no more draws, no more injections.
  EXPECT_TRUE(certain.at(op(FaultSite::kPrefill, FaultPoint::kInputDma, 2)).empty());
}

TEST(FaultInjector, ProbabilityFiresAtTheRateItSays) {
  // The first firing of a P = 1/4 fault is geometric with mean 4 eligible operations.
  uint64_t total = 0;
  constexpr uint64_t kSeeds = 4000;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    FaultInjector faults(parse_ok("seed: " + std::to_string(seed) +
                                  "\nfaults: [{kind: dma_h2d, probability: 0.25}]"));
    for (uint64_t n = 1; n < 1000; ++n) {
      if (!faults.at(op(FaultSite::kDecode, FaultPoint::kInputDma, n)).empty()) {
        total += n;
        break;
      }
    }
  }
  const double mean = static_cast<double>(total) / kSeeds;
  EXPECT_GT(mean, 3.8);
  EXPECT_LT(mean, 4.2);

  // Persistent: from the first success on it fires at every eligible operation.
  FaultInjector sticky(
      parse_ok("seed: 5\nfaults: [{kind: dma_h2d, probability: 0.25, "
               "persistent: true}]"));
  bool fired = false;
  for (uint64_t n = 1; n < 200; ++n) {
    const bool now = !sticky.at(op(FaultSite::kDecode, FaultPoint::kInputDma, n)).empty();
    EXPECT_TRUE(!fired || now) << n;
    fired = fired || now;
  }
  EXPECT_TRUE(fired);
}

TEST(FaultInjector, SamePlanSameOperationsSameInjections) {
  const std::string yaml =
      "seed: 42\nfaults: [{kind: ecc_correctable, probability: 0.3, persistent: true}, "
      "{kind: dma_h2d, probability: 0.1}, {kind: corrupted_output, at_op: 4}]";
  const auto run = [&](const std::string& plan) {
    FaultInjector faults(parse_ok(plan));
    std::vector<std::pair<int, uint64_t>> seen;
    for (uint64_t job = 1; job <= 30; ++job) {
      for (FaultPoint point :
           {FaultPoint::kInputDma, FaultPoint::kCompute, FaultPoint::kOutputDma}) {
        for (const Injection& i : faults.at(op(FaultSite::kDecode, point, job))) {
          seen.emplace_back(static_cast<int>(i.kind), i.draw);
        }
      }
    }
    return seen;
  };
  const auto first = run(yaml);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(run(yaml), first);
  // Another seed gives other draws.
  auto other = yaml;
  other.replace(other.find("42"), 2, "43");
  EXPECT_NE(run(other), first);
}

}  // namespace
}  // namespace simdev
