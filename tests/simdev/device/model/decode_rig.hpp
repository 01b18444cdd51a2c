// A simulated device with one calbin configured and an input and an output buffer for each
// of its prefill and decode models, driven through the C++ wrapper over the C table: what the
// decode tests (batch_decode_test.cpp, ranked_decode_test.cpp) share.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "simdev/runtime/sim_api.h"

namespace simdev::test {

struct DecodeRig {
  DecodeRig(const std::filesystem::path& calbin_dir, const std::string& config)
      : api(calrt_sim_get_api(CALRT_ABI_MAJOR)),
        device(calrt::Device::create(api, calrt::DeviceKind::sim, 0, config)),
        calbin(calrt::Calbin::create(device, calbin_dir)) {
    calbin.configure();
    info = calbin.info();
    for (const calrt::ModelDesc& model : calbin.models()) {
      (model.type == calrt::ModelType::prefill ? prefill : decode) = model;
    }
    prefill_in = calrt::Buffer::create(calbin, prefill.name, calrt::Direction::input);
    prefill_out = calrt::Buffer::create(calbin, prefill.name, calrt::Direction::output);
    decode_in = calrt::Buffer::create(calbin, decode.name, calrt::Direction::input);
    decode_out = calrt::Buffer::create(calbin, decode.name, calrt::Direction::output);
  }

  // `values` at the start of an int32 tensor, the rest zeroed.
  static void write(calrt::Buffer& buffer, uint32_t tensor, const std::vector<int32_t>& values) {
    calrt::Mapping map = buffer.map(tensor);
    std::memset(map.bytes().data(), 0, map.bytes().size());
    std::memcpy(map.bytes().data(), values.data(), values.size() * sizeof(int32_t));
  }

  calrt::JobStatus run(const calrt::ModelDesc& model, calrt::Buffer& in, calrt::Buffer& out) {
    calrt::Job job = calrt::Job::submit(calbin, model.name, in, out);
    EXPECT_EQ(job.wait(), calrt::WaitResult::ready);
    return job.status();
  }

  calrt::Api api;
  calrt::Device device;
  calrt::Calbin calbin;
  calrt::CalbinInfo info;
  calrt::ModelDesc prefill, decode;
  calrt::Buffer prefill_in, prefill_out, decode_in, decode_out;
};

}  // namespace simdev::test
