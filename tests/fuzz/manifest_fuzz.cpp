// libFuzzer target: manifest.json text into the calbin reader. The reader must answer every
// input with a manifest or an error, within bounded time and memory, and never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "calbin/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto manifest = calbin::parse_manifest(text, "fuzz.json");
  if (manifest) {
    // Exercise what `check` and `plan` derive from an accepted manifest, too.
    for (const auto& model : manifest->models) {
      for (const auto& tensor : model.inputs) {
        (void)calbin::tensor_bytes(tensor.shape, tensor.dtype, tensor.layout);
      }
    }
    (void)manifest->device_memory_required.bytes();
    (void)calbin::to_json(*manifest);
  }
  return 0;
}
