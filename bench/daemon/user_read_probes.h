// The reads a user or an agent makes of a large database, timed end to end as they make them
// (issue 18's "results-style queries" goal): xvctl as a child process (its start included) and the
// dashboard's JSON API over HTTP. Part of xv-bench-daemon's scale phase (scale_probes.h).
//   xvctl results                    the default listing (a page of 50; before paging, the
//                                    newest 10,000 rows: main's xvctl beside main's xvd)
//   xvctl results --json             the same as JSON
//   xvctl results --before ID        an older page, from the middle of the table
//   xvctl results --campaign C --limit 20
//   xvctl show ID / status           one experiment in full (its events replayed); the daemon
//   xvctl results [--json] --limit 10000   the old default, 3 calls at most
//   GET /api/overview, /api/campaigns/ID (its default page), /api/campaigns/ID?before=ID (an
//   older page), /api/experiments/ID (one experiment's metrics curve)
// Thread-safety: runs on the caller's thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xv::bench {

struct UserReadTargets {
  std::string xvctl;              // the binary
  std::string state_dir;          // xvd's state dir (its socket)
  int http_port = 0;              // the dashboard's port on 127.0.0.1; 0: no dashboard probes
  std::string campaign;           // a large campaign's name ...
  int64_t campaign_id = 0;        // ... and id
  int64_t max_experiment_id = 0;  // the dashboard's experiment probe picks one in 1..this
  int64_t shown_max_id = 0;       // `xvctl show` picks one in 1..this (rows with stored events)
};

// Runs each read `calls` times (xvctl: at most `process_calls`), appending seconds per call to
// (*out)[name]. Returns "" or what failed (a non-zero exit, a non-200 reply, with its output).
std::string ProbeUserReads(const UserReadTargets& t, int calls, int process_calls,
                           std::map<std::string, std::vector<double>>* out);

}  // namespace xv::bench
