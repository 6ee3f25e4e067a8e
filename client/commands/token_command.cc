// xvctl token create --role R [--name N] [--worker NAME] [--json]
// xvctl token list [--json]
// xvctl token revoke ID [--json]
// xvctl audit [--limit N] [--json]
// Bearer tokens and the audit table of xvd (admin role; docs/operations.md § Authentication and
// TLS). `token create` prints the token once: xvd keeps only its SHA-256.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/views/text_table.h"
#include "common/bounded_json.h"
#include "xv/v1/auth.grpc.pb.h"

namespace xv::client {
namespace {

struct TokenArgs {
  std::string role;
  std::string name;
  std::string worker;
  int64_t id = 0;
  int limit = 50;
  bool json = false;
};

// The Tokens and Audit services on the daemon's channel.
class AuthStubs {
 public:
  explicit AuthStubs(const ClientOptions& options)
      : client_(options),
        tokens_(v1::Tokens::NewStub(client_.channel())),
        audit_(v1::Audit::NewStub(client_.channel())) {}
  template <typename Stub, typename Req, typename Resp, typename Method>
  Status Call(Stub* stub, Method method, const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return client_.FromGrpc((stub->*method)(&ctx, req, resp));
  }
  v1::Tokens::Stub* tokens() { return tokens_.get(); }
  v1::Audit::Stub* audit() { return audit_.get(); }

 private:
  DaemonClient client_;
  std::unique_ptr<v1::Tokens::Stub> tokens_;
  std::unique_ptr<v1::Audit::Stub> audit_;
};

nlohmann::json TokenJson(const v1::Token& t) {
  return {{"id", t.id()},
          {"name", t.name()},
          {"role", t.role()},
          {"worker", t.worker_name()},
          {"created_by", t.created_by()},
          {"created_at", t.created_at()},
          {"revoked_at", t.revoked_at()}};
}

int RunCreate(const TokenArgs& a, const ClientOptions& options) {
  v1::CreateTokenRequest req;
  req.set_role(a.role);
  req.set_name(a.name);
  req.set_worker_name(a.worker);
  AuthStubs stubs(options);
  v1::CreateTokenResponse resp;
  Status st = stubs.Call(stubs.tokens(), &v1::Tokens::Stub::CreateToken, req, &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    nlohmann::json j = TokenJson(resp.token());
    j["token"] = resp.secret();
    std::cout << DumpJsonLossless(j, 2) << std::endl;
    return kExitOk;
  }
  std::cerr << "token " << resp.token().id() << " (role " << resp.token().role()
            << (resp.token().worker_name().empty() ? std::string()
                                                   : ", worker " + resp.token().worker_name())
            << "): shown once, xvd keeps only its hash; store it in a file readable by its user "
               "only and pass --token-file FILE (or XV_TOKEN_FILE)\n";
  std::cout << resp.secret() << std::endl;
  return kExitOk;
}

int RunList(const TokenArgs& a, const ClientOptions& options) {
  AuthStubs stubs(options);
  v1::ListTokensResponse resp;
  Status st =
      stubs.Call(stubs.tokens(), &v1::Tokens::Stub::ListTokens, v1::ListTokensRequest(), &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& t : resp.tokens()) arr.push_back(TokenJson(t));
    std::cout << DumpJsonLossless(nlohmann::json{{"tokens", arr}}, 2) << std::endl;
    return kExitOk;
  }
  TextTable t({{"id", TextTable::Align::kRight},
               {"name"},
               {"role"},
               {"worker"},
               {"created"},
               {"by"},
               {"revoked"}});
  for (const auto& tok : resp.tokens()) {
    t.AddRow({std::to_string(tok.id()), tok.name(), tok.role(), tok.worker_name(), tok.created_at(),
              tok.created_by(), tok.revoked_at()});
  }
  std::cout << t.Render();
  return kExitOk;
}

int RunRevoke(const TokenArgs& a, const ClientOptions& options) {
  AuthStubs stubs(options);
  v1::RevokeTokenRequest req;
  req.set_id(a.id);
  v1::Token resp;
  Status st = stubs.Call(stubs.tokens(), &v1::Tokens::Stub::RevokeToken, req, &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    std::cout << DumpJsonLossless(TokenJson(resp), 2) << std::endl;
  } else {
    std::cout << "token " << resp.id() << " revoked at " << resp.revoked_at() << "\n";
  }
  return kExitOk;
}

int RunAudit(const TokenArgs& a, const ClientOptions& options) {
  AuthStubs stubs(options);
  v1::ListAuditRequest req;
  req.set_limit(a.limit);
  v1::ListAuditResponse resp;
  Status st = stubs.Call(stubs.audit(), &v1::Audit::Stub::ListAudit, req, &resp);
  if (!st.ok()) return ReportError(st);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : resp.records()) {
      arr.push_back({{"id", r.id()},
                     {"at", r.at()},
                     {"token_id", r.token_id()},
                     {"caller", r.caller()},
                     {"peer", r.peer()},
                     {"method", r.method()},
                     {"target", r.target()},
                     {"outcome", r.outcome()},
                     {"detail", r.detail()}});
    }
    std::cout << DumpJsonLossless(nlohmann::json{{"records", arr}}, 2) << std::endl;
    return kExitOk;
  }
  TextTable t({{"id", TextTable::Align::kRight},
               {"at"},
               {"caller"},
               {"method"},
               {"target", TextTable::Align::kLeft, 1, true},
               {"outcome"},
               {"detail", TextTable::Align::kLeft, 2, true}});
  for (const auto& r : resp.records()) {
    t.AddRow({std::to_string(r.id()), r.at(), r.caller(), r.method(), r.target(), r.outcome(),
              r.detail()});
  }
  std::cout << t.Render();
  return kExitOk;
}

// Runs `run` as a subcommand's callback: a non-zero exit code ends xvctl with it.
void OnRun(CLI::App* sub, std::shared_ptr<TokenArgs> args, const ClientOptions* options,
           int (*run)(const TokenArgs&, const ClientOptions&)) {
  sub->callback([args, options, run] {
    int rc = run(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace

void AddTokenCommand(CLI::App* app, const ClientOptions* options) {
  CLI::App* token = app->add_subcommand("token", "bearer tokens of xvd (admin)");
  token->require_subcommand(1);
  auto args = std::make_shared<TokenArgs>();
  CLI::App* create = token->add_subcommand(
      "create", "make a token and print it once (xvd stores only its SHA-256)");
  create->add_option("--role", args->role, "read | submit | admin | worker")
      ->required()
      ->check(CLI::IsMember({"read", "submit", "admin", "worker"}));
  create->add_option("--name", args->name, "what the token is for (shown by token list)");
  create->add_option("--worker", args->worker,
                     "role worker: the one worker name it may register as (default: each name it "
                     "registers first becomes its own)");
  create->add_flag("--json", args->json, "print JSON (the token in \"token\")");
  OnRun(create, args, options, &RunCreate);
  CLI::App* list = token->add_subcommand("list", "every token, revoked ones too (no secrets)");
  list->add_flag("--json", args->json, "print JSON");
  OnRun(list, args, options, &RunList);
  CLI::App* revoke = token->add_subcommand("revoke", "revoke a token: it never works again");
  revoke->add_option("id", args->id, "token id (see token list)")->required();
  revoke->add_flag("--json", args->json, "print JSON");
  OnRun(revoke, args, options, &RunRevoke);
}

void AddAuditCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<TokenArgs>();
  CLI::App* sub =
      app->add_subcommand("audit", "state-changing and refused calls, newest first (admin)");
  sub->add_option("--limit", args->limit, "rows")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  sub->add_flag("--json", args->json, "print JSON");
  OnRun(sub, args, options, &RunAudit);
}

}  // namespace xv::client
