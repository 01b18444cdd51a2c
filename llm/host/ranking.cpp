// Ranking a logits row: argmax and top-k by one rule (larger value first, lower id on ties,
// NaNs last), whole or piece by piece. The sampler, the row readers and the runner's metrics
// all rank through these, so a token picked anywhere is the same token.
#include "llm/host/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace calrt::llm {
namespace {

// top_k and argmax rank by one rule (metrics.hpp): larger value first, lower id on ties,
// NaNs last. Both scan ids upwards, so "lower id on ties" becomes "only a strictly greater
// value displaces one already taken", and NaNs, which compare false, are never taken by the
// scan; what remains of them is handled apart.

// The scans below test many values against one bound at a time with GCC/Clang vector types,
// which the compiler lowers to whatever SIMD the target has, at -O2 too.
using Float4 = float __attribute__((vector_size(16)));
using Mask4 = int32_t __attribute__((vector_size(16)));

// Values tested per step of the scan: large enough that the test's horizontal reduction is
// paid rarely, small enough that the whole scan stays one loop.
constexpr size_t kBlock = 64;
// Values the caller re-examines one by one after a hit: the group holding the first value
// above the bound (at least one vector of either width).
constexpr size_t kGroup = 8;

template <class Mask>
[[gnu::always_inline]] inline bool any_lane(const Mask& mask) {
  uint64_t words[sizeof(Mask) / sizeof(uint64_t)];
  std::memcpy(words, &mask, sizeof(words));
  uint64_t any = 0;
  for (const uint64_t word : words) {
    any |= word;
  }
  return any != 0;
}

// Some i >= begin such that no value in [begin, i) is greater than `bound`, and either one
// in [i, i + kGroup) is or fewer than kBlock values are left from i. NaNs compare false and
// never count: the rule argmax and top_k apply one value at a time.
template <class Float, class Mask>
[[gnu::always_inline]] inline size_t find_above(const float* values, size_t begin, size_t n,
                                                float bound) {
  constexpr size_t kLanes = sizeof(Float) / sizeof(float);
  static_assert(kBlock % kLanes == 0 && kGroup % kLanes == 0);
  const Float b = Float{} + bound;
  size_t i = begin;
  for (; i + kBlock <= n; i += kBlock) {
    // One memcpy per vector: each becomes a plain unaligned load, where copying the block
    // into an array would go through the stack and stall store forwarding.
    Mask hit = {};
#pragma GCC unroll 16
    for (size_t j = 0; j < kBlock; j += kLanes) {
      Float a;
      std::memcpy(&a, values + i + j, sizeof(a));
      hit |= a > b;
    }
    if (any_lane(hit)) {
      for (size_t j = 0; j < kBlock; j += kGroup) {
        Mask group = {};
        for (size_t lane = 0; lane < kGroup; lane += kLanes) {
          Float a;
          std::memcpy(&a, values + i + j + lane, sizeof(a));
          group |= a > b;
        }
        if (any_lane(group)) {
          return i + j;
        }
      }
    }
  }
  return i;
}

size_t find_above_baseline(const float* values, size_t begin, size_t n, float bound) {
  return find_above<Float4, Mask4>(values, begin, n, bound);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Baseline x86-64 has 16-byte SSE2 only; where the CPU has AVX2 the scan runs twice as wide.
__attribute__((target("avx2"))) size_t find_above_avx2(const float* values, size_t begin, size_t n,
                                                       float bound) {
  using Float8 = float __attribute__((vector_size(32)));
  using Mask8 = int32_t __attribute__((vector_size(32)));
  return find_above<Float8, Mask8>(values, begin, n, bound);
}

size_t find_above_best(const float* values, size_t begin, size_t n, float bound) {
  static const auto impl = [] {
    __builtin_cpu_init();  // in case the first call comes from a static initialiser
    return __builtin_cpu_supports("avx2") ? find_above_avx2 : find_above_baseline;
  }();
  return impl(values, begin, n, bound);
}
#else
size_t find_above_best(const float* values, size_t begin, size_t n, float bound) {
  return find_above_baseline(values, begin, n, bound);
}
#endif

// Calls on_greater(i) for each i in [begin, n) with values[i] > bound(), in increasing i;
// on_greater may raise the bound. Values not above the bound are passed over by the vector
// test, which after the first few thousand logits is nearly all of them.
template <class Bound, class OnGreater>
void scan_greater(const float* values, size_t begin, size_t n, Bound bound, OnGreater on_greater) {
  size_t i = begin;
  while (i < n) {
    i = find_above_best(values, i, n, bound());
    const size_t end = n - i < kBlock ? n : i + kGroup;
    for (; i < end; ++i) {
      if (values[i] > bound()) {
        on_greater(i);
      }
    }
  }
}

// A candidate of top_k. Only numbers enter the heap, so ranking needs no NaN test.
using Ranked = detail::RankedValue;

bool ranked_before(const Ranked& a, const Ranked& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// Puts `item` in place of the heap's top (the candidate ranking last) and sifts it down; the
// heap is std::make_heap's with ranked_before, so every parent ranks after its children.
void replace_worst(std::vector<Ranked>& heap, Ranked item) {
  const size_t size = heap.size();
  size_t pos = 0;
  for (;;) {
    size_t child = 2 * pos + 1;
    if (child >= size) {
      break;
    }
    if (child + 1 < size && ranked_before(heap[child], heap[child + 1])) {
      ++child;
    }
    if (!ranked_before(item, heap[child])) {
      break;
    }
    heap[pos] = heap[child];
    pos = child;
  }
  heap[pos] = item;
}

}  // namespace

// One pass keeping a bounded heap of the k best candidates so far, the one ranking last on
// top: a value not above that one cannot enter (an equal value has a higher id, so it ranks
// after).
std::vector<int32_t> top_k(std::span<const float> values, size_t k) {
  const size_t n = values.size();
  k = std::min(k, n);
  std::vector<int32_t> ids;
  ids.reserve(k);
  if (k == 0) {
    return ids;
  }
  const float* v = values.data();
  std::vector<Ranked> best;
  best.reserve(k);
  size_t i = 0;
  for (; i < n && best.size() < k; ++i) {
    if (!std::isnan(v[i])) {
      best.push_back({v[i], static_cast<int32_t>(i)});
    }
  }
  if (best.size() == k) {
    std::make_heap(best.begin(), best.end(), ranked_before);
    scan_greater(
        v, i, n, [&] { return best.front().value; },
        [&](size_t id) {
          replace_worst(best, {v[id], static_cast<int32_t>(id)});
        });
  }
  std::sort(best.begin(), best.end(), ranked_before);
  for (const Ranked& r : best) {
    ids.push_back(r.id);
  }
  // Fewer than k values are numbers: the NaNs rank last, lowest id first.
  for (size_t id = 0; ids.size() < k && id < n; ++id) {
    if (std::isnan(v[id])) {
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  return ids;
}

RowRanker::RowRanker(size_t k) : k_(k), capacity_(std::max<size_t>(k, 1)) {
  // k may exceed any row (top_k clips it to the row, which this does not know yet).
  best_.reserve(std::min<size_t>(capacity_, 1024));
}

// The steps of top_k, split at the piece boundaries: the fill takes the first capacity_
// numbers, then scan_greater visits every later value above the bound in increasing id,
// and neither depends on where a piece ends. With k = 0 the single candidate is argmax's.
void RowRanker::add(std::span<const float> values) {
  const float* v = values.data();
  const size_t n = values.size();
  const size_t base = seen_;
  seen_ += n;
  size_t i = 0;
  if (best_.size() < capacity_) {
    for (; i < n && best_.size() < capacity_; ++i) {
      if (!std::isnan(v[i])) {
        best_.push_back({v[i], static_cast<int32_t>(base + i)});
      }
    }
    if (best_.size() < capacity_) {
      return;
    }
    std::make_heap(best_.begin(), best_.end(), ranked_before);
  }
  scan_greater(
      v, i, n, [&] { return best_.front().value; },
      [&](size_t j) {
        replace_worst(best_, {v[j], static_cast<int32_t>(base + j)});
      });
}

void RowRanker::add_one(float value) {
  if (best_.size() < capacity_) {
    add({&value, 1});
    return;
  }
  if (value > best_.front().value) {
    replace_worst(best_, {value, static_cast<int32_t>(seen_)});
  }
  ++seen_;
}

int32_t RowRanker::argmax() const {
  if (best_.empty()) {
    return seen_ == 0 ? -1 : 0;  // all NaN: they tie, and the lowest id wins
  }
  return std::min_element(best_.begin(), best_.end(), ranked_before)->id;
}

std::vector<int32_t> RowRanker::top_k(std::span<const float> row) const {
  if (row.size() != seen_) {
    throw std::invalid_argument("RowRanker::top_k: the row is not what was added");
  }
  const size_t k = std::min(k_, seen_);
  std::vector<int32_t> ids;
  ids.reserve(k);
  if (k == 0) {
    return ids;
  }
  std::vector<Ranked> sorted = best_;
  std::sort(sorted.begin(), sorted.end(), ranked_before);
  for (const Ranked& r : sorted) {
    ids.push_back(r.id);
  }
  for (size_t id = 0; ids.size() < k && id < row.size(); ++id) {
    if (std::isnan(row[id])) {
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  return ids;
}

std::vector<int32_t> RowRanker::top_k_of_numbers() const {
  if (k_ > 0 && best_.size() < std::min(k_, seen_)) {
    throw std::logic_error("RowRanker::top_k_of_numbers: fewer numbers than k; use top_k(row)");
  }
  std::vector<Ranked> sorted = best_;
  std::sort(sorted.begin(), sorted.end(), ranked_before);
  std::vector<int32_t> ids;
  ids.reserve(std::min(k_, sorted.size()));
  for (size_t i = 0; i < sorted.size() && ids.size() < k_; ++i) ids.push_back(sorted[i].id);
  return ids;
}

int32_t argmax(std::span<const float> values) {
  const size_t n = values.size();
  if (n == 0) {
    return -1;
  }
  const float* v = values.data();
  size_t first = 0;
  while (first < n && std::isnan(v[first])) {
    ++first;
  }
  if (first == n) {
    return 0;  // all NaN: they tie, and the lowest id wins
  }
  // Strictly greater only: an equal value later has a higher id and loses the tie.
  size_t best = first;
  float best_value = v[first];
  scan_greater(
      v, first + 1, n, [&] { return best_value; },
      [&](size_t id) {
        best = id;
        best_value = v[id];
      });
  return static_cast<int32_t>(best);
}

}  // namespace calrt::llm
