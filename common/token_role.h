// TokenRole: what a bearer token (or a local caller known by its uid) may do with xvd
// (docs/operations.md § Authentication and TLS). read < submit < admin are client roles, each
// allowing what the one below allows; worker is apart: it opens the worker session and nothing
// else, and no client role opens a worker session.
// Names ("read", "submit", "admin", "worker") appear at the tokens table, the proto and flags only.
// Thread-safety: pure functions over constant data.
#pragma once

#include <string_view>

namespace xv {

enum class TokenRole { kRead, kSubmit, kAdmin, kWorker };
std::string_view ToString(TokenRole role);
// True when `text` is exactly one of the names.
bool ParseTokenRole(std::string_view text, TokenRole* out);
// True when a caller holding `held` may call a method that requires `required`: the client roles
// are ordered (admin holds submit and read, submit holds read); worker holds worker only.
bool RoleAllows(TokenRole held, TokenRole required);

}  // namespace xv
