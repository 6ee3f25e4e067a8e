// xvctl wait [IDS...] [--timeout S] [--json]: until every given experiment (or every experiment) is
// terminal. Shows progress with time-left estimates on stderr: one updating line on a terminal, a
// line per change otherwise; --json prints the experiments at the end on stdout. Exit 0 when all
// are terminal, 124 on timeout. A daemon that goes away briefly (a restart) is waited for.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "client/campaign_time_budgets.h"
#include "client/commands/commands.h"
#include "client/daemon_client.h"
#include "client/experiment_listing.h"
#include "client/views/experiment_view.h"
#include "client/views/number_format.h"
#include "client/views/run_eta.h"
#include "common/bounded_json.h"

namespace xv::client {
namespace {

struct WaitArgs {
  std::vector<int64_t> ids;
  double timeout_s = 0;  // 0 = no limit
  double poll_s = 1.0;
  double unreachable_s = 30.0;
  bool json = false;
};

Status Fetch(DaemonClient* client, const WaitArgs& a, std::vector<v1::Experiment>* out) {
  if (a.ids.empty()) return ListFromDaemon(client, ExperimentFilter{}, out);
  out->clear();
  for (int64_t id : a.ids) {
    v1::Experiment e;
    Status st = client->GetExperiment(id, &e);
    if (st.code() == Status::Code::kNotFound) {
      return Status::InvalidArgument("experiment " + std::to_string(id) + ": not found");
    }
    XV_RETURN_IF_ERROR(st);
    out->push_back(e);
  }
  return Status::Ok();
}

std::string Summary(const std::vector<v1::Experiment>& exps, CampaignTimeBudgets* budgets,
                    bool* all_terminal) {
  std::map<std::string, int> counts;
  int done = 0;
  std::string running;
  for (const auto& e : exps) {
    ++counts[e.state()];
    if (IsTerminalState(e.state())) {
      ++done;
    } else if (e.state() == "running" && running.empty()) {
      running = "  #" + std::to_string(e.id()) + " " + e.name() + " " +
                ProgressCell(e, budgets->ForExperiment(e), 20);
    }
  }
  *all_terminal = done == static_cast<int>(exps.size());
  std::string s = std::to_string(done) + "/" + std::to_string(exps.size()) + " done";
  std::string parts;
  for (const auto& [state, n] : counts) {
    parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  }
  if (!parts.empty()) s += " (" + parts + ")";
  if (!*all_terminal) {
    const auto left = SecondsUntilAllFinished(
        exps, [budgets](const v1::Experiment& e) { return budgets->ForExperiment(e); });
    if (left) s += ", all done in ~" + FormatDuration(*left);
  }
  return s + running;
}

// The counts at the head of a Summary line (without the estimate and the running experiment).
std::string CountsPart(const std::string& line) {
  return line.substr(0, std::min(line.find(", all done in"), line.find("  #")));
}

// --json: {"timed_out", "elapsed_s", "counts": {state: n}, "experiments": [...]} on stdout.
void PrintWaitJson(const std::vector<v1::Experiment>& exps, bool timed_out, double elapsed_s) {
  nlohmann::json counts = nlohmann::json::object(), arr = nlohmann::json::array();
  for (const auto& e : exps) {
    counts[e.state()] = counts.value(e.state(), 0) + 1;
    arr.push_back(ExperimentJson(e));
  }
  std::cout << DumpJsonLossless(nlohmann::json{{"timed_out", timed_out},
                                               {"elapsed_s", elapsed_s},
                                               {"counts", counts},
                                               {"experiments", arr}},
                                2)
            << std::endl;
}

int RunWait(const WaitArgs& a, const ClientOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const bool tty = ::isatty(STDERR_FILENO);
  DaemonClient client(options);
  CampaignTimeBudgets budgets(&client);
  std::vector<v1::Experiment> last_seen;
  std::string last_line;
  Clock::time_point last_print = Clock::now();
  Clock::time_point unreachable_since{};
  bool unreachable = false;
  while (true) {
    std::vector<v1::Experiment> exps;
    Status st = Fetch(&client, a, &exps);
    if (st.code() == Status::Code::kUnavailable) {
      if (!unreachable) unreachable_since = Clock::now();
      unreachable = true;
      if (std::chrono::duration<double>(Clock::now() - unreachable_since).count() >
          a.unreachable_s) {
        if (tty) std::cerr << "\n";
        return ReportError(st);
      }
    } else if (!st.ok()) {
      if (tty) std::cerr << "\n";
      return ReportError(st);
    } else {
      unreachable = false;
      bool all_terminal = false;
      std::string line = Summary(exps, &budgets, &all_terminal);
      last_seen = exps;
      if (tty) {
        std::cerr << "\r\033[K" << line << std::flush;
      } else if (CountsPart(line) != CountsPart(last_line) ||
                 (line != last_line &&
                  std::chrono::duration<double>(Clock::now() - last_print).count() >= 10)) {
        // Not a terminal: a line when the counts change, and progress at most every 10 s.
        std::cerr << line << std::endl;
        last_print = Clock::now();
      }
      last_line = line;
      if (all_terminal) {
        if (tty) std::cerr << "\n";
        if (a.json) PrintWaitJson(last_seen, /*timed_out=*/false, elapsed());
        return kExitOk;
      }
    }
    if (a.timeout_s > 0 && elapsed() > a.timeout_s) {
      if (tty) std::cerr << "\n";
      std::cerr << "xvctl: wait: timed out after " << a.timeout_s << " s: " << last_line
                << std::endl;
      if (a.json) PrintWaitJson(last_seen, /*timed_out=*/true, elapsed());
      return kExitTimeout;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(a.poll_s));
  }
}

}  // namespace

void AddWaitCommand(CLI::App* app, const ClientOptions* options) {
  auto args = std::make_shared<WaitArgs>();
  CLI::App* sub = app->add_subcommand(
      "wait", "wait until the given experiments (default: all) are finished; exit 124 on timeout");
  sub->add_option("ids", args->ids, "experiment ids (default: every experiment)");
  sub->add_option("--timeout", args->timeout_s, "give up after S seconds (0 = never)")
      ->capture_default_str();
  sub->add_option("--poll", args->poll_s, "seconds between polls")->capture_default_str();
  sub->add_flag("--json", args->json,
                "at the end, print {timed_out, elapsed_s, counts, experiments} as JSON on stdout");
  sub->callback([args, options] {
    int rc = RunWait(*args, *options);
    if (rc != kExitOk) throw CLI::RuntimeError(rc);
  });
}

}  // namespace xv::client
