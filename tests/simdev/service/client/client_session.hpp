// A client device ready to run prefill jobs: calbin configured, prefill buffers with a KV
// handle applied and valid CSRs for a one-token prompt. The raw C calls beside the wrapper
// let tests look at codes and out fields exactly.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "simdev/service/client/client_api.h"

namespace calrt_test {

inline calrt::Api client_api(const std::string& endpoint) {
  return calrt::Api(calrt_client_get_api(CALRT_ABI_MAJOR, endpoint.c_str()));
}

// The code a C call returned (CALRT_OK for NULL), destroying the error.
inline CalrtCode code_of(const CalrtApi* table, CalrtError* error) {
  if (error == nullptr) return CALRT_OK;
  Calrt_Error_GetCode_Args args{};
  args.struct_size = CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE;
  args.error = error;
  table->Error_GetCode(&args);
  Calrt_Error_Destroy_Args destroy{};
  destroy.struct_size = CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE;
  destroy.error = error;
  table->Error_Destroy(&destroy);
  return args.code;
}

struct PrefillSession {
  calrt::Device device;
  calrt::Calbin calbin;
  std::string model;
  calrt::Buffer input, output;
  calrt::Kv kv;

  PrefillSession(const calrt::Api& api, const std::string& calbin_path,
                 const std::string& config = {}) {
    device = calrt::Device::create(api, calrt::DeviceKind::sim, 0, config);
    calbin = calrt::Calbin::create(device, calbin_path);
    calbin.configure();
    prepare();
  }

  // Buffers, KV and CSRs of the prefill model (again, after a reconnect).
  void prepare() {
    for (const calrt::ModelDesc& m : calbin.models()) {
      if (m.type == calrt::ModelType::prefill) {
        model = m.name;
        input = calrt::Buffer::create(calbin, m.name, calrt::Direction::input);
        output = calrt::Buffer::create(calbin, m.name, calrt::Direction::output);
        kv = calrt::Kv::allocate(calbin, 64);
        kv.apply(input);
        for (uint32_t i = 0; i < m.csrs.size(); ++i) {
          input.set_csr(i, m.csrs[i].name == "cur_seq_len" ? 1 : 0);
        }
        return;
      }
    }
    ADD_FAILURE() << "the calbin has no prefill model";
  }

  calrt::Job submit() { return calrt::Job::submit(calbin, model, input, output); }
};

}  // namespace calrt_test
