// The host's share of one decode step on the reference model's logits row (Qwen3-30B-A3B:
// vocab 151936, batch 1, BF16, tiled with tile_d0 16), beside a plain memcpy of the row's
// bytes: D2H landing, BF16 -> FP32 through the runner's own read_row_f32_into, greedy
// (argmax) and top-k, as separate passes and fused into one (runner::read_row_pick). Every figure
// is meant to be read against BM_Memcpy; scripts/bench.sh prints the ratio.
//
// The optimised results are checked against plain reference implementations (written here
// the obvious way) before anything is timed and again after each benchmark, on the timed data
// and on adversarial rows (ties, NaNs, -inf, a strided tiled row); any mismatch makes the
// binary exit 1, so a faster but wrong host path cannot pass the `bench` smoke tests.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "benchmarks/checked_main.hpp"
#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "runner/core/metrics.hpp"
#include "runner/core/tensor_io.hpp"
#include "simdev/gen/timing/qwen3_30b_a3b_preset.hpp"

namespace {

constexpr size_t kTopK = 40;
constexpr uint64_t kSeed = 20250401;

bool g_failed = false;

// One logits tensor as the device holds it: its descriptor and its physical bytes.
struct Logits {
  calrt::TensorDesc desc;
  size_t rows = 0;
  size_t cols = 0;
  std::vector<std::byte> physical;
};

calrt::TensorDesc logits_desc(size_t rows, size_t cols, uint32_t tile_d0) {
  calrt::TensorDesc d;
  d.name = "logits";
  d.direction = calrt::Direction::output;
  d.role = calrt::TensorRole::logits;
  d.dtype = calrt::Dtype::bf16;
  d.shape = {static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
  d.layout = tile_d0 > 0 ? calrt::Layout::tiled : calrt::Layout::row_major;
  d.tile_d0 = tile_d0;
  d.bytes = (tile_d0 > 0 ? calbin::tiled_element_count(rows, cols, tile_d0) : rows * cols) * 2;
  return d;
}

// Logits drawn from N(0, 3), rounded to BF16 as the device writes them. BF16 keeps 8
// significant bits, so a row of 151936 values holds many exact ties, the top ones included.
Logits make_logits(size_t rows, size_t cols, uint32_t tile_d0, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<uint16_t> logical(rows * cols);
  for (uint16_t& value : logical) {
    value = calbin::f32_to_bf16(normal(rng));
  }
  Logits out;
  out.desc = logits_desc(rows, cols, tile_d0);
  out.rows = rows;
  out.cols = cols;
  std::vector<uint16_t> physical(out.desc.bytes / 2, 0);
  calbin::to_physical(logical.data(), physical.data(), rows, cols, tile_d0);
  out.physical.resize(out.desc.bytes);
  std::memcpy(out.physical.data(), physical.data(), out.physical.size());
  return out;
}

// Overwrites logical (row, col) with `value` (as BF16) in the physical bytes.
void poke(Logits& l, size_t row, size_t col, float value) {
  const size_t at = l.desc.tile_d0 > 0 ? calbin::tiled_index(row, col, l.rows, l.desc.tile_d0)
                                       : row * l.cols + col;
  const uint16_t bits = calbin::f32_to_bf16(value);
  std::memcpy(l.physical.data() + at * 2, &bits, sizeof(bits));
}

// The reference model's logits row, the data every benchmark times.
const Logits& reference_logits(bool tiled) {
  static const auto config = simdev::gen::qwen3_30b_a3b_config();
  static const Logits tiled_row =
      make_logits(config.batch, config.vocab, config.logits_tile_d0, kSeed);
  static const Logits row_major = make_logits(config.batch, config.vocab, 0, kSeed);
  return tiled ? tiled_row : row_major;
}

// ---------------------------------------------------------------------------------------
// Plain reference implementations: one element at a time, the documented rules spelled
// out, no cleverness. They are also timed, to show what the optimised path gains.
// ---------------------------------------------------------------------------------------

std::vector<float> reference_read_row(const Logits& l, size_t row) {
  std::vector<float> out(l.cols);
  for (size_t col = 0; col < l.cols; ++col) {
    const size_t at = l.desc.layout == calrt::Layout::tiled
                          ? calbin::tiled_index(row, col, l.rows, l.desc.tile_d0)
                          : row * l.cols + col;
    uint16_t bits = 0;
    std::memcpy(&bits, l.physical.data() + at * 2, sizeof(bits));
    out[col] = calbin::bf16_to_f32(bits);
  }
  return out;
}

// "x ranks before y": NaN last, larger value first, lower id on ties.
bool reference_before(std::span<const float> values, size_t x, size_t y) {
  const bool nan_x = std::isnan(values[x]);
  const bool nan_y = std::isnan(values[y]);
  if (nan_x || nan_y) {
    return nan_x == nan_y ? x < y : nan_y;
  }
  return values[x] > values[y] || (values[x] == values[y] && x < y);
}

int32_t reference_argmax(std::span<const float> values) {
  if (values.empty()) {
    return -1;
  }
  size_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (reference_before(values, i, best)) {
      best = i;
    }
  }
  return static_cast<int32_t>(best);
}

// Sorts every id: the slow, obviously right top-k.
std::vector<int32_t> reference_top_k(std::span<const float> values, size_t k) {
  std::vector<int32_t> ids(values.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) {
    return reference_before(values, static_cast<size_t>(x), static_cast<size_t>(y));
  });
  ids.resize(std::min(k, ids.size()));
  return ids;
}

// ---------------------------------------------------------------------------------------
// The correctness guard.
// ---------------------------------------------------------------------------------------

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Empty when the runner's functions agree with the references on row `row` of `l`.
std::string check_row(const std::string& name, const Logits& l, size_t row, size_t k) {
  const std::vector<float> expected = reference_read_row(l, row);
  std::vector<float> got(l.cols, -1.0f);
  runner::read_row_f32_into(l.physical, l.desc, row, got);
  if (!same_bits(got, expected) ||
      !same_bits(runner::read_row_f32(l.physical, l.desc, row), expected)) {
    return name + ": read_row_f32 differs from the reference untile + BF16 -> FP32";
  }
  if (runner::argmax(got) != reference_argmax(expected)) {
    return name + ": argmax " + std::to_string(runner::argmax(got)) + ", reference " +
           std::to_string(reference_argmax(expected));
  }
  if (runner::top_k(got, k) != reference_top_k(expected, k)) {
    return name + ": top_k(" + std::to_string(k) + ") differs from the reference";
  }
  std::vector<float> fused(l.cols, -1.0f);
  const runner::RowPick pick = runner::read_row_pick(l.physical, l.desc, row, fused, k);
  if (!same_bits(fused, expected)) {
    return name + ": read_row_pick's row differs from the reference untile + BF16 -> FP32";
  }
  if (pick.argmax != reference_argmax(expected)) {
    return name + ": read_row_pick argmax " + std::to_string(pick.argmax) + ", reference " +
           std::to_string(reference_argmax(expected));
  }
  if (pick.top_k != reference_top_k(expected, k)) {
    return name + ": read_row_pick top_k(" + std::to_string(k) + ") differs from the reference";
  }
  const runner::RowPick ranked = runner::rank_row(l.physical, l.desc, row, k);
  if (ranked.argmax != reference_argmax(expected)) {
    return name + ": rank_row argmax " + std::to_string(ranked.argmax) + ", reference " +
           std::to_string(reference_argmax(expected));
  }
  if (ranked.top_k != reference_top_k(expected, k)) {
    return name + ": rank_row top_k(" + std::to_string(k) + ") differs from the reference";
  }
  return {};
}

// Runs the guard over the timed rows and over rows built to break a shortcut.
std::string verify_host_path() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const auto config = simdev::gen::qwen3_30b_a3b_config();
  const size_t vocab = config.vocab;
  std::vector<std::string> failures;
  auto check = [&](const std::string& name, const Logits& l, size_t row, size_t k = kTopK) {
    if (std::string failure = check_row(name, l, row, k); !failure.empty()) {
      failures.push_back(failure);
    }
  };
  check("reference row, tiled", reference_logits(true), 0);
  check("reference row, row-major", reference_logits(false), 0);
  for (const size_t k : {size_t{0}, size_t{1}, size_t{2}, size_t{256}}) {
    check("reference row, k " + std::to_string(k), reference_logits(true), 0, k);
  }

  // Several rows in a tile: the row is strided, and 1000 columns end in a partial tile.
  const Logits batch = make_logits(4, 1000, 16, kSeed + 1);
  for (size_t row = 0; row < 4; ++row) {
    check("batch 4 x 1000, row " + std::to_string(row), batch, row);
  }
  const Logits odd_tile = make_logits(3, 999, 12, kSeed + 2);
  check("batch 3 x 999, tile 12, row 2", odd_tile, 2);

  // Ties at the top spread over blocks, a tie exactly at the k-th place, NaNs before and
  // among them, -inf, and -0 against +0.
  Logits ties = make_logits(1, vocab, 16, kSeed + 3);
  for (const size_t col : {size_t{0}, size_t{5}, size_t{77}, size_t{4096}, size_t{150000}}) {
    poke(ties, 0, col, nan);
  }
  for (const size_t col : {size_t{151935}, size_t{31}, size_t{32}, size_t{90000}, size_t{7}}) {
    poke(ties, 0, col, 100.0f);
  }
  for (size_t i = 0; i < 60; ++i) {
    poke(ties, 0, 1000 + i * 2003, 50.0f);  // 60 equal values straddle the 40th place
  }
  poke(ties, 0, 3, -inf);
  check("ties and NaNs", ties, 0);

  Logits zeros = make_logits(1, 4096, 16, kSeed + 4);
  for (size_t col = 0; col < 4096; ++col) {
    poke(zeros, 0, col, col % 3 == 0 ? nan : col % 3 == 1 ? -0.0f : 0.0f);
  }
  check("signed zeros and NaNs", zeros, 0);

  Logits sparse = make_logits(1, 4096, 16, kSeed + 5);
  for (size_t col = 0; col < 4096; ++col) {
    poke(sparse, 0, col, col % 200 == 3 ? static_cast<float>(col % 7) : nan);
  }
  check("fewer numbers than k", sparse, 0, 64);

  Logits all_nan = make_logits(1, 100, 16, kSeed + 6);
  for (size_t col = 0; col < 100; ++col) {
    poke(all_nan, 0, col, nan);
  }
  check("all NaN", all_nan, 0);

  Logits minus_inf = make_logits(1, 100, 0, kSeed + 7);
  for (size_t col = 0; col < 100; ++col) {
    poke(minus_inf, 0, col, col == 50 ? nan : -inf);
  }
  check("all -inf", minus_inf, 0);

  std::string joined;
  for (const std::string& failure : failures) {
    joined += (joined.empty() ? "" : "; ") + failure;
  }
  return joined;
}

// After a benchmark: the value it produced must be the reference's, else the run fails.
template <class T>
void expect_equal(benchmark::State& state, const T& got, const T& expected, const char* what) {
  if (!(got == expected)) {
    g_failed = true;
    // Appended, not `std::string(what) + "..."`: GCC 12 reports a false -Warray-bounds on
    // that temporary once it is inlined here.
    std::string message = what;
    message += " differs from the reference";
    state.SkipWithError(message.c_str());
  }
}

struct Expected {
  std::vector<float> logits;
  int32_t greedy = -1;
  std::vector<int32_t> top;
};

Expected compute_expected(bool tiled) {
  Expected e;
  e.logits = reference_read_row(reference_logits(tiled), 0);
  e.greedy = reference_argmax(e.logits);
  e.top = reference_top_k(e.logits, kTopK);
  return e;
}

// The reference results on the timed rows, computed once.
const Expected& expected_for(bool tiled) {
  static const Expected row_major = compute_expected(false);
  static const Expected tiled_row = compute_expected(true);
  return tiled ? tiled_row : row_major;
}

int64_t row_bytes() { return static_cast<int64_t>(reference_logits(true).desc.bytes); }
int64_t row_f32_bytes() {
  return static_cast<int64_t>(reference_logits(true).cols * sizeof(float));
}

// ---------------------------------------------------------------------------------------
// Benchmarks. Bytes processed: the BF16 row (303872 bytes) for the copies, the conversion
// and the whole step, so their GB/s compare directly with BM_Memcpy; the FP32 row
// (607744 bytes) for greedy and top-k, which read that.
// ---------------------------------------------------------------------------------------

void BM_Memcpy(benchmark::State& state) {
  const std::vector<std::byte>& src = reference_logits(true).physical;
  std::vector<std::byte> dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_Memcpy);

// The D2H as it lands: each chiplet computes one vocabulary half of the logits, and with
// batch 1 each half is one contiguous span of the tiled tensor; both go into one host mapping.
struct ChipHalves {
  std::vector<std::byte> chip[2];
  size_t split = 0;
};

ChipHalves split_by_chip(const Logits& l) {
  ChipHalves h;
  h.split = l.physical.size() / 2;
  h.chip[0].assign(l.physical.begin(), l.physical.begin() + static_cast<std::ptrdiff_t>(h.split));
  h.chip[1].assign(l.physical.begin() + static_cast<std::ptrdiff_t>(h.split), l.physical.end());
  return h;
}

void land_d2h(const ChipHalves& h, std::byte* host) {
  std::memcpy(host, h.chip[0].data(), h.chip[0].size());
  std::memcpy(host + h.split, h.chip[1].data(), h.chip[1].size());
}

void BM_D2hCopy(benchmark::State& state) {
  const Logits& l = reference_logits(true);
  const ChipHalves halves = split_by_chip(l);
  std::vector<std::byte> host(l.desc.bytes);
  for (auto _ : state) {
    land_d2h(halves, host.data());
    benchmark::DoNotOptimize(host.data());
    benchmark::ClobberMemory();
  }
  expect_equal(state, host, l.physical, "D2H landing");
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_D2hCopy);

void BM_Bf16ToF32(benchmark::State& state) {
  const bool tiled = state.range(0) != 0;
  const Logits& l = reference_logits(tiled);
  std::vector<float> out(l.cols);
  for (auto _ : state) {
    runner::read_row_f32_into(l.physical, l.desc, 0, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  expect_equal(state, out, expected_for(tiled).logits, "read_row_f32_into");
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_Bf16ToF32)->ArgName("tiled")->Arg(1)->Arg(0);

// The allocating wrapper, as the smoke's golden comparison calls it.
void BM_Bf16ToF32Alloc(benchmark::State& state) {
  const Logits& l = reference_logits(true);
  std::vector<float> out;
  for (auto _ : state) {
    out = runner::read_row_f32(l.physical, l.desc, 0);
    benchmark::DoNotOptimize(out.data());
  }
  expect_equal(state, out, expected_for(true).logits, "read_row_f32");
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_Bf16ToF32Alloc);

void BM_Bf16ToF32Reference(benchmark::State& state) {
  const Logits& l = reference_logits(true);
  std::vector<float> out;
  for (auto _ : state) {
    out = reference_read_row(l, 0);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_Bf16ToF32Reference);

void BM_Greedy(benchmark::State& state) {
  const std::vector<float>& logits = expected_for(true).logits;
  int32_t token = -1;
  for (auto _ : state) {
    token = runner::argmax(logits);
    benchmark::DoNotOptimize(token);
  }
  expect_equal(state, token, expected_for(true).greedy, "argmax");
  state.SetBytesProcessed(state.iterations() * row_f32_bytes());
}
BENCHMARK(BM_Greedy);

void BM_GreedyReference(benchmark::State& state) {
  const std::vector<float>& logits = expected_for(true).logits;
  for (auto _ : state) {
    benchmark::DoNotOptimize(reference_argmax(logits));
  }
  state.SetBytesProcessed(state.iterations() * row_f32_bytes());
}
BENCHMARK(BM_GreedyReference);

void BM_TopK(benchmark::State& state) {
  const std::vector<float>& logits = expected_for(true).logits;
  const auto k = static_cast<size_t>(state.range(0));
  std::vector<int32_t> top;
  for (auto _ : state) {
    top = runner::top_k(logits, k);
    benchmark::DoNotOptimize(top.data());
  }
  if (k == kTopK) {
    expect_equal(state, top, expected_for(true).top, "top_k");
  }
  state.SetBytesProcessed(state.iterations() * row_f32_bytes());
}
BENCHMARK(BM_TopK)->ArgName("k")->Arg(kTopK);

// What top_k cost before: a partial sort of every id (kept to show the gain).
void BM_TopKPartialSort(benchmark::State& state) {
  const std::vector<float>& logits = expected_for(true).logits;
  std::vector<int32_t> ids(logits.size());
  for (auto _ : state) {
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + kTopK, ids.end(), [&](int32_t x, int32_t y) {
      return reference_before(logits, static_cast<size_t>(x), static_cast<size_t>(y));
    });
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * row_f32_bytes());
}
BENCHMARK(BM_TopKPartialSort);

// The whole host step, in order: D2H landing, BF16 -> FP32 into a reused buffer, greedy
// token, top-k candidates.
void BM_DecodeHostStep(benchmark::State& state) {
  const Logits& l = reference_logits(true);
  const ChipHalves halves = split_by_chip(l);
  std::vector<std::byte> host(l.desc.bytes);
  std::vector<float> logits(l.cols);
  int32_t token = -1;
  std::vector<int32_t> top;
  for (auto _ : state) {
    land_d2h(halves, host.data());
    runner::read_row_f32_into(host, l.desc, 0, logits);
    token = runner::argmax(logits);
    top = runner::top_k(logits, kTopK);
    benchmark::DoNotOptimize(token);
    benchmark::DoNotOptimize(top.data());
  }
  expect_equal(state, token, expected_for(true).greedy, "host step argmax");
  expect_equal(state, top, expected_for(true).top, "host step top_k");
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_DecodeHostStep);

// The same step with conversion, greedy and top-k fused into one pass over the row.
void BM_DecodeHostStepFused(benchmark::State& state) {
  const Logits& l = reference_logits(true);
  const ChipHalves halves = split_by_chip(l);
  std::vector<std::byte> host(l.desc.bytes);
  std::vector<float> logits(l.cols);
  runner::RowPick pick;
  for (auto _ : state) {
    land_d2h(halves, host.data());
    pick = runner::read_row_pick(host, l.desc, 0, logits, kTopK);
    benchmark::DoNotOptimize(pick.argmax);
    benchmark::DoNotOptimize(pick.top_k.data());
    benchmark::DoNotOptimize(logits.data());
  }
  expect_equal(state, logits, expected_for(true).logits, "fused host step logits");
  expect_equal(state, pick.argmax, expected_for(true).greedy, "fused host step argmax");
  expect_equal(state, pick.top_k, expected_for(true).top, "fused host step top_k");
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_DecodeHostStepFused);

// A step that only ranks (greedy, or top-k sampling, which needs only the k values): D2H, then
// runner::rank_row from the BF16 row, with no FP32 row written.
void BM_DecodeHostStepRankOnly(benchmark::State& state) {
  const Logits& l = reference_logits(true);
  const ChipHalves halves = split_by_chip(l);
  std::vector<std::byte> host(l.desc.bytes);
  runner::RowPick pick;
  for (auto _ : state) {
    land_d2h(halves, host.data());
    pick = runner::rank_row(host, l.desc, 0, kTopK);
    benchmark::DoNotOptimize(pick.argmax);
    benchmark::DoNotOptimize(pick.top_k.data());
  }
  expect_equal(state, pick.argmax, expected_for(true).greedy, "rank-only host step argmax");
  expect_equal(state, pick.top_k, expected_for(true).top, "rank-only host step top_k");
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_DecodeHostStepRankOnly);

// The ranking alone, from a row already in host memory (the D2H being the device's DMA).
void BM_RankBf16Row(benchmark::State& state) {
  const Logits& l = reference_logits(true);
  runner::RowPick pick;
  for (auto _ : state) {
    pick = runner::rank_row(l.physical, l.desc, 0, kTopK);
    benchmark::DoNotOptimize(pick.top_k.data());
  }
  expect_equal(state, pick.top_k, expected_for(true).top, "rank_row top_k");
  state.SetBytesProcessed(state.iterations() * row_bytes());
}
BENCHMARK(BM_RankBf16Row);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 2;
  }
  const auto config = simdev::gen::qwen3_30b_a3b_config();
  benchmark::AddCustomContext("logits", "bf16 [" + std::to_string(config.batch) + ", " +
                                            std::to_string(config.vocab) + "] tiled tile_d0 " +
                                            std::to_string(config.logits_tile_d0));
  benchmark::AddCustomContext("top_k", std::to_string(kTopK));
  if (const std::string failure = verify_host_path(); !failure.empty()) {
    std::fprintf(stderr, "host path differs from the reference: %s\n", failure.c_str());
    return 1;
  }
  std::fprintf(stderr, "host path: optimised results equal the reference on every check\n");
  const size_t failed = calrt_bench::run_benchmarks_checked();
  benchmark::Shutdown();
  if (g_failed) {
    std::fprintf(stderr, "host path: a benchmark's result differed from the reference\n");
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
