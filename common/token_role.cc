#include "common/token_role.h"

namespace xv {
namespace {

// The rank of a client role; worker is not ranked.
int ClientRank(TokenRole role) {
  switch (role) {
    case TokenRole::kRead:
      return 1;
    case TokenRole::kSubmit:
      return 2;
    case TokenRole::kAdmin:
      return 3;
    case TokenRole::kWorker:
      return 0;
  }
  return 0;
}

}  // namespace

std::string_view ToString(TokenRole role) {
  switch (role) {
    case TokenRole::kRead:
      return "read";
    case TokenRole::kSubmit:
      return "submit";
    case TokenRole::kAdmin:
      return "admin";
    case TokenRole::kWorker:
      return "worker";
  }
  return "";
}

bool ParseTokenRole(std::string_view text, TokenRole* out) {
  for (TokenRole r :
       {TokenRole::kRead, TokenRole::kSubmit, TokenRole::kAdmin, TokenRole::kWorker}) {
    if (text == ToString(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}

bool RoleAllows(TokenRole held, TokenRole required) {
  if (required == TokenRole::kWorker || held == TokenRole::kWorker) return held == required;
  return ClientRank(held) >= ClientRank(required);
}

}  // namespace xv
