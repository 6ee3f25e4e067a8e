// Maps xv::Status onto grpc::Status (the codes of the same name).
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace xv::daemon {

grpc::Status ToGrpcStatus(const Status& s);

}  // namespace xv::daemon
