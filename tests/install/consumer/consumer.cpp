// Opens the installed simulator through the installed loader, creates a device, loads and
// configures the calbin given as the only argument, and prints what the device says.
// Exit 0 when all of it works.
#include <cstdio>
#include <filesystem>

#include "abi/calrt.hpp"
#include "abi/calrt_loader.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer CALBIN\n");
    return 2;
  }
  if (!std::filesystem::exists(std::filesystem::path(CALRT_DATA_DIR) / "scenarios")) {
    std::fprintf(stderr, "consumer: no scenario library in %s\n", CALRT_DATA_DIR);
    return 1;
  }
  try {
    const calrt::Api api = calrt::load_runtime(CALRT_SIM_LIBRARY);
    calrt::Device device = calrt::Device::create(api, calrt::DeviceKind::sim);
    calrt::Calbin calbin = calrt::Calbin::create(device, argv[1]);
    calbin.configure();
    const calrt::DeviceStatus status = device.status();
    std::printf("consumer: %s, ABI %u.%u.%u, %u chips, %zu models configured\n",
                status.device_name.c_str(), status.abi_major, status.abi_minor, status.abi_patch,
                status.chip_count, calbin.models().size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
