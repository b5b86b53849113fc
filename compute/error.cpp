#include "compute/error.h"

namespace attn {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::UnknownVariant: return "unknown variant";
    case ErrorCode::BadParameter: return "bad parameter";
    case ErrorCode::NonFinite: return "non-finite input";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Io: return "i/o error";
    case ErrorCode::Format: return "format error";
    case ErrorCode::Device: return "device error";
    case ErrorCode::Cancelled: return "cancelled";
  }
  return "error";
}

}  // namespace attn
