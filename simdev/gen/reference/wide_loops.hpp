// The references' hot loops get a copy per instruction set, picked once at load: wider
// registers doing the same operations on each element, in the same order, so the same bits.
// Only on loops whose lanes are independent (a float reduction is never reordered), and only
// on functions with internal linkage: Clang 14 drops the attribute from a function declared
// before without it. No FMA contraction (-ffp-contract=off, the top CMakeLists.txt).
#pragma once

#if defined(__clang__) && defined(__x86_64__)
#define SIMDEV_REFERENCE_WIDE_LOOPS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SIMDEV_REFERENCE_WIDE_LOOPS
#endif
