// libFuzzer target: service manifest YAML into its reader; errors are fine, crashes are not.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "calbin/acceptance/service_manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)calbin::parse_service_manifest(text, "fuzz.yaml");
  return 0;
}
