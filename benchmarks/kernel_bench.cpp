// The device's kernels (simdev/device/model/kernels.hpp) at the shapes of the 0.6B dense model
// on two chips (hidden 1024, FFN 3072 and vocabulary 151936 split in halves), on every
// instruction set this CPU runs: the int8 matmul at a decode row and a prefill chunk, and the
// BF16 lm_head matvec of a decode step. Beside them, the machine's memory read bandwidth, which
// a decode step is bound by. Each run first checks that the instruction set gives the
// reference loops' bits and fails otherwise, so the ctest run of it is a correctness guard too.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checked_main.hpp"
#include "simdev/device/model/kernels.hpp"

namespace {

using namespace simdev::kernels;

constexpr Isa kIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512_vnni};

struct Operands {
  Operands(size_t rows_, size_t in_, size_t out_) : rows(rows_), in(in_), out(out_) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> value(-127, 127);
    std::uniform_real_distribution<float> scale(0.001f, 0.01f);
    a.resize(rows * in);
    w.resize(out * in);
    for (auto& v : a) v = static_cast<int8_t>(value(rng));
    for (auto& v : w) v = static_cast<int8_t>(value(rng));
    a_scales.resize(rows);
    w_scales.resize(out);
    for (auto& v : a_scales) v = scale(rng);
    for (auto& v : w_scales) v = scale(rng);
    sums.resize(out);
    int8_row_sums(w.data(), out, in, sums.data());
    result.resize(rows * out);
  }
  Int8Weights weights() const { return {w.data(), w_scales.data(), sums.data(), out, in}; }
  void run(Isa isa) {
    int8_matmul(a.data(), a_scales.data(), rows, weights(), result.data(), out, isa);
  }
  size_t rows, in, out;
  std::vector<int8_t> a, w;
  std::vector<float> a_scales, w_scales, result;
  std::vector<int32_t> sums;
};

// Which instruction set a benchmark's first argument names; false where this CPU has not got
// it, and the run is then an empty loop labelled so (not an error: the CPU is not broken).
bool pick(benchmark::State& state, Isa& isa) {
  isa = kIsas[state.range(0)];
  if (!supported(isa)) {
    state.SetLabel(std::string(to_string(isa)) + " (not on this CPU)");
    for (auto _ : state) {
    }
    return false;
  }
  state.SetLabel(to_string(isa));
  return true;
}

void BM_Int8Matmul(benchmark::State& state) {
  Isa isa;
  if (!pick(state, isa)) return;
  Operands m(static_cast<size_t>(state.range(1)), static_cast<size_t>(state.range(2)),
             static_cast<size_t>(state.range(3)));
  m.run(Isa::scalar);
  const std::vector<float> reference = m.result;
  m.run(isa);
  if (std::memcmp(reference.data(), m.result.data(), reference.size() * sizeof(float)) != 0) {
    state.SkipWithError("differs from the reference loops");
    return;
  }
  for (auto _ : state) {
    m.run(isa);
    benchmark::DoNotOptimize(m.result.data());
  }
  // Multiply-accumulates per second, and the weight bytes streamed.
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(m.rows * m.in * m.out));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(m.in * m.out));
}
BENCHMARK(BM_Int8Matmul)
    ->ArgNames({"isa", "rows", "in", "out"})
    ->ArgsProduct({{0, 1, 2}, {1, 256}, {1024}, {1536}})  // gate_proj / up_proj shard
    ->ArgsProduct({{0, 1, 2}, {1, 256}, {1536}, {1024}})  // down_proj shard
    ->Unit(benchmark::kMicrosecond);
// A decode row against 128 MB of weights, far past every cache, as a decode step reads one
// layer after another: the weights stream from memory once per call.
BENCHMARK(BM_Int8Matmul)
    ->ArgNames({"isa", "rows", "in", "out"})
    ->ArgsProduct({{1, 2}, {1}, {1024}, {131072}})
    ->Unit(benchmark::kMillisecond);

// One chip's half of the lm_head of a decode step: 75968 BF16 rows of 1024 (155.6 MB).
void BM_Bf16LmHead(benchmark::State& state) {
  Isa isa;
  if (!pick(state, isa)) return;
  const size_t in = 1024, out = 75968;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> bits(0x3c00, 0x3f80);  // BF16 values in [2^-7, 1]
  std::vector<uint16_t> w(out * in);
  for (auto& v : w) v = static_cast<uint16_t>(bits(rng));
  std::vector<float> x(in), reference(out), got(out);
  for (size_t i = 0; i < in; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  bf16_matvec(x.data(), in, w.data(), out, reference.data(), Isa::scalar);
  bf16_matvec(x.data(), in, w.data(), out, got.data(), isa);
  if (std::memcmp(reference.data(), got.data(), out * sizeof(float)) != 0) {
    state.SkipWithError("differs from the reference loops");
    return;
  }
  for (auto _ : state) {
    bf16_matvec(x.data(), in, w.data(), out, got.data(), isa);
    benchmark::DoNotOptimize(got.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size() * sizeof(uint16_t)));
}
BENCHMARK(BM_Bf16LmHead)->ArgNames({"isa"})->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

// The machine's read bandwidth on one thread: a sum over 512 MB, far past every cache, which
// the compiler vectorises. A decode step's weights cannot stream faster than this.
// The machine's read bandwidth, the bound of a decode step (benchmarks/llama_cpp/ prints the
// step's against it). Each thread sums a 512 MB buffer of its own.
void BM_MemoryRead(benchmark::State& state) {
  std::vector<uint64_t> data(size_t{512} << 20 >> 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = i;
  for (auto _ : state) {
    uint64_t sum = 0;
    for (const uint64_t v : data) sum += v;
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(data.size() * 8));
}
BENCHMARK(BM_MemoryRead)->Unit(benchmark::kMillisecond)->ThreadRange(1, 2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return calrt_bench::checked_main(argc, argv); }
