#include "client/mcp/mcp_campaign_tools.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "client/mcp/mcp_answers.h"
#include "client/mcp/mcp_arguments.h"
#include "client/mcp/mcp_watch_replay.h"
#include "client/numeric_ref.h"
#include "client/requests/candidate_spec.h"
#include "client/views/watch_event_view.h"
#include "common/text_file.h"
#include "common/untrusted_text.h"
#include "daemon/sched/plan_spec.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::client {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The events tool: the replay of stored events is over once nothing arrived for this long; a page
// never takes longer than kEventsPageMax.
constexpr std::chrono::milliseconds kEventsQuiet(400);
constexpr std::chrono::seconds kEventsPageMax(8);
// The most a tool reads of a plan or recipe file.
constexpr off_t kMaxPlanFileBytes = 1 << 20;

json Schema(json properties, std::vector<std::string> required = {}) {
  json s = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) s["required"] = required;
  s["additionalProperties"] = false;
  return s;
}

// An output schema: the properties an answer has (none required, so a tool error's {error, code}
// fits it too).
json Output(json properties) {
  properties["error"] = {{"type", "string"}};
  properties["code"] = {{"type", "string"}};
  return {{"type", "object"}, {"properties", std::move(properties)}};
}

json CampaignProperty(const std::string& description) {
  return {{"anyOf", json::array({{{"type", "string"}}, {{"type", "integer"}, {"minimum", 1}}})},
          {"description", description}};
}

std::string CampaignRefText(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return std::to_string(v.get<int64_t>());
  return v.is_string() ? v.get<std::string>() : "";
}

const json& SubmitOutput() {
  static const json* s = new json(Output({{"campaign_id", {{"type", "integer"}}},
                                          {"round_id", {{"type", "integer"}}},
                                          {"experiment_ids", {{"type", "array"}}},
                                          {"runs", {{"type", "integer"}}},
                                          {"candidate_runs", {{"type", "integer"}}},
                                          {"control_runs", {{"type", "integer"}}},
                                          {"eta_s", {{"type", "number"}}},
                                          {"eta_basis", {{"type", "string"}}}}));
  return *s;
}

// Submits `req` (a round of kind ablation or confirm) and answers like submit.
McpToolResult SubmitRound(DaemonClient* client, v1::SubmitRequest req) {
  const char* user = ::getenv("USER");
  req.set_submitter(std::string("xvctl mcp") + (user ? " (" + std::string(user) + ")" : ""));
  v1::SubmitResponse resp;
  Status st = client->Submit(req, &resp);
  if (!st.ok()) return McpToolResult::Error(st);
  json j = SubmitResponseJson(resp);
  j["kind"] = req.kind();
  j.update(SubmissionCost(client, resp));
  return McpToolResult::Json(j);
}

McpTool AblateTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "ablate";
  t.title = "Drop-one ablation of the head";
  t.description =
      "Queue an ablation round: one candidate per knob where the campaign's head differs from its "
      "base recipe, each resetting that one knob (\"-matrix_lr\"), with the head as control. The "
      "decision says which of the head's changes matter. Answers like submit (ids, runs, ETA); "
      "wait, then campaign_show.";
  t.input_schema =
      Schema({{"campaign", CampaignProperty("campaign name or id")},
              {"replicates",
               {{"type", "integer"},
                {"minimum", 1},
                {"maximum", 64},
                {"description", "runs per candidate (the policy's are the minimum)"}}}},
             {"campaign"});
  t.output_schema = SubmitOutput();
  t.handler = [client](const json& args, McpCallContext*) {
    v1::SubmitRequest req;
    std::string name;
    Status st = CampaignNameOf(client.get(), args["campaign"], "arguments.campaign", &name);
    if (!st.ok()) return McpToolResult::Error(st);
    req.set_campaign(name);
    req.set_kind("ablation");
    req.set_replicates(static_cast<int>(args.value("replicates", 0)));
    return SubmitRound(client.get(), req);
  };
  return t;
}

McpTool ConfirmTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "confirm";
  t.title = "Re-run the head with fresh seeds";
  t.description =
      "Queue a confirm round: the campaign's head (and optionally one candidate) again with "
      "`seeds` fresh seeds; the round's decision stores the mean and sd of each. Use it before "
      "trusting a small improvement. Answers like submit (ids, runs, ETA).";
  t.input_schema =
      Schema({{"campaign", CampaignProperty("campaign name or id")},
              {"seeds",
               {{"type", "integer"},
                {"minimum", 1},
                {"maximum", 64},
                {"description", "how many fresh seeds (runs of the head)"}}},
              {"candidate",
               {{"anyOf", json::array({{{"type", "object"}}, {{"type", "string"}}})},
                {"description",
                 "also run this candidate with the same seeds: {knob: value} or \"k=v,k2=v2\""}}}},
             {"campaign", "seeds"});
  t.output_schema = SubmitOutput();
  t.handler = [client](const json& args, McpCallContext*) {
    v1::SubmitRequest req;
    std::string name;
    Status st = CampaignNameOf(client.get(), args["campaign"], "arguments.campaign", &name);
    if (!st.ok()) return McpToolResult::Error(st);
    req.set_campaign(name);
    req.set_kind("confirm");
    req.set_replicates(static_cast<int>(args["seeds"].get<double>()));
    if (args.contains("candidate")) {
      const json& c = args["candidate"];
      std::string text = c.is_string() ? c.get<std::string>() : "";
      if (c.is_object()) st = OverrideMapText(c, "arguments.candidate", &text);
      std::vector<v1::Override> overrides;
      if (st.ok()) st = ParseCandidate(text, &overrides).WithContext("arguments.candidate: ");
      if (!st.ok()) return McpToolResult::Error(st);
      v1::Candidate* cand = req.add_candidates();
      for (const auto& o : overrides) *cand->add_overrides() = o;
    }
    return SubmitRound(client.get(), req);
  };
  return t;
}

McpTool CampaignPauseTool(std::shared_ptr<DaemonClient> client, bool pause) {
  McpTool t;
  t.name = pause ? "campaign_pause" : "campaign_resume";
  t.title = pause ? "Pause a campaign" : "Resume a campaign";
  t.description =
      pause ? "Pause a campaign: its queued experiments are not assigned until campaign_resume; "
              "running ones finish and rounds are decided as usual. Answers the campaign's state."
            : "Resume a paused campaign: its queued experiments are assigned again. Answers the "
              "campaign's state.";
  t.input_schema = Schema({{"campaign", CampaignProperty("campaign name or id")}}, {"campaign"});
  t.output_schema = Output({{"id", {{"type", "integer"}}},
                            {"name", {{"type", "string"}}},
                            {"state", {{"type", "string"}}}});
  t.hints.idempotent = true;
  t.handler = [client, pause](const json& args, McpCallContext*) {
    v1::Campaign c;
    Status st = client->SetCampaignPaused(CampaignRefText(args["campaign"]), pause, &c);
    if (st.code() == Status::Code::kNotFound) st = st.WithContext("arguments.campaign: ");
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(
        DropEmpty({{"id", c.id()}, {"name", c.name()}, {"state", c.state()}}));
  };
  return t;
}

// ---- events ----

json EventSummary(const v1::WatchEvent& ev) {
  json j = WatchEventJson(ev);
  j.erase("event");  // the stored trainer event verbatim: the figures above carry what matters
  j.erase("campaign_id");
  if (ev.attempt() <= 1) j.erase("attempt");
  return DropEmpty(j);
}

McpTool EventsTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "events";
  t.title = "Events after a cursor";
  t.description =
      "The daemon's stored events in order, after `after` (a cursor; 0 = from the first): "
      "experiment states with their causes, trainer start/eval/nan/summary/error, round "
      "decisions and head moves (steps only when asked for in `kinds`). Answers at most `limit` "
      "events and next_cursor: call again with after = next_cursor to read on (more: true says "
      "the page was full). Filter by campaign or experiment_id.";
  t.input_schema = Schema(
      {{"after",
        {{"type", "integer"},
         {"minimum", 0},
         {"description", "cursor: only events after it (default 0)"}}},
       {"campaign", {{"type", "string"}, {"description", "only this campaign's events (name)"}}},
       {"experiment_id",
        {{"type", "integer"}, {"minimum", 1}, {"description", "only this experiment's events"}}},
       {"kinds",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description",
          "event kinds (state, start, step, eval, nan, summary, error, decision, head); default "
          "all but step"}}},
       {"limit",
        {{"type", "integer"},
         {"minimum", 1},
         {"maximum", 1000},
         {"description", "at most this many events (default 100)"}}}});
  t.output_schema = Output({{"events", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                            {"next_cursor", {{"type", "integer"}}},
                            {"more", {{"type", "boolean"}}}});
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client](const json& args, McpCallContext* ctx) {
    v1::WatchRequest req;
    const int64_t after = args.value("after", int64_t{0});
    req.set_since(after);
    req.set_campaign(args.value("campaign", ""));
    req.set_experiment_id(args.value("experiment_id", int64_t{0}));
    if (args.contains("kinds")) {
      for (const auto& k : args["kinds"]) req.add_kinds(k.get<std::string>());
    } else {
      for (const char* k :
           {"state", "start", "eval", "nan", "summary", "error", "decision", "head"}) {
        req.add_kinds(k);
      }
    }
    std::vector<v1::WatchEvent> events;
    WatchReplayEnd end;
    Status st = ReadWatchReplay(
        client.get(), req,
        {static_cast<size_t>(args.value("limit", 100)), kEventsQuiet, kEventsPageMax}, nullptr, ctx,
        &events, &end);
    const bool more = end.more;
    if (st.code() == Status::Code::kNotFound) st = st.WithContext("arguments.campaign: ");
    if (st.message().rfind("kinds: ", 0) == 0) st = st.WithContext("arguments.");
    if (!st.ok()) return McpToolResult::Error(st);
    json arr = json::array();
    int64_t cursor = after;
    for (const auto& ev : events) {
      arr.push_back(EventSummary(ev));
      cursor = std::max(cursor, ev.cursor());
    }
    return McpToolResult::Json({{"events", arr}, {"next_cursor", cursor}, {"more", more}});
  };
  return t;
}

// ---- plans ----

// The Plans service on the daemon's channel.
class PlansStub {
 public:
  explicit PlansStub(DaemonClient* client) : client_(client) {
    stub_ = v1::Plans::NewStub(client->channel());
  }
  template <typename Req, typename Resp, typename Method>
  Status Call(Method method, const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return client_->FromGrpc(((*stub_).*method)(&ctx, req, resp));
  }

 private:
  DaemonClient* client_;
  std::unique_ptr<v1::Plans::Stub> stub_;
};

json PlanSummary(const v1::Plan& p) {
  json phases = json::array();
  for (const auto& ph : p.phases()) {
    phases.push_back(DropEmpty({{"index", ph.index()},
                                {"name", ph.name()},
                                {"kind", ph.kind()},
                                {"state", ph.state()},
                                {"round_id", ph.round_id()},
                                {"kept", ph.kept_candidate()},
                                {"outcome", ph.outcome()}}));
  }
  return DropEmpty({{"id", p.id()},
                    {"name", p.name()},
                    {"campaign", p.campaign()},
                    {"state", p.state()},
                    {"current_phase", p.current_phase()},
                    {"reason", p.reason()},
                    {"phases", phases}});
}

v1::GetPlanRequest PlanRef(const json& v) {
  v1::GetPlanRequest req;
  if (v.is_number_integer() || v.is_number_unsigned()) {
    req.set_id(v.get<int64_t>());
  } else {
    req.set_name(v.get<std::string>());
  }
  return req;
}

// `name` as given, else relative to `plan_path`'s directory and each directory above it (as
// `xvctl plan submit` finds a plan's create.recipe and create.policy).
Status ReadPlanReference(const std::string& name, const std::string& plan_path,
                         const std::string& field, std::string* out) {
  namespace fs = std::filesystem;
  std::vector<fs::path> tries = {fs::path(name)};
  if (fs::path(name).is_relative() && !plan_path.empty()) {
    for (fs::path dir = fs::absolute(plan_path).parent_path(); !dir.empty();
         dir = dir.parent_path()) {
      tries.push_back(dir / name);
      if (dir == dir.root_path()) break;
    }
  }
  for (const auto& p : tries) {
    if (ReadRegularFile(p.string(), kMaxPlanFileBytes, out).ok()) return Status::Ok();
  }
  return Status::InvalidArgument(field + ": " + QuoteExcerpt(name) +
                                 ": no readable file (relative to the directory xvctl mcp runs in "
                                 "or to a directory above the plan file)");
}

json PlanOutput() {
  return Output({{"id", {{"type", "integer"}}},
                 {"name", {{"type", "string"}}},
                 {"campaign", {{"type", "string"}}},
                 {"state", {{"type", "string"}}},
                 {"phases", {{"type", "array"}}},
                 {"plans", {{"type", "array"}}}});
}

McpTool PlanSubmitTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "plan_submit";
  t.title = "Start a plan";
  t.description =
      "Start a plan: YAML phases (sweep, candidates, ablation, confirm, failure_map) that the "
      "daemon runs as successive rounds of one campaign without an agent (the guide: resource "
      "xv://docs/plans.md, or knobs {doc: \"plans.md\"}). Give `plan_path` (a file on this "
      "machine) or `yaml` (the text). A create: section's recipe and policy files are read "
      "relative to the plan file. Refusals name the YAML path (phases[2].sweep...).";
  t.input_schema =
      Schema({{"plan_path", {{"type", "string"}, {"description", "plan YAML file"}}},
              {"yaml", {{"type", "string"}, {"description", "the plan's YAML text instead"}}}});
  t.output_schema = PlanOutput();
  t.handler = [client](const json& args, McpCallContext*) {
    const std::string path = args.value("plan_path", "");
    v1::SubmitPlanRequest req;
    if (path.empty() == !args.contains("yaml")) {
      return McpToolResult::Error(
          Status::InvalidArgument("arguments.plan_path: give plan_path or yaml (one of them)"));
    }
    std::string text = args.value("yaml", "");
    Status st;
    if (!path.empty()) {
      st = ReadRegularFile(path, kMaxPlanFileBytes, &text);
      if (!st.ok()) st = Status::InvalidArgument("arguments.plan_path: " + st.message());
    }
    sched::PlanSpec spec;
    if (st.ok()) st = sched::ParsePlanYaml(text, &spec).WithContext("plan: ");
    if (st.ok() && spec.create.set) {
      std::string recipe;
      st = ReadPlanReference(spec.create.recipe_path, path, "create.recipe", &recipe);
      req.set_base_recipe_yaml(recipe);
      if (st.ok() && !spec.create.policy_path.empty()) {
        std::string policy;
        st = ReadPlanReference(spec.create.policy_path, path, "create.policy", &policy);
        req.set_policy(policy);
      }
    }
    if (!st.ok()) return McpToolResult::Error(st);
    req.set_yaml(text);
    const char* user = ::getenv("USER");
    req.set_submitter(std::string("xvctl mcp") + (user ? " (" + std::string(user) + ")" : ""));
    v1::Plan p;
    st = PlansStub(client.get()).Call(&v1::Plans::Stub::SubmitPlan, req, &p);
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(PlanSummary(p));
  };
  return t;
}

McpTool PlanShowTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "plan_show";
  t.title = "A plan's phases, or every plan";
  t.description =
      "One plan (by name, the newest of that name, or id): its state, current phase and each "
      "phase's kind, state, round and outcome (kept candidate, skip reason). Without `plan`: "
      "every plan, oldest first (optionally only those in `state`).";
  t.input_schema = Schema(
      {{"plan",
        {{"anyOf", json::array({{{"type", "string"}}, {{"type", "integer"}, {"minimum", 1}}})},
         {"description", "plan name or id; omit for the list"}}},
       {"state",
        {{"type", "string"},
         {"enum", json::array({"running", "paused", "done", "failed", "cancelled"})},
         {"description", "the list: only plans in this state"}}}});
  t.output_schema = PlanOutput();
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client](const json& args, McpCallContext*) {
    PlansStub plans(client.get());
    if (args.contains("plan")) {
      v1::Plan p;
      Status st = plans.Call(&v1::Plans::Stub::GetPlan, PlanRef(args["plan"]), &p);
      if (st.code() == Status::Code::kNotFound) st = st.WithContext("arguments.plan: ");
      if (!st.ok()) return McpToolResult::Error(st);
      return McpToolResult::Json(PlanSummary(p));
    }
    v1::ListPlansRequest req;
    req.set_state(args.value("state", ""));
    v1::ListPlansResponse resp;
    Status st = plans.Call(&v1::Plans::Stub::ListPlans, req, &resp);
    if (!st.ok()) return McpToolResult::Error(st);
    json arr = json::array();
    for (const auto& p : resp.plans()) {
      arr.push_back(
          DropEmpty({{"id", p.id()},
                     {"name", p.name()},
                     {"campaign", p.campaign()},
                     {"state", p.state()},
                     {"phase", std::to_string(std::min(p.current_phase() + 1, p.phases_size())) +
                                   "/" + std::to_string(p.phases_size())}}));
    }
    return McpToolResult::Json({{"plans", arr}});
  };
  return t;
}

McpTool PlanControlTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "plan_control";
  t.title = "Cancel, pause or resume a plan";
  t.description =
      "action cancel: end a running or paused plan (no further phase starts; its open round's "
      "unfinished runs are cancelled). pause: start no further phase round (the round in flight "
      "is decided as usual). resume: continue a paused plan where it stopped. Refused, naming the "
      "plan and its state, when the action does not apply.";
  t.input_schema = Schema(
      {{"plan",
        {{"anyOf", json::array({{{"type", "string"}}, {{"type", "integer"}, {"minimum", 1}}})},
         {"description", "plan name or id"}}},
       {"action", {{"type", "string"}, {"enum", json::array({"cancel", "pause", "resume"})}}}},
      {"plan", "action"});
  t.output_schema = PlanOutput();
  t.hints.destructive = true;  // cancel ends the plan and its round's runs
  t.handler = [client](const json& args, McpCallContext*) {
    PlansStub plans(client.get());
    const std::string action = args["action"].get<std::string>();
    v1::Plan p;
    Status st = plans.Call(action == "cancel"  ? &v1::Plans::Stub::CancelPlan
                           : action == "pause" ? &v1::Plans::Stub::PausePlan
                                               : &v1::Plans::Stub::ResumePlan,
                           PlanRef(args["plan"]), &p);
    if (st.code() == Status::Code::kNotFound) st = st.WithContext("arguments.plan: ");
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(PlanSummary(p));
  };
  return t;
}

}  // namespace

json SubmissionCost(DaemonClient* client, const v1::SubmitResponse& resp) {
  json cost = {{"runs", resp.experiment_ids_size()}};
  v1::ListExperimentsRequest round_req;
  round_req.set_round_id(resp.round_id());
  round_req.set_limit(1000);
  v1::ListExperimentsResponse round_rows;
  if (client->ListExperiments(round_req, &round_rows).ok()) {
    int controls = 0, reused = 0;
    for (const auto& e : round_rows.experiments()) {
      controls += e.role() == "control" ? 1 : 0;
      reused += e.reused_from_id() != 0 ? 1 : 0;
    }
    cost["candidate_runs"] = round_rows.experiments_size() - controls;
    cost["control_runs"] = controls;
    if (reused > 0) cost["reused"] = reused;
  }
  std::vector<double> recent;
  for (const int64_t campaign_id : {resp.campaign_id(), int64_t{0}}) {
    v1::ListExperimentsRequest req;
    req.set_campaign_id(campaign_id);
    req.set_state("succeeded");
    req.set_descending(true);
    req.set_limit(20);
    v1::ListExperimentsResponse rows;
    if (!client->ListExperiments(req, &rows).ok()) break;
    for (const auto& e : rows.experiments()) {
      if (e.has_result() && e.reused_from_id() == 0) recent.push_back(e.result().total_seconds());
    }
    if (!recent.empty()) break;
  }
  v1::StatusResponse status;
  if (!client->GetStatus(&status).ok()) return cost;
  int64_t workers = 0;
  for (const auto& w : status.workers()) {
    workers += w.state() == "idle" || w.state() == "busy" ? 1 : 0;
  }
  const json eta = EtaEstimate(recent, status.queued() + status.running(), workers);
  if (eta.contains("eta_s")) cost["eta_s"] = eta["eta_s"];
  cost["eta_basis"] = eta["basis"];
  return cost;
}

Status CampaignNameOf(DaemonClient* client, const nlohmann::json& value, const std::string& field,
                      std::string* name) {
  if (value.is_string()) {
    *name = value.get<std::string>();
    return Status::Ok();
  }
  if (!(value.is_number_integer() || value.is_number_unsigned())) {
    return Status::InvalidArgument(field + ": expected a campaign name or id");
  }
  v1::Campaign c;
  Status st = client->GetCampaignSummary(std::to_string(value.get<int64_t>()), &c);
  if (st.code() == Status::Code::kNotFound) st = st.WithContext(field + ": ");
  XV_RETURN_IF_ERROR(st);
  *name = c.name();
  return Status::Ok();
}

std::vector<McpTool> CampaignControlTools(std::shared_ptr<DaemonClient> client) {
  return {AblateTool(client),
          ConfirmTool(client),
          CampaignPauseTool(client, true),
          CampaignPauseTool(client, false),
          EventsTool(client),
          PlanSubmitTool(client),
          PlanShowTool(client),
          PlanControlTool(client)};
}

}  // namespace xv::client
