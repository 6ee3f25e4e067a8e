// The one table of xvd's gRPC methods and what each needs (docs/operations.md § Authentication
// and TLS): the role a caller must hold, whether the call changes state (then it is written to the
// audit table, daemon/api/audit_interceptor.h) and how its target is named in the audit row.
// Every method of every service xvd serves is in the table; a method that is not is refused
// (Authorizer fails closed), and method_roles_test compares the table with the services' proto
// descriptors so none is left out.
// Thread-safety: constant data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/token_role.h"

namespace xv::daemon {

struct MethodRule {
  const char* method;   // the gRPC path: "/xv.v1.Experiments/Submit"
  TokenRole required;   // read < submit < admin, or worker (the worker session)
  bool state_changing;  // audited
  // The request's target for the audit row ("experiment 12", "campaign lr"), given the request
  // message as gRPC hands it to an interceptor (a pointer to the method's request type); nullptr
  // when the method names no target.
  std::string (*target)(const void* request);
};

// Every rule, in service order.
const std::vector<MethodRule>& MethodRules();
// The rule of `method`, or nullptr when it is not in the table.
const MethodRule* FindMethodRule(std::string_view method);

}  // namespace xv::daemon
