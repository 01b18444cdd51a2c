// `simdev presets`: the presets `simdev gen` knows, one line each, on stdout for scripts.
#include <cstdio>

#include "simdev/gen/generate.hpp"
#include "simdev/tool/command.hpp"

namespace simdev::tool {
namespace {

class PresetsCommand : public Command {
 public:
  explicit PresetsCommand(CLI::App& simdev)
      : Command(simdev.add_subcommand("presets", "list the presets gen knows")) {}

  int run(int /*argc*/, char** /*argv*/) override {
    for (const auto& preset : gen::presets()) {
      std::printf("%-16s %-11s %s\n", preset.name.c_str(),
                  preset.functional ? "functional" : "timing", preset.description.c_str());
    }
    return kExitPass;
  }
};

}  // namespace

std::unique_ptr<Command> add_presets_command(CLI::App& simdev) {
  return std::make_unique<PresetsCommand>(simdev);
}

}  // namespace simdev::tool
