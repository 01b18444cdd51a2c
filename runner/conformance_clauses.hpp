// The clause tables of each group file, concatenated by conformance.cpp in the order of
// abi/CONFORMANCE.md.
#pragma once

#include <vector>

#include "runner/conformance.hpp"
#include "runner/conformance_context.hpp"

namespace runner {

std::vector<Clause> conformance_clauses_api();     // VER, HDL, ERR
std::vector<Clause> conformance_clauses_calbin();  // CAL, CFG, BUF, MAP, CSR
std::vector<Clause> conformance_clauses_jobs();    // JOB, PAR, KV
std::vector<Clause> conformance_clauses_device();  // RST, THR, NEV

}  // namespace runner
