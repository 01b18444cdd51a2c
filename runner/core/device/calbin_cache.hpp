// The calbins scenarios run on, by generator preset: DIR/<preset>, generated there when
// missing and this build links the generator, each read and verified once per run (manifest,
// file hashes, golden set) however many scenarios use it.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <tl/expected.hpp>

#include "runner/core/host_inputs.hpp"

namespace runner {

struct ScenarioCalbin {
  std::filesystem::path dir;
  HostInputs inputs;  // every golden case, in the golden set's order (a step's `case` index)
};

class CalbinStore {
 public:
  // `command` names the command in the line that says a calbin is being generated.
  explicit CalbinStore(std::filesystem::path dir, std::string command = "calrt scenario")
      : dir_(std::move(dir)), command_(std::move(command)) {}

  // The calbin of `preset`; the error (bad input) names the directory and says how to make
  // the calbin when it is missing.
  tl::expected<const ScenarioCalbin*, std::string> get(const std::string& preset);

 private:
  std::filesystem::path dir_;
  std::string command_;
  std::map<std::string, std::unique_ptr<ScenarioCalbin>> loaded_;
};

}  // namespace runner
