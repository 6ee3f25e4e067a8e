// xvctl plan submit FILE.yaml [--json]
// xvctl plan show NAME|ID [--json]
// xvctl plan list [--state S] [--json]
// xvctl plan cancel NAME|ID [--json]
// xvctl plan pause|resume NAME|ID [--json]
// A plan is a YAML of phases that xvd runs as successive rounds without an agent (docs/plans.md).
// `submit` checks the file here first (the same parser as the daemon, so errors name the YAML
// path without a round trip) and sends the texts of its create.recipe and create.policy files,
// found relative to the current directory or to a directory above the plan file.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/numeric_ref.h"
#include "client/views/text_table.h"
#include "common/bounded_json.h"
#include "common/untrusted_text.h"
#include "daemon/sched/plan_spec.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::client {
namespace {

struct PlanArgs {
  std::string file;  // submit
  std::string ref;   // show/cancel/pause/resume: NAME|ID
  std::string state;
  bool json = false;
};

// `name` as given, else relative to the plan file's directory and each directory above it.
Status ReadReferencedFile(const std::string& name, const std::string& plan_file,
                          const std::string& field, std::string* out) {
  namespace fs = std::filesystem;
  std::vector<fs::path> tries = {fs::path(name)};
  if (fs::path(name).is_relative()) {
    for (fs::path dir = fs::absolute(plan_file).parent_path(); !dir.empty();
         dir = dir.parent_path()) {
      tries.push_back(dir / name);
      if (dir == dir.root_path()) break;
    }
  }
  for (const auto& p : tries) {
    std::ifstream f(p, std::ios::binary);
    if (!f) continue;
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
    return Status::Ok();
  }
  return Status::InvalidArgument(field + ": " + name +
                                 ": no such file (relative to the current directory or to a "
                                 "directory above the plan file)");
}

v1::GetPlanRequest PlanRef(const std::string& ref) {
  v1::GetPlanRequest req;
  int64_t id = 0;
  if (ParseNumericRef(ref, &id)) {
    req.set_id(id);
  } else {
    req.set_name(ref);
  }
  return req;
}

nlohmann::json PlanJson(const v1::Plan& p) {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& ph : p.phases()) {
    phases.push_back({{"index", ph.index()},
                      {"name", ph.name()},
                      {"kind", ph.kind()},
                      {"state", ph.state()},
                      {"round_id", ph.round_id()},
                      {"kept", ph.kept_candidate().empty() ? nlohmann::json()
                                                           : nlohmann::json(ph.kept_candidate())},
                      {"outcome", ph.outcome()}});
  }
  return {{"id", p.id()},
          {"name", p.name()},
          {"campaign", p.campaign()},
          {"state", p.state()},
          {"current_phase", p.current_phase()},
          {"reason", p.reason()},
          {"created_at", p.created_at()},
          {"updated_at", p.updated_at()},
          {"phases", phases}};
}

std::string RenderPlan(const v1::Plan& p) {
  using A = TextTable::Align;
  std::ostringstream out;
  out << "plan " << EscapeForTerminal(p.name()) << " #" << p.id() << " ("
      << EscapeForTerminal(p.state()) << "), campaign " << EscapeForTerminal(p.campaign())
      << ", phase " << std::min(p.current_phase() + 1, static_cast<int32_t>(p.phases_size())) << "/"
      << p.phases_size() << "\n";
  if (!p.reason().empty()) out << "reason: " << EscapeForTerminal(p.reason()) << "\n";
  TextTable t({{"#", A::kRight},
               {"phase", A::kLeft},
               {"kind", A::kLeft},
               {"state", A::kLeft},
               {"round", A::kRight},
               {"kept", A::kLeft},
               {"outcome", A::kLeft}});
  for (const auto& ph : p.phases()) {
    t.AddRow({std::to_string(ph.index() + 1), ph.name(), ph.kind(), ph.state(),
              ph.round_id() ? std::to_string(ph.round_id()) : "-",
              ph.kept_candidate().empty() ? "-" : ph.kept_candidate(),
              ph.outcome().empty() ? "-" : ph.outcome()});
  }
  out << t.Render();
  return out.str();
}

std::string RenderPlanList(const v1::ListPlansResponse& resp) {
  using A = TextTable::Align;
  TextTable t({{"id", A::kRight},
               {"name", A::kLeft},
               {"campaign", A::kLeft},
               {"state", A::kLeft},
               {"phase", A::kLeft},
               {"updated", A::kLeft}});
  for (const auto& p : resp.plans()) {
    t.AddRow({std::to_string(p.id()), p.name(), p.campaign(), p.state(),
              std::to_string(std::min(p.current_phase() + 1, p.phases_size())) + "/" +
                  std::to_string(p.phases_size()),
              p.updated_at()});
  }
  return t.Render();
}

class PlansClient {
 public:
  explicit PlansClient(const ClientOptions& options) : client_(options) {
    stub_ = v1::Plans::NewStub(client_.channel());
  }
  template <typename Req, typename Resp, typename Call>
  Status Call_(Call call, const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    Status s = client_.FromGrpc(((*stub_).*call)(&ctx, req, resp));
    // A list trimmed under the daemon's reply cap (daemon/api/reply_caps.h) says what it left out.
    const auto& trailers = ctx.GetServerTrailingMetadata();
    if (auto it = trailers.find("xv-rows-omitted"); s.ok() && it != trailers.end()) {
      std::cerr << "xvctl: the daemon left out the "
                << std::string(it->second.data(), it->second.size())
                << " oldest plans to keep its reply under its size cap\n";
    }
    return s;
  }
  Status Submit(const v1::SubmitPlanRequest& r, v1::Plan* p) {
    return Call_(&v1::Plans::Stub::SubmitPlan, r, p);
  }
  Status Get(const v1::GetPlanRequest& r, v1::Plan* p) {
    return Call_(&v1::Plans::Stub::GetPlan, r, p);
  }
  Status List(const v1::ListPlansRequest& r, v1::ListPlansResponse* p) {
    return Call_(&v1::Plans::Stub::ListPlans, r, p);
  }
  Status Cancel(const v1::GetPlanRequest& r, v1::Plan* p) {
    return Call_(&v1::Plans::Stub::CancelPlan, r, p);
  }
  Status SetPaused(const v1::GetPlanRequest& r, bool pause, v1::Plan* p) {
    return Call_(pause ? &v1::Plans::Stub::PausePlan : &v1::Plans::Stub::ResumePlan, r, p);
  }

 private:
  DaemonClient client_;
  std::unique_ptr<v1::Plans::Stub> stub_;
};

int Print(const PlanArgs& a, const v1::Plan& p, const std::string& verb) {
  if (a.json) {
    std::cout << DumpJsonLossless(PlanJson(p), 2) << std::endl;
  } else {
    if (!verb.empty()) std::cout << verb << " ";
    std::cout << RenderPlan(p);
  }
  return kExitOk;
}

int RunSubmit(const PlanArgs& a, const ClientOptions& options) {
  v1::SubmitPlanRequest req;
  std::ifstream f(a.file, std::ios::binary);
  if (!f) return ReportError(Status::InvalidArgument(a.file + ": cannot read the file"));
  std::stringstream ss;
  ss << f.rdbuf();
  req.set_yaml(ss.str());
  sched::PlanSpec spec;
  Status st = sched::ParsePlanYaml(req.yaml(), &spec);
  if (!st.ok()) return ReportError(Status::InvalidArgument(a.file + ": " + st.message()));
  if (spec.create.set) {
    std::string text;
    st = ReadReferencedFile(spec.create.recipe_path, a.file, "create.recipe", &text);
    if (!st.ok()) return ReportError(st);
    req.set_base_recipe_yaml(text);
    if (!spec.create.policy_path.empty()) {
      st = ReadReferencedFile(spec.create.policy_path, a.file, "create.policy", &text);
      if (!st.ok()) return ReportError(st);
      req.set_policy(text);
    }
  }
  const char* user = std::getenv("USER");
  req.set_submitter(std::string("xvctl plan submit") +
                    (user ? " (" + std::string(user) + ")" : ""));
  PlansClient client(options);
  v1::Plan p;
  st = client.Submit(req, &p);
  if (!st.ok()) return ReportError(st);
  return Print(a, p, "submitted");
}

}  // namespace

void AddPlanCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* plan = app->add_subcommand(
      "plan",
      "plans: YAML phases (sweep, candidates, ablation, confirm, failure_map) that xvd "
      "runs as successive rounds without an agent (docs/plans.md)");
  plan->require_subcommand(1);
  CLI::App* submit = plan->add_subcommand("submit", "check a plan file and start it");
  submit->add_option("file", args->file, "plan YAML (e.g. recipes/plans/cpu-tiny-lr-night.yaml)")
      ->required();
  submit->add_flag("--json", args->json, "print the plan as JSON");
  submit->callback([args, options] {
    int rc = RunSubmit(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
  CLI::App* show = plan->add_subcommand("show", "a plan's phases, rounds and outcomes");
  show->add_option("plan", args->ref, "plan name (the newest of that name) or id")->required();
  show->add_flag("--json", args->json, "print as JSON");
  show->callback([args, options] {
    PlansClient client(*options);
    v1::Plan p;
    Status st = client.Get(PlanRef(args->ref), &p);
    int rc = st.ok() ? Print(*args, p, "") : ReportError(st);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
  CLI::App* list = plan->add_subcommand("list", "every plan, oldest first");
  list->add_option("--state", args->state, "running | paused | done | failed | cancelled");
  list->add_flag("--json", args->json, "print as JSON");
  list->callback([args, options] {
    PlansClient client(*options);
    v1::ListPlansRequest req;
    req.set_state(args->state);
    v1::ListPlansResponse resp;
    Status st = client.List(req, &resp);
    if (!st.ok()) throw CLI::RuntimeError(ReportError(st));
    if (args->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& p : resp.plans()) j.push_back(PlanJson(p));
      std::cout << DumpJsonLossless(j, 2) << std::endl;
    } else if (resp.plans_size() == 0) {
      std::cout << "no plans" << std::endl;
    } else {
      std::cout << RenderPlanList(resp);
    }
  });
  CLI::App* cancel = plan->add_subcommand(
      "cancel",
      "end a running or paused plan: no further phase starts; its open round's runs are cancelled");
  cancel->add_option("plan", args->ref, "plan name or id")->required();
  cancel->add_flag("--json", args->json, "print as JSON");
  cancel->callback([args, options] {
    PlansClient client(*options);
    v1::Plan p;
    Status st = client.Cancel(PlanRef(args->ref), &p);
    int rc = st.ok() ? Print(*args, p, "cancelled") : ReportError(st);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
  for (bool pause : {true, false}) {
    CLI::App* sub = plan->add_subcommand(
        pause ? "pause" : "resume",
        pause ? "start no further phase round (the round in flight is decided as usual)"
              : "continue a paused plan where it stopped");
    sub->add_option("plan", args->ref, "plan name or id")->required();
    sub->add_flag("--json", args->json, "print as JSON");
    sub->callback([args, options, pause] {
      PlansClient client(*options);
      v1::Plan p;
      Status st = client.SetPaused(PlanRef(args->ref), pause, &p);
      int rc = st.ok() ? Print(*args, p, pause ? "paused" : "resumed") : ReportError(st);
      if (rc != kExitOk) throw CLI::RuntimeError(rc);
    });
  }
}

}  // namespace xv::client
