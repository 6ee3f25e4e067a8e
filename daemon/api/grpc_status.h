// Maps xv::Status onto grpc::Status (the codes of the same name), the edge where every error of the
// client API leaves the daemon. No message leaves longer than kMaxStatusMessageBytes: gRPC carries
// it percent-encoded in the grpc-message trailer (up to 3 bytes per byte), and a trailer over the
// peer's metadata limit (8 KiB by default) turns the call into RESOURCE_EXHAUSTED with the message
// lost. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace xv::daemon {

// The most bytes of an error message sent to a client or written to a log line about a request.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// `message` as valid UTF-8 of at most kMaxStatusMessageBytes bytes (plus a short note saying how
// long it was), cut on a code-point boundary. Shorter valid messages come back unchanged.
std::string BoundedStatusMessage(std::string_view message);

// The grpc::Status of `s`, its message bounded by BoundedStatusMessage.
grpc::Status ToGrpcStatus(const Status& s);

}  // namespace xv::daemon
