// The clause tables, one file per section of abi/CONFORMANCE.md, concatenated by
// conformance.cpp in the document's order.
#pragma once

#include <vector>

#include "runner/conformance/clauses/clause_helpers.hpp"
#include "runner/conformance/conformance.hpp"
#include "runner/conformance/conformance_context.hpp"

namespace runner {

std::vector<Clause> clauses_ver();  // version negotiation
std::vector<Clause> clauses_hdl();  // handles
std::vector<Clause> clauses_err();  // errors and fault classes
std::vector<Clause> clauses_cal();  // calbin create and info
std::vector<Clause> clauses_cfg();  // configure and memory accounting
std::vector<Clause> clauses_buf();  // buffers
std::vector<Clause> clauses_map();  // map and unmap
std::vector<Clause> clauses_csr();  // control/status registers
std::vector<Clause> clauses_job();  // submit, wait, timeout, cancel
std::vector<Clause> clauses_par();  // parallel mode, ping and pong
std::vector<Clause> clauses_kv();   // KV cache
std::vector<Clause> clauses_rst();  // reset
std::vector<Clause> clauses_thr();  // threads
std::vector<Clause> clauses_nev();  // what must never happen

}  // namespace runner
