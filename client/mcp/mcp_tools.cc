#include "client/mcp/mcp_tools.h"

#include "common/run_states.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "client/experiment_listing.h"
#include "client/mcp/mcp_answers.h"
#include "client/mcp/mcp_arguments.h"
#include "client/mcp/mcp_campaign_tools.h"
#include "client/mcp/mcp_resources.h"
#include "client/mcp/mcp_watch_replay.h"
#include "client/numeric_ref.h"
#include "client/requests/submit_request.h"
#include "client/views/campaign_view.h"
#include "client/views/experiment_view.h"
#include "client/views/failure_summary_view.h"
#include "client/views/status_view.h"
#include "client/views/watch_event_view.h"
#include "common/bounded_json_or_discarded.h"
#include "common/steady_clock_time.h"
#include "common/text_file.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

// Every experiment state's name (common/run_states.h), in order.
std::vector<std::string> ExperimentStateNames() {
  std::vector<std::string> names;
  for (int i = 0; !ToString(static_cast<ExperimentState>(i)).empty(); ++i) {
    names.emplace_back(ToString(static_cast<ExperimentState>(i)));
  }
  return names;
}

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long `wait` keeps trying a daemon that stopped answering (a restart) before it gives up.
constexpr double kUnreachableGraceS = 30;
constexpr double kWaitPollS = 1.0;
// The experiment tool's event read: quiet this long after the last replayed event ends it.
constexpr std::chrono::milliseconds kEventQuiet(1000);
constexpr std::chrono::seconds kEventReadMax(10);
// ... and it keeps at most this many (the tool shows the newest `events` of them).
constexpr size_t kEventReadMaxCount = 100000;

std::string Str(const json& args, const char* key, const std::string& fallback = "") {
  return args.contains(key) && args[key].is_string() ? args[key].get<std::string>() : fallback;
}

// An integer argument, or `fallback` when it is missing, not a number or outside int64 (the
// schema's minimum/maximum, where a tool gives them, were checked before the handler ran).
int64_t Int(const json& args, const char* key, int64_t fallback) {
  if (!args.contains(key) || !args[key].is_number()) return fallback;
  if (args[key].is_number_integer()) return args[key].get<int64_t>();
  const double d = args[key].get<double>();
  return d >= -9.2e18 && d <= 9.2e18 ? static_cast<int64_t>(d) : fallback;
}

// A campaign given as a name or an id (string or integer) -> the text GetCampaign takes.
std::string CampaignRef(const json& args, const char* key) {
  if (!args.contains(key)) return "";
  const json& v = args[key];
  if (v.is_number_integer() || v.is_number_unsigned()) return std::to_string(v.get<int64_t>());
  return v.is_string() ? v.get<std::string>() : "";
}

// The most a tool reads of a file an agent names (a recipe or a policy is a few KiB).
constexpr off_t kMaxToolFileBytes = 1 << 20;

// Reads the regular file at `path` (at most kMaxToolFileBytes) into *out. Anything else (a
// directory, a FIFO, a device such as /dev/zero, a socket), a missing or unreadable file and a
// larger one are refused naming `field`, the path and why; the error never holds the file's bytes.
Status ReadTextFile(const std::string& path, const std::string& field, std::string* out) {
  const Status st = ReadRegularFile(path, kMaxToolFileBytes, out);
  if (st.ok()) return st;
  std::string why = st.message();
  if (why.rfind("cannot open", 0) == 0) {
    why += "; relative paths are read from the directory xvctl mcp runs in: " +
           QuoteExcerpt(std::filesystem::current_path().string());
  }
  return Status::InvalidArgument(field + ": " + QuoteExcerpt(path) + ": " + why);
}

json Schema(json properties, std::vector<std::string> required = {}) {
  json s = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) s["required"] = required;
  s["additionalProperties"] = false;
  return s;
}

// A campaign name or numeric id.
json CampaignProperty(const std::string& description) {
  return {{"anyOf", json::array({{{"type", "string"}}, {{"type", "integer"}, {"minimum", 1}}})},
          {"description", description}};
}

const json& OverrideMapSchema() {
  static const json* s = new json{
      {"type", "object"},
      {"description",
       "knob -> value, e.g. {\"matrix_lr\": 0.03, \"adam_betas\": [0.8, 0.95]}; a string value is "
       "YAML text as on the command line"},
      {"additionalProperties",
       {{"type", json::array({"number", "string", "boolean", "array", "object"})}}}};
  return *s;
}

// An output schema: the properties an answer has (none required, so that a tool error's
// {error, code} fits it too).
json Output(json properties) {
  properties["error"] = {{"type", "string"}};
  properties["code"] = {{"type", "string"}};
  return {{"type", "object"}, {"properties", std::move(properties)}};
}

const json& ExperimentListOutput() {
  static const json* s = new json{{"type", "array"}, {"items", {{"type", "object"}}}};
  return *s;
}

// ---- submit ----

McpTool SubmitTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "submit";
  t.title = "Submit a round of candidates";
  t.description =
      "Queue one round of training experiments and return at once with its ids, how many runs "
      "that is (runs: candidates x replicates plus the policy's head controls) and an ETA from "
      "the workers' recent throughput (eta_s, eta_basis says how); it does not wait: call `wait` "
      "next. Each candidate is the base recipe plus overrides of recipe knobs "
      "(the knobs tool lists them); every candidate runs for the same fixed time budget and is "
      "judged on "
      "val_bpb (lower is better). The base is `recipe_path` (a YAML file on this machine), or, "
      "without it, the head of `campaign` (its current best recipe): for a keep/discard loop, "
      "create the campaign once (campaign_create) and submit candidates against its head. "
      "Candidates: `candidates` (a list of override objects or \"k=v,k2=v2\" strings) and/or "
      "`sweep` (one candidate per value; several knobs give the cartesian product); `set` "
      "overrides every candidate. Nothing is queued when any candidate is refused: an unknown "
      "knob, a wrong type, an invalid combination or a no-op override (equal to the head) comes "
      "back as an error naming the field. A candidate identical to one already run reuses its "
      "result. With a campaign policy, head controls are added and the daemon decides the round "
      "once all runs end (wait, then campaign_show or the rounds in wait's answer). Code "
      "candidates (an autoresearch trainer whose workers allow them): your edited train.py as "
      "`sources` (its text) or `source_paths`, or a unified diff against the trainer's train.py "
      "(the campaign head's when it is a kept code candidate) as `patches` or `patch_paths`; one "
      "candidate each, stored by its sha256 (the same text is the same config). A patch that "
      "does not apply is refused naming the hunk.";
  t.input_schema = Schema(
      {{"recipe_path",
        {{"type", "string"},
         {"description",
          "base recipe YAML file (e.g. recipes/cpu-tiny.yaml); omit to build "
          "from campaign's head"}}},
       {"campaign",
        CampaignProperty("campaign name or id (a name is created on first use when recipe_path "
                         "is given; must exist without it); default: \"default\"")},
       {"candidates",
        {{"type", "array"},
         {"description", "one entry per candidate: an override object or a \"k=v,k2=v2\" string"},
         {"items", {{"anyOf", json::array({OverrideMapSchema(), {{"type", "string"}}})}}}}},
       {"sweep",
        {{"description",
          "{knob: [values]} (or [\"k=v1,v2\"]): one candidate per value, the cartesian product "
          "over knobs; e.g. {\"matrix_lr\": [0.02, 0.04, 0.08]}"},
         {"anyOf", json::array({{{"type", "object"},
                                 {"additionalProperties", {{"type", "array"}, {"minItems", 1}}}},
                                {{"type", "array"}, {"items", {{"type", "string"}}}}})}}},
       {"set",
        {{"description",
          "overrides applied to the base before every candidate's own ({k: v} or "
          "[\"k=v\"])"},
         {"anyOf", json::array({OverrideMapSchema(),
                                {{"type", "array"}, {"items", {{"type", "string"}}}}})}}},
       {"replicates",
        {{"type", "integer"},
         {"minimum", 1},
         {"maximum", 64},
         {"description",
          "runs per candidate with seeds seed, seed+1, ... (default 1; the "
          "campaign policy may ask for more)"}}},
       {"round_kind",
        {{"type", "string"},
         {"enum", json::array({"candidates", "sweep", "ablation", "confirm"})},
         {"description", "default: sweep when only `sweep` is given, else candidates"}}},
       {"trainer",
        {{"type", "string"}, {"description", "trainer name (default: the campaign's, libtorch)"}}},
       {"priority",
        {{"type", "integer"},
         {"minimum", -1000000},
         {"maximum", 1000000},
         {"description", "higher runs first (default 0)"}}},
       {"sources",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description",
          "code candidates: each a whole train.py (its text, at most 512 KiB), run instead of "
          "the trainer's with `set` applied"}}},
       {"patches",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description",
          "code candidates: each a unified diff (diff -u / git diff) of the trainer's train.py "
          "(the head's when the head is a code candidate); exact context, no fuzz"}}},
       {"source_paths",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description", "as sources, read from these files on this machine"}}},
       {"patch_paths",
        {{"type", "array"},
         {"items", {{"type", "string"}}},
         {"description", "as patches, read from these files on this machine"}}}});
  t.output_schema = Output({{"campaign_id", {{"type", "integer"}}},
                            {"round_id", {{"type", "integer"}}},
                            {"experiment_ids", {{"type", "array"}}},
                            {"candidates", {{"type", "array"}}},
                            {"runs", {{"type", "integer"}}},
                            {"candidate_runs", {{"type", "integer"}}},
                            {"control_runs", {{"type", "integer"}}},
                            {"eta_s", {{"type", "number"}}},
                            {"eta_basis", {{"type", "string"}}}});
  t.handler = [client](const json& given, McpCallContext*) {
    json args = given;
    if (args.contains("campaign")) {
      std::string name;
      Status st = CampaignNameOf(client.get(), args["campaign"], "arguments.campaign", &name);
      if (!st.ok()) return McpToolResult::Error(st);
      args["campaign"] = name;
    }
    SubmitArgs sa;
    Status st = SubmitArgsFromJson(args, &sa);
    if (!st.ok()) return McpToolResult::Error(st);
    if (!sa.recipe_path.empty()) {
      std::string unused;
      st = ReadTextFile(sa.recipe_path, "arguments.recipe_path", &unused);
      if (!st.ok()) return McpToolResult::Error(st);
    }
    v1::SubmitRequest req;
    st = BuildSubmitRequest(sa, &req);
    if (!st.ok()) return McpToolResult::Error(st);
    const char* user = ::getenv("USER");
    req.set_submitter(std::string("xvctl mcp") + (user ? " (" + std::string(user) + ")" : ""));
    v1::SubmitResponse resp;
    st = client->Submit(req, &resp);
    if (!st.ok()) return McpToolResult::Error(st);
    json j = SubmitResponseJson(resp);
    json names = json::array();
    for (const auto& c : req.candidates()) {
      const bool code = !c.source().empty() || !c.patch().empty();
      names.push_back(!c.name().empty() ? c.name() : (code ? "source" : "base"));
    }
    j["candidates"] = names;
    j.update(SubmissionCost(client.get(), resp));
    return McpToolResult::Json(j);
  };
  return t;
}

// ---- status, workers ----

McpTool StatusTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "status";
  t.title = "Daemon status";
  t.description =
      "The daemon's state now: queued, running and finished counts, each worker (device, state, "
      "current experiment), the running experiments with their progress (0..1) and last loss, "
      "trainers that queued work needs but no worker offers, and write_mode (read-only while the "
      "disk is full: submissions are refused). Cheap; call it to see whether workers exist before "
      "submitting, or why nothing runs.";
  t.input_schema = Schema(json::object());
  t.output_schema = Output({{"queued", {{"type", "integer"}}},
                            {"running", {{"type", "integer"}}},
                            {"finished", {{"type", "integer"}}},
                            {"workers", {{"type", "array"}}},
                            {"active", {{"type", "array"}}},
                            {"write_mode", {{"type", "string"}}}});
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client](const json&, McpCallContext*) {
    v1::StatusResponse resp;
    Status st = client->GetStatus(&resp);
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(StatusSummary(resp, client->address()));
  };
  return t;
}

McpTool WorkersTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "workers";
  t.title = "Workers and their devices";
  t.description =
      "Every worker the daemon knows: name, state (idle, busy, draining, drained, offline), "
      "device, vendor, backend, current experiment, last heartbeat, and the ceilings its start-up "
      "probe measured (matmul TFLOP/s, memory bandwidth GB/s) beside the datasheet peak. Results "
      "are only comparable between runs on the same device class.";
  t.input_schema = Schema(json::object());
  t.output_schema = Output({{"workers", {{"type", "array"}}}});
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client](const json&, McpCallContext*) {
    v1::StatusResponse resp;
    Status st = client->GetStatus(&resp);
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(WorkersJson(resp));
  };
  return t;
}

// ---- results ----

McpTool ResultsTool(std::shared_ptr<DaemonClient> client, ClientOptions options) {
  McpTool t;
  t.name = "results";
  t.title = "Experiment results";
  t.description =
      "Experiments, one summary each: id, round, name, state, val_bpb (lower is better), steps, "
      "tok_per_sec, peak_mem_mb, decision (keep, discard, pending, control) and its reason; "
      "failure_kind and the start of failure_detail for failed ones (the experiment tool has the "
      "whole row). Filter by campaign, state, decision, round_id or ids; sort by id (the `limit` "
      "most recent, default 20; total and left_out say what was not shown) or val_bpb (the "
      "`limit` best); after_id pages on in id order (next_after_id). When no daemon answers, the "
      "database "
      "is read read-only (source says which). With failures: true it returns instead, per knob "
      "value that failed at least once, how its runs ended (runs, diverged, crashed, timed_out, "
      "nan_rate): the values to stop proposing.";
  t.input_schema = Schema(
      {{"campaign", CampaignProperty("only this campaign (name or id)")},
       {"state",
        {{"type", "string"},
         {"enum", ExperimentStateNames()},
         {"description", "only experiments in this state"}}},
       {"decision",
        {{"type", "string"},
         {"enum", json::array({"keep", "discard", "pending", "control"})},
         {"description", "only experiments with this decision"}}},
       {"sort",
        {{"type", "string"},
         {"enum", json::array({"id", "val_bpb"})},
         {"description", "id (default) or val_bpb (best first)"}}},
       {"round_id",
        {{"type", "integer"}, {"minimum", 1}, {"description", "only this round's experiments"}}},
       {"ids",
        {{"type", "array"},
         {"items", {{"type", "integer"}, {"minimum", 1}}},
         {"maxItems", 1000},
         {"description", "only these experiment ids"}}},
       {"after_id",
        {{"type", "integer"},
         {"minimum", 1},
         {"description",
          "a cursor: the first `limit` experiments with a larger id, in id order (next_after_id "
          "of the previous answer)"}}},
       {"limit",
        {{"type", "integer"},
         {"minimum", 0},
         {"maximum", 100000},
         {"description", "at most this many (default 20; 0 = all)"}}},
       {"failures",
        {{"type", "boolean"},
         {"description", "the failure summary per knob value instead (campaign filter only)"}}}});
  t.output_schema = Output({{"experiments", ExperimentListOutput()},
                            {"count", {{"type", "integer"}}},
                            {"total", {{"type", "integer"}}},
                            {"left_out", {{"type", "integer"}}},
                            {"next_after_id", {{"type", "integer"}}},
                            {"source", {{"type", "string"}}},
                            {"failures", {{"type", "array"}}}});
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client, options](const json& args, McpCallContext*) {
    if (args.value("failures", false)) {
      v1::FailureSummaryRequest req;
      const std::string campaign = CampaignRef(args, "campaign");
      int64_t id = 0;
      if (ParseNumericRef(campaign, &id)) {
        req.set_campaign_id(id);
      } else {
        req.set_campaign(campaign);
      }
      v1::FailureSummaryResponse resp;
      Status st = client->FailureSummary(req, &resp);
      if (!st.ok()) return McpToolResult::Error(st);
      return McpToolResult::Json(FailureSummaryJson({resp.knobs().begin(), resp.knobs().end()}));
    }
    ExperimentFilter filter;
    filter.campaign = CampaignRef(args, "campaign");
    filter.state = Str(args, "state");
    filter.decision = Str(args, "decision");
    filter.sort = Str(args, "sort");
    ResultsPage page;
    page.round_id = Int(args, "round_id", 0);
    if (args.contains("ids")) page.ids = args["ids"].get<std::vector<int64_t>>();
    page.after_id = Int(args, "after_id", 0);
    page.limit = static_cast<int>(Int(args, "limit", 20));
    page.best_first = filter.sort == "val_bpb" && page.after_id == 0;
    filter.round_id = page.round_id;  // the daemon filters the round
    std::string source = "daemon";
    const std::string db = options.StateDir() + "/xv.db";
    // From the daemon, or (no daemon answers) the database read-only.
    auto read = [&](const std::function<Status(bool)>& from) {
      Status st = from(true);
      if (st.code() == Status::Code::kUnavailable && std::filesystem::exists(db)) {
        source = "database " + db + " (read-only; no xvd answers at " + client->address() + ")";
        st = from(false);
      }
      return st;
    };
    if (page.ids.empty() && page.limit > 0) {
      // One page, counted in SQL: the cost follows the page, not the table.
      ExperimentFilter f = filter;
      f.limit = page.limit;
      if (page.after_id > 0) f.sort = "id";
      f.after_id = page.after_id;
      ExperimentPage got;
      Status st = read([&](bool daemon) {
        return daemon ? PageFromDaemon(client.get(), f, &got) : PageFromDatabase(db, f, &got);
      });
      if (!st.ok()) return McpToolResult::Error(st);
      json experiments = json::array();
      const size_t shown = std::min(got.rows.size(), static_cast<size_t>(page.limit));
      for (size_t i = 0; i < shown; ++i) experiments.push_back(ExperimentSummary(got.rows[i]));
      // An older daemon does not count: at least one more when more follow.
      const int64_t total = got.matching >= 0
                                ? got.matching
                                : static_cast<int64_t>(got.rows.size()) + (got.more ? 1 : 0);
      json j = {{"experiments", experiments}, {"count", shown}, {"total", total}};
      if (page.after_id > 0 && got.more) j["next_after_id"] = got.next_after;
      if (page.after_id == 0 && static_cast<int64_t>(shown) < total) {
        j["left_out"] = total - static_cast<int64_t>(shown);
      }
      j["source"] = source;
      return McpToolResult::Json(j);
    }
    // Every matching row (limit 0), or a list of ids: filtered here.
    std::vector<v1::Experiment> rows;
    Status st = read([&](bool daemon) {
      return daemon ? ListFromDaemon(client.get(), filter, &rows)
                    : ListFromDatabase(db, filter, &rows);
    });
    if (!st.ok()) return McpToolResult::Error(st);
    json j = ResultsAnswer(rows, page);
    j["source"] = source;
    return McpToolResult::Json(j);
  };
  return t;
}

// ---- experiment ----

// The stored events of experiment `e` (kinds: everything but step), by a Watch replay from cursor
// 0 that ends when the experiment's terminal state event arrives (*complete = true), or after
// kEventQuiet without an event, or kEventReadMax in all (a very long event log: *complete = false),
// or as soon as the call is cancelled.
Status ReadExperimentEvents(DaemonClient* client, const v1::Experiment& e, McpCallContext* call,
                            std::vector<v1::WatchEvent>* out, bool* complete_out) {
  v1::WatchRequest req;
  req.set_experiment_id(e.id());
  req.set_since(0);
  for (const char* k : {"state", "start", "eval", "nan", "summary", "error"}) req.add_kinds(k);
  const bool terminal = IsTerminalState(e.state());
  WatchReplayEnd end;
  Status st = ReadWatchReplay(
      client, req, {kEventReadMaxCount, kEventQuiet, kEventReadMax},
      [&](const v1::WatchEvent& ev) {
        return terminal && ev.kind() == "state" && ev.state() == e.state() &&
               ev.attempt() == e.attempt();
      },
      call, out, &end);
  *complete_out = end.last;
  return st;
}

McpTool ExperimentTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "experiment";
  t.title = "One experiment in detail";
  t.description =
      "One experiment: its overrides, state, attempt, worker and device, the result figures "
      "(val_bpb, tok_per_sec, mfu_percent, memory ...), the decision and its reason, for a "
      "failure its failure_kind (invalid_config, oom, diverged, loss_explosion, timed_out, "
      "crashed, driver_error, lost) and detail, the tail of the trainer's stderr, and its stored "
      "events in order (states with their causes, start, eval, nan, summary, error; steps left "
      "out; events_complete is true once the replay reached a finished experiment's last state). "
      "Use it to learn why a candidate failed before proposing the next one.";
  t.input_schema =
      Schema({{"id", {{"type", "integer"}, {"minimum", 1}, {"description", "experiment id"}}},
              {"events",
               {{"type", "integer"},
                {"minimum", 0},
                {"maximum", 1000},
                {"description", "at most this many of the latest events (default 50; 0 = none)"}}},
              {"stderr_bytes",
               {{"type", "integer"},
                {"minimum", 0},
                {"maximum", 16384},
                {"description", "at most this many bytes of the stderr tail (default 4096)"}}}},
             {"id"});
  t.output_schema = Output({{"id", {{"type", "integer"}}},
                            {"state", {{"type", "string"}}},
                            {"val_bpb", {{"type", "number"}}},
                            {"events", {{"type", "array"}}},
                            {"stderr_tail", {{"type", "string"}}}});
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client](const json& args, McpCallContext* ctx) {
    const int64_t id = Int(args, "id", 0);
    v1::Experiment e;
    Status st = client->GetExperiment(id, &e);
    if (st.code() == Status::Code::kNotFound) {
      return McpToolResult::Error(Status::NotFound("arguments.id: " + st.message()));
    }
    if (!st.ok()) return McpToolResult::Error(st);
    json j = ExperimentJson(e);
    j["config_hash"] = e.config_hash();
    const size_t max_tail = static_cast<size_t>(Int(args, "stderr_bytes", 4096));
    const std::string& tail = e.stderr_tail();
    j["stderr_tail"] = tail.size() > max_tail ? tail.substr(tail.size() - max_tail) : tail;
    const size_t max_events = static_cast<size_t>(Int(args, "events", 50));
    if (max_events > 0) {
      std::vector<v1::WatchEvent> events;
      bool complete = false;
      st = ReadExperimentEvents(client.get(), e, ctx, &events, &complete);
      if (!st.ok()) return McpToolResult::Error(st);
      json arr = json::array();
      const size_t first = events.size() > max_events ? events.size() - max_events : 0;
      for (size_t i = first; i < events.size(); ++i) arr.push_back(WatchEventJson(events[i]));
      j["events"] = arr;
      j["events_left_out"] = first;
      j["events_complete"] = complete;
    }
    return McpToolResult::Json(DropEmpty(j));
  };
  return t;
}

// ---- campaigns ----

McpTool CampaignCreateTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "campaign_create";
  t.title = "Create a campaign";
  t.description =
      "Create a keep/discard campaign: its base recipe becomes the head (the best recipe so "
      "far). Rounds submitted to it (submit with campaign and no recipe_path) are built from the "
      "head and, with a policy, decided by the daemon: a candidate is kept only when it beats "
      "the head by more than the noise (Welch test over replicates, or the head's noise band), "
      "at most one per round, and the kept recipe becomes the new head. `policy` e.g. {\"mode\": "
      "\"welch\", \"confidence\": 0.9, \"min_effect\": 0.001, \"replicates\": 2, "
      "\"head_controls\": 2}; {\"decide\": \"manual\"} leaves rounds for "
      "`decide`. `budget` fixes the run time of every run, e.g. {\"time_budget_s\": 300}. "
      "Refusals name the field (policy: confidence: ...); a taken name is refused.";
  t.input_schema = Schema(
      {{"name", {{"type", "string"}, {"description", "campaign name (unique)"}}},
       {"recipe_path", {{"type", "string"}, {"description", "base recipe YAML file"}}},
       {"policy",
        {{"description", "acceptance policy: an object, or YAML/JSON text (default: welch)"},
         {"anyOf", json::array({{{"type", "object"}}, {{"type", "string"}}})}}},
       {"policy_path",
        {{"type", "string"}, {"description", "acceptance policy file, instead of policy"}}},
       {"budget",
        {{"type", "object"},
         {"description",
          "budget contract: time_budget_s, startup_allowance_s, eval_allowance_s, "
          "max_concurrent, and the metric contract sequence_len and eval_tokens (what val_bpb "
          "means; pinned to the base recipe's values when not given, a candidate changing them "
          "is refused)"},
         {"properties",
          {{"time_budget_s",
            {{"type", "number"}, {"description", "seconds every run trains (1..86400)"}}},
           {"startup_allowance_s", {{"type", "number"}}},
           {"eval_allowance_s", {{"type", "number"}}},
           {"max_concurrent", {{"type", "integer"}, {"minimum", 1}}},
           {"sequence_len",
            {{"type", "integer"},
             {"minimum", 1},
             {"description", "evaluation context length, pinned beside time_budget_s"}}},
           {"eval_tokens",
            {{"type", "integer"},
             {"minimum", 1},
             {"description", "tokens val_bpb is measured on, pinned beside time_budget_s"}}}}}}},
       {"device_filter", {{"type", "string"}, {"description", "which devices run it"}}},
       {"trainer", {{"type", "string"}, {"description", "trainer name (default: libtorch)"}}},
       {"max_attempts",
        {{"type", "integer"},
         {"minimum", 1},
         {"maximum", 10},
         {"description", "attempts per experiment when workers are lost (default 2)"}}}},
      {"name", "recipe_path"});
  t.output_schema = Output({{"id", {{"type", "integer"}}},
                            {"name", {{"type", "string"}}},
                            {"state", {{"type", "string"}}},
                            {"head", {{"type", "string"}}},
                            {"head_recipe", {{"type", "object"}}}});
  t.handler = [client](const json& args, McpCallContext*) {
    v1::CreateCampaignRequest req;
    req.set_name(Str(args, "name"));
    const std::string recipe_path = Str(args, "recipe_path");
    std::string text;
    Status st = ReadTextFile(recipe_path, "arguments.recipe_path", &text);
    if (!st.ok()) return McpToolResult::Error(st);
    req.set_base_recipe_yaml(text);
    req.set_recipe_name(std::filesystem::path(recipe_path).stem().string());
    if (args.contains("policy") && args.contains("policy_path")) {
      return McpToolResult::Error(
          Status::InvalidArgument("arguments.policy_path: give policy or policy_path, not both"));
    }
    if (args.contains("policy")) {
      const json& p = args["policy"];
      req.set_policy(p.is_string() ? p.get<std::string>() : p.dump());
    } else if (args.contains("policy_path")) {
      st = ReadTextFile(Str(args, "policy_path"), "arguments.policy_path", &text);
      if (!st.ok()) return McpToolResult::Error(st);
      req.set_policy(text);
    }
    if (args.contains("budget")) req.set_budget_json(args["budget"].dump());
    req.set_device_filter(Str(args, "device_filter"));
    req.set_trainer(Str(args, "trainer"));
    req.set_max_attempts(static_cast<int>(Int(args, "max_attempts", 0)));
    v1::Campaign c;
    st = client->CreateCampaign(req, &c);
    // The daemon names the recipe it was sent; the caller named a file.
    if (!st.ok() && st.message().rfind("recipe", 0) == 0) {
      st = st.WithContext("arguments.recipe_path: ");
    }
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(CampaignSummary(c, 0, true));
  };
  return t;
}

McpTool CampaignShowTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "campaign_show";
  t.title = "A campaign: head, rounds, decisions";
  t.description =
      "One campaign: its policy and budget, the head recipe (head_recipe: every knob as it is "
      "now), the latest head changes (which candidate was kept in which round, and why), and the "
      "latest `last_rounds` rounds (default 5; rounds_total and rounds_left_out say how many "
      "there are) with their state (open, decided), one-line summary, kept candidate and the "
      "decision's statistics (the head's mean/sd/n; per candidate: mean and sd of val_bpb, n, "
      "improvement, p-value, noise band, keep/discard and the reason). Read it after a round is "
      "decided to learn what the head is now.";
  t.input_schema =
      Schema({{"campaign", CampaignProperty("campaign name or id")},
              {"last_rounds",
               {{"type", "integer"},
                {"minimum", 0},
                {"maximum", 100000},
                {"description", "only the latest rounds and head changes (default 5; 0 = all)"}}},
              {"head_recipe",
               {{"type", "boolean"},
                {"description", "include every knob of the head recipe (default true)"}}}},
             {"campaign"});
  t.output_schema = Output({{"id", {{"type", "integer"}}},
                            {"name", {{"type", "string"}}},
                            {"state", {{"type", "string"}}},
                            {"head", {{"type", "string"}}},
                            {"head_recipe", {{"type", "object"}}},
                            {"rounds", {{"type", "array"}}},
                            {"rounds_total", {{"type", "integer"}}},
                            {"head_history", {{"type", "array"}}}});
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client](const json& args, McpCallContext*) {
    v1::Campaign c;
    Status st = client->GetCampaign(CampaignRef(args, "campaign"), &c);
    if (st.code() == Status::Code::kNotFound) st = st.WithContext("arguments.campaign: ");
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(CampaignSummary(c, static_cast<int>(Int(args, "last_rounds", 5)),
                                               args.value("head_recipe", true)));
  };
  return t;
}

McpTool CampaignListTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "campaign_list";
  t.title = "Every campaign";
  t.description =
      "Every campaign: id, name, state (active, paused, done), policy, budget, trainer, device "
      "filter and head recipe hash (without rounds; campaign_show has them).";
  t.input_schema = Schema(json::object());
  t.output_schema = Output({{"campaigns", {{"type", "array"}}}});
  t.hints.read_only = true;
  t.hints.idempotent = true;
  t.handler = [client](const json&, McpCallContext*) {
    v1::ListCampaignsResponse resp;
    Status st = client->ListCampaigns(&resp);
    if (!st.ok()) return McpToolResult::Error(st);
    json arr = json::array();
    for (const auto& c : resp.campaigns()) arr.push_back(CampaignSummary(c, 0, false));
    return McpToolResult::Json({{"campaigns", arr}});
  };
  return t;
}

// ---- wait ----

// True when the daemon decides `c`'s rounds by itself (a policy is set, decide is not manual).
bool DecidesAutomatically(const v1::Campaign& c) {
  json p = ParseBoundedJsonOrDiscarded(c.policy_json());
  if (!p.is_object() || p.empty()) return false;
  return !(p.contains("decide") && p["decide"] == "manual");
}

struct WaitScope {
  std::vector<int64_t> ids;  // these experiments; else:
  std::string campaign;      // every experiment of this campaign ("" = of every campaign)
};

// The scope's unfinished experiments (ids scope: all of them, to report their figures).
Status FetchWaited(DaemonClient* client, const WaitScope& scope, std::vector<v1::Experiment>* all,
                   std::vector<int64_t>* unfinished) {
  all->clear();
  unfinished->clear();
  if (!scope.ids.empty()) {
    for (int64_t id : scope.ids) {
      v1::Experiment e;
      Status st = client->GetExperiment(id, &e);
      if (st.code() == Status::Code::kNotFound) {
        return Status::NotFound("arguments.experiment_ids: experiment " + std::to_string(id) +
                                " not found");
      }
      XV_RETURN_IF_ERROR(st);
      if (!IsTerminalState(e.state())) unfinished->push_back(id);
      all->push_back(std::move(e));
    }
    return Status::Ok();
  }
  for (const char* state : {"queued", "assigned", "running"}) {
    ExperimentFilter filter;
    filter.campaign = scope.campaign;
    filter.state = state;
    std::vector<v1::Experiment> rows;
    XV_RETURN_IF_ERROR(ListFromDaemon(client, filter, &rows));
    for (const auto& e : rows) unfinished->push_back(e.id());
  }
  std::sort(unfinished->begin(), unfinished->end());
  return Status::Ok();
}

// The campaigns and rounds to report, and whether one of them still waits for its automatic
// decision.
struct RoundsView {
  json rounds = json::array();
  bool decision_pending = false;
};

Status ViewRounds(DaemonClient* client, const std::map<std::string, std::set<int64_t>>& wanted,
                  bool latest_too, RoundsView* view) {
  *view = RoundsView();
  for (const auto& [campaign, round_ids] : wanted) {
    v1::Campaign c;
    XV_RETURN_IF_ERROR(client->GetCampaign(campaign, &c));
    const bool automatic = DecidesAutomatically(c);
    for (int i = 0; i < c.rounds_size(); ++i) {
      const v1::RoundInfo& r = c.rounds(i);
      const bool latest = i + 1 == c.rounds_size();
      if (!round_ids.count(r.id()) && !(latest_too && latest)) continue;
      json j = RoundSummary(r);
      j["campaign"] = c.name();
      j["campaign_head"] = c.head_recipe_hash().substr(0, 12);
      if (r.state() == "open" && r.unfinished() == 0 && automatic) view->decision_pending = true;
      view->rounds.push_back(std::move(j));
    }
  }
  return Status::Ok();
}

McpTool WaitTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "wait";
  t.title = "Wait for experiments and the round decision";
  t.description =
      "Block until the given experiments (experiment_ids), or every experiment of `campaign`, or "
      "everything, have finished, and, for a campaign whose policy decides automatically, until "
      "their rounds are decided; then return. Bounded by timeout_s (default 50 s, under the 60 s "
      "many MCP hosts allow a call; at most 3600): when it expires the answer says timed_out: "
      "true and what is unfinished; this is not an error: call wait again while timed_out. The "
      "answer has the experiments' summaries (with experiment_ids), the unfinished ids, and the "
      "rounds involved with their decision (state decided, summary, kept, statistics) and "
      "campaign_head, the head after it. Sends progress notifications when the call has a "
      "progressToken; a call the client cancels (notifications/cancelled) ends at once.";
  t.input_schema =
      Schema({{"experiment_ids",
               {{"type", "array"},
                {"items", {{"type", "integer"}, {"minimum", 1}}},
                {"description", "experiments to wait for (e.g. submit's experiment_ids)"}}},
              {"campaign", CampaignProperty("wait for every experiment of this campaign instead")},
              {"timeout_s",
               {{"type", "number"},
                {"minimum", 0},
                {"maximum", kMcpWaitMaxS},
                {"description", "give up after this many seconds (default 50, at most 3600)"}}}});
  t.output_schema = Output({{"done", {{"type", "boolean"}}},
                            {"timed_out", {{"type", "boolean"}}},
                            {"waited_s", {{"type", "number"}}},
                            {"unfinished", {{"type", "array"}}},
                            {"experiments", ExperimentListOutput()},
                            {"states", {{"type", "object"}}},
                            {"rounds", {{"type", "array"}}}});
  t.hints.read_only = true;
  t.handler = [client](const json& args, McpCallContext* ctx) {
    WaitScope scope;
    if (args.contains("experiment_ids")) {
      const json& ids = args["experiment_ids"];
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!(ids[i].is_number_integer() || ids[i].is_number_unsigned()) ||
            ids[i].get<int64_t>() < 1) {
          return McpToolResult::Error(Status::InvalidArgument(
              "arguments.experiment_ids[" + std::to_string(i) + "]: expected an id >= 1"));
        }
        scope.ids.push_back(ids[i].get<int64_t>());
      }
      if (scope.ids.empty()) {
        return McpToolResult::Error(Status::InvalidArgument(
            "arguments.experiment_ids: empty (leave it out to wait for everything)"));
      }
    }
    scope.campaign = CampaignRef(args, "campaign");
    if (!scope.ids.empty() && !scope.campaign.empty()) {
      return McpToolResult::Error(
          Status::InvalidArgument("arguments.campaign: give experiment_ids or campaign, not both"));
    }
    const double timeout_s =
        args.contains("timeout_s") ? args["timeout_s"].get<double>() : kMcpWaitDefaultS;
    // Rounds to report: the campaign's open ones at the start and its latest; or the rounds of
    // the given experiments.
    std::map<std::string, std::set<int64_t>> wanted;
    bool latest_too = false;
    if (!scope.campaign.empty()) {
      v1::Campaign c;
      Status st = client->GetCampaign(scope.campaign, &c);
      if (st.code() == Status::Code::kNotFound) st = st.WithContext("arguments.campaign: ");
      if (!st.ok()) return McpToolResult::Error(st);
      auto& ids = wanted[std::to_string(c.id())];
      for (const auto& r : c.rounds()) {
        if (r.state() == "open") ids.insert(r.id());
      }
      latest_too = true;
    }
    const auto t0 = Clock::now();
    std::optional<Clock::time_point> unreachable_since;
    std::vector<v1::Experiment> all;
    std::vector<int64_t> unfinished;
    RoundsView rounds;
    bool done = false;
    std::string last_message;
    std::optional<Clock::time_point> last_progress;
    while (true) {
      Status st = FetchWaited(client.get(), scope, &all, &unfinished);
      if (st.ok() && unfinished.empty()) {
        if (!scope.ids.empty()) {
          for (const auto& e : all) wanted[std::to_string(e.campaign_id())].insert(e.round_id());
        }
        st = ViewRounds(client.get(), wanted, latest_too, &rounds);
        done = st.ok() && !rounds.decision_pending;
      }
      if (st.code() == Status::Code::kUnavailable) {
        if (!unreachable_since) unreachable_since = Clock::now();
        if (SecondsSince(*unreachable_since) > kUnreachableGraceS) return McpToolResult::Error(st);
      } else if (!st.ok()) {
        return McpToolResult::Error(st);
      } else {
        unreachable_since.reset();
      }
      if (done) break;
      if (SecondsSince(t0) >= timeout_s || ctx->cancelled()) break;
      if (st.ok()) {
        // A notification when the counts change and every 10 s (a heartbeat for clients that
        // extend their timeout on progress). Progress must grow: finished experiments plus a
        // fraction for the time spent, or the seconds waited when the total is unknown.
        const size_t total = scope.ids.size();
        std::string message =
            std::to_string(unfinished.size()) + " unfinished" +
            (unfinished.empty() && rounds.decision_pending ? ", the round decision pending" : "");
        if (message != last_message || !last_progress || SecondsSince(*last_progress) >= 10) {
          const double waited = SecondsSince(t0);
          ctx->Progress(
              total > 0 ? static_cast<double>(total - unfinished.size()) + waited / (timeout_s + 1)
                        : waited,
              static_cast<double>(total), message);
          last_message = message;
          last_progress = Clock::now();
        }
      }
      if (!ctx->SleepFor(std::min(kWaitPollS, std::max(0.05, timeout_s - SecondsSince(t0))))) {
        // Cancelled by the client: nobody reads the answer.
        return McpToolResult::Error(Status::Cancelled("wait: cancelled by the client"));
      }
    }
    json j = {{"done", done},
              {"timed_out", !done},
              {"waited_s", std::round(SecondsSince(t0) * 10) / 10},
              {"unfinished", unfinished}};
    if (!scope.ids.empty()) {
      json arr = json::array();
      std::map<std::string, int> states;
      for (const auto& e : all) {
        arr.push_back(ExperimentSummary(e));
        ++states[e.state()];
      }
      j["experiments"] = arr;
      j["states"] = states;
    }
    if (done) j["rounds"] = rounds.rounds;
    return McpToolResult::Json(DropEmpty(j));
  };
  return t;
}

// ---- decide, cancel ----

McpTool DecideTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "decide";
  t.title = "Decide a round by hand";
  t.description =
      "The manual decision of a round, for a campaign whose policy says decide: manual, once "
      "every experiment of the round has finished: keep_experiment_id (any experiment of the "
      "candidate to keep) makes that candidate's recipe the new head; 0 keeps nothing. The "
      "reason is stored with the decision. Refused (an error naming the cause) for an automatic "
      "policy, an unfinished round, or an experiment of another round.";
  t.input_schema =
      Schema({{"round_id", {{"type", "integer"}, {"minimum", 1}, {"description", "round id"}}},
              {"keep_experiment_id",
               {{"type", "integer"},
                {"minimum", 0},
                {"description", "an experiment of the candidate to keep; 0 = keep none"}}},
              {"reason", {{"type", "string"}, {"description", "why (stored with the decision)"}}}},
             {"round_id", "keep_experiment_id", "reason"});
  t.output_schema = Output({{"id", {{"type", "integer"}}},
                            {"state", {{"type", "string"}}},
                            {"kept", {{"type", "string"}}},
                            {"summary", {{"type", "string"}}}});
  t.hints.destructive = true;  // moves the campaign's head; a decided round stays decided
  t.handler = [client](const json& args, McpCallContext*) {
    v1::DecideRequest req;
    req.set_round_id(Int(args, "round_id", 0));
    req.set_keep_experiment_id(Int(args, "keep_experiment_id", 0));
    req.set_reason(Str(args, "reason"));
    if (req.reason().empty()) {
      return McpToolResult::Error(Status::InvalidArgument("arguments.reason: must not be empty"));
    }
    v1::RoundInfo round;
    Status st = client->Decide(req, &round);
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json(RoundSummary(round));
  };
  return t;
}

McpTool CancelTool(std::shared_ptr<DaemonClient> client) {
  McpTool t;
  t.name = "cancel";
  t.title = "Cancel an experiment";
  t.description =
      "Cancel one experiment: queued, it is never run; assigned or running, its trainer is "
      "stopped. It ends in state cancelled (a finished experiment keeps its state, which the "
      "answer gives). A cancelled run counts as a failure of its candidate in the round.";
  t.input_schema = Schema(
      {{"experiment_id", {{"type", "integer"}, {"minimum", 1}, {"description", "experiment id"}}}},
      {"experiment_id"});
  t.output_schema =
      Output({{"experiment_id", {{"type", "integer"}}}, {"state", {{"type", "string"}}}});
  t.hints.destructive = true;
  t.hints.idempotent = true;
  t.handler = [client](const json& args, McpCallContext*) {
    const int64_t id = Int(args, "experiment_id", 0);
    v1::CancelResponse resp;
    Status st = client->Cancel(id, &resp);
    if (st.code() == Status::Code::kNotFound) st = st.WithContext("arguments.experiment_id: ");
    if (!st.ok()) return McpToolResult::Error(st);
    return McpToolResult::Json({{"experiment_id", id}, {"state", resp.state()}});
  };
  return t;
}

}  // namespace

std::vector<McpTool> XvMcpTools(std::shared_ptr<DaemonClient> client,
                                const ClientOptions& options) {
  std::vector<McpTool> tools = {
      SubmitTool(client),       WaitTool(client),           ResultsTool(client, options),
      ExperimentTool(client),   CampaignCreateTool(client), CampaignShowTool(client),
      CampaignListTool(client), DecideTool(client),         CancelTool(client),
      StatusTool(client),       WorkersTool(client),        KnobsTool()};
  for (McpTool& t : CampaignControlTools(client)) tools.push_back(std::move(t));
  // Refusals point at what the agent can reach over MCP, not at files of a source tree.
  for (McpTool& t : tools) {
    t.handler = [handler = std::move(t.handler)](const json& args, McpCallContext* ctx) {
      return PointDocsAtMcp(handler(args, ctx));
    };
  }
  return tools;
}

std::string XvMcpInstructions() {
  return "xv trains proposals to a small GPT training recipe for a fixed time budget each and "
         "keeps a change only when it beats the current best (the campaign head) by more than "
         "the noise; lower val_bpb is better. The loop: campaign_create once (a base recipe and a "
         "policy), then repeat: campaign_show (the head and past decisions), submit candidates "
         "against the campaign (overrides of recipe knobs), wait (returns the figures and the "
         "round's decision; it gives up after 50 s by default: call it again while timed_out), "
         "read what was kept. Refusals name the field; fix and resubmit. Calls run concurrently: "
         "status and results answer while a wait runs. "
         "The knobs tool (or the resource xv://knobs) lists every knob with its type, default and "
         "range; the resource xv://docs/agent.md (or knobs {doc: \"agent.md\"}) has the rules.";
}

}  // namespace xv::client
