// Authorizer: who is calling xvd and whether they may (docs/operations.md § Authentication and
// TLS). Every service method asks it first, through AuthorizeCall with the method's gRPC path;
// the role each method needs is in one table (daemon/api/method_roles.h).
//
// Who calls:
//   - a call with `authorization: Bearer TOKEN` is that token's (its SHA-256 is looked up among
//     the tokens; unknown or revoked: UNAUTHENTICATED);
//   - without a token, while authentication is off (no token was ever created and xvd was not
//     started with --require-tokens or a non-loopback --listen): an open caller, allowed
//     everything, as before tokens existed;
//   - without a token, while authentication is on: on the unix socket, the daemon's own uid and
//     root (SO_PEERCRED, UnixPeerRegistry) are the local owner, allowed everything (admin, and
//     the worker session for local workers); anyone else is UNAUTHENTICATED.
// A caller without the role a method needs gets PERMISSION_DENIED naming the role.
//
// Thread-safety: every method may be called concurrently; mu_ guards the token cache.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/token_role.h"
#include "daemon/store/store.h"

namespace xv::daemon {

// The uid of each connection xvd accepted on its unix socket, by the peer name gRPC gives such a
// connection ("fd:N"). A file descriptor number is reused only after gRPC closed the old
// connection, and Record overwrites the entry before the new connection is handed to gRPC.
// Thread-safety: Record and Lookup may be called concurrently.
class UnixPeerRegistry {
 public:
  void Record(int fd, uid_t uid);
  // True with *uid for a peer name of a connection accepted on the unix socket.
  bool Lookup(const std::string& peer, uid_t* uid) const;

 private:
  mutable Mutex mu_;
  std::map<int, uid_t> uid_by_fd_ GUARDED_BY(mu_);
};

struct Caller {
  enum class Kind {
    kOpen,       // authentication is off: everything allowed
    kLocalUser,  // no token, the daemon's uid or root on the unix socket: everything allowed
    kToken,      // a valid token: its role
  };
  Kind kind = Kind::kOpen;
  int64_t token_id = 0;
  TokenRole role = TokenRole::kRead;  // kToken only
  std::string worker_name;            // a worker token's bound name ("" = claims as it registers)
  uid_t uid = 0;                      // kLocalUser only
  // "token:ID", "uid:N" or "local" (the audit table's caller column).
  std::string Label() const;
};

struct AuthorizerOptions {
  // Authentication is on even before the first token exists (xvd --require-tokens; implied by a
  // non-loopback --listen).
  bool require_tokens = false;
  uid_t owner_uid = 0;  // the daemon's uid: the local owner on the unix socket
};

class Authorizer {
 public:
  // `store` and `peers` must outlive the authorizer. Call Load before serving.
  Authorizer(store::Store* store, const UnixPeerRegistry* peers, AuthorizerOptions options);

  // Reads the tokens into the cache.
  Status Load() LOCKS_EXCLUDED(mu_);
  // True when calls need a token (or the local owner's uid).
  bool enforcing() const;

  // Who makes the call of `ctx`: OK with *out, or UNAUTHENTICATED saying why.
  grpc::Status Identify(const grpc::ServerContextBase& ctx, Caller* out) const LOCKS_EXCLUDED(mu_);
  // Identify, then the role `method` needs (MethodRules): OK, UNAUTHENTICATED, or
  // PERMISSION_DENIED naming the method and the missing role (also for a method not in the table).
  grpc::Status Authorize(const grpc::ServerContextBase& ctx, const char* method, Caller* out) const
      LOCKS_EXCLUDED(mu_);

  // Token administration (the Tokens service); each keeps the cache in step with the store.
  // CreateToken returns the token text (shown once) in *secret.
  Status CreateToken(const Caller& by, TokenRole role, const std::string& name,
                     const std::string& worker_name, store::TokenRow* row, std::string* secret)
      LOCKS_EXCLUDED(mu_);
  Status RevokeToken(int64_t id, store::TokenRow* row) LOCKS_EXCLUDED(mu_);
  // Every token ever made, from the store.
  Status ListTokens(std::vector<store::TokenRow>* out) { return store_->tokens().ListTokens(out); }

  // For the worker session of `caller` under `worker_name`: OK when the caller may hold that
  // name (an open or local caller may; a worker token bound to another name may not; an unbound
  // worker token claims a name no other token owns), else PERMISSION_DENIED naming the owner.
  grpc::Status CheckWorkerName(const Caller& caller, const std::string& worker_name) const;

 private:
  store::Store* store_;
  const UnixPeerRegistry* peers_;
  const AuthorizerOptions options_;
  std::atomic<bool> any_token_{false};
  mutable Mutex mu_;
  std::map<std::string, store::TokenRow> tokens_by_hash_ GUARDED_BY(mu_);
};

// For a service handler: OK when `authorizer` is null (a service built without one, in unit tests
// of the service alone) or it admits the call; else the status to return.
grpc::Status AuthorizeCall(const Authorizer* authorizer, const grpc::ServerContextBase& ctx,
                           const char* method, Caller* caller = nullptr);

}  // namespace xv::daemon
