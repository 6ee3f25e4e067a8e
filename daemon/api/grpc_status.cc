#include "daemon/api/grpc_status.h"

#include "common/untrusted_text.h"

namespace xv::daemon {

std::string BoundedStatusMessage(std::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes && IsValidUtf8(message)) {
    return std::string(message);
  }
  std::string out = SanitizeAndTruncateUtf8(message, kMaxStatusMessageBytes);
  if (message.size() > kMaxStatusMessageBytes) {
    out += "… (message cut: " + std::to_string(message.size()) + " bytes)";
  }
  return out;
}

grpc::Status ToGrpcStatus(const Status& s) {
  using C = Status::Code;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (s.code()) {
    case C::kOk:
      return grpc::Status::OK;
    case C::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case C::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case C::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case C::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case C::kIoError:
    case C::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case C::kDataLoss:
      code = grpc::StatusCode::DATA_LOSS;
      break;
    case C::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case C::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
    case C::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case C::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
  }
  return grpc::Status(code, BoundedStatusMessage(s.message()));
}

}  // namespace xv::daemon
