// mutant_runtime.hpp: the simulator's runtime behind a forwarding table that breaks one named
// behaviour (a mutation). The conformance suite is only worth something if it notices a
// runtime that gets a clause wrong; each mutation is such a runtime, built from a correct one
// by wrapping a few entries in trampolines that call the simulator and then misbehave. A
// mutation never crashes the caller: it answers wrongly, it does not corrupt memory.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "abi/calrt.h"

namespace calrt::mutant {

struct Mutation {
  std::string_view name;
  std::string_view breaks;  // the behaviour it breaks, in the ABI's words
};

// Every mutation, in a fixed order. "none" is the unmutated forwarding table, the control
// that the forwarding itself changes nothing.
std::span<const Mutation> mutations();

// The simulator's table with mutation `name` applied, and with a private copy of its
// extension chain (so that a mutation of an extension leaves the simulator's alone); nullptr
// for an unknown name or for an abi_major other than CALRT_ABI_MAJOR. Each table is built
// once and lives as long as the process.
const CalrtApi* mutant_api(std::string_view name, uint32_t abi_major = CALRT_ABI_MAJOR);

}  // namespace calrt::mutant
