// calbin's C++ enums to the ABI's C enums.
#pragma once

#include "abi/calrt.h"
#include "calbin/manifest.hpp"

namespace simdev::runtime {

inline CalrtDtype to_abi(calbin::Dtype dtype) {
  switch (dtype) {
    case calbin::Dtype::kInt8:
      return CALRT_DTYPE_INT8;
    case calbin::Dtype::kInt32:
      return CALRT_DTYPE_INT32;
    case calbin::Dtype::kBf16:
      return CALRT_DTYPE_BF16;
    case calbin::Dtype::kF16:
      return CALRT_DTYPE_F16;
    case calbin::Dtype::kF32:
      return CALRT_DTYPE_F32;
    case calbin::Dtype::kInt4:
      return CALRT_DTYPE_INT4;
  }
  return CALRT_DTYPE_COUNT_;
}

inline CalrtModelType to_abi(calbin::ModelType type) {
  switch (type) {
    case calbin::ModelType::kPrefill:
      return CALRT_MODEL_PREFILL;
    case calbin::ModelType::kDecode:
      return CALRT_MODEL_DECODE;
    case calbin::ModelType::kKvUpdate:
      return CALRT_MODEL_KV_UPDATE;
  }
  return CALRT_MODEL_TYPE_COUNT_;
}

inline CalrtTensorRole to_abi(calbin::TensorRole role) {
  switch (role) {
    case calbin::TensorRole::kOther:
      return CALRT_ROLE_OTHER;
    case calbin::TensorRole::kToken:
      return CALRT_ROLE_TOKEN;
    case calbin::TensorRole::kPosition:
      return CALRT_ROLE_POSITION;
    case calbin::TensorRole::kLogits:
      return CALRT_ROLE_LOGITS;
    case calbin::TensorRole::kTopIds:
      return CALRT_ROLE_TOP_IDS;
    case calbin::TensorRole::kTopLogits:
      return CALRT_ROLE_TOP_LOGITS;
  }
  return CALRT_ROLE_COUNT_;
}

inline CalrtLayout to_abi(calbin::Layout::Kind kind) {
  return kind == calbin::Layout::Kind::kTiled ? CALRT_LAYOUT_TILED : CALRT_LAYOUT_ROW_MAJOR;
}

}  // namespace simdev::runtime
