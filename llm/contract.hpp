// The start-up contract check (internal to the library): the service manifest, the calbin's
// manifest and the model facts the device reports (Calbin_GetInfo, Calbin_GetModel) must
// agree on vocab, context, batch, prefill chunk, exact model names and types, the tensor and
// CSR bindings, the logits' shape, dtype and tile layout, and full-row against on-device top-k
// output. A mismatch is a model-level error naming both sides and their values; the adapter
// then never binds anything by position or by guess.
#pragma once

#include <cstdint>
#include <string>

#include "abi/calrt.hpp"
#include "calbin/acceptance/service_manifest.hpp"
#include "calbin/manifest.hpp"
#include "llm/engine.hpp"
#include "llm/error.hpp"
#include "llm/model_binding.hpp"

namespace calrt::llm {

struct Contract {
  ModelBinding prefill;
  ModelBinding decode;
  Capabilities caps;
};

struct ContractSources {
  const calbin::Manifest& manifest;
  std::string manifest_file;  // as named in messages
  const calbin::ServiceManifest& service;
  std::string service_file;
};

// Checks the three sources against each other and binds both models. `calbin` must be
// loaded (not necessarily configured); KV capacity enters n_ctx in capabilities() below.
Result<Contract> check_contract(const calrt::Calbin& calbin, const ContractSources& sources);

// n_ctx = min(calbin context, KV tokens one sequence can hold, tokenizer limit); n_batch =
// the calbin's batch. Needs the calbin configured (Kv_Capacity).
Result<Capabilities> capabilities(const calrt::Calbin& calbin, const calbin::Manifest& manifest);

}  // namespace calrt::llm
