// Scale probes of xv-bench-daemon: latencies measured against a running xvd whose database was made
// large (database_fill.h). Each probe is a plain function of the channel; figures are seconds.
//   ProbeQueries:   results-style reads (newest page, best by val_bpb, newest of a state no row
//                   has, a page deep in the table, one experiment, Status), `calls` of each;
//   ProbeDispatch:  one idle fake worker; `calls` times: Submit one experiment (on a thread of its
//                   own) and time the worker reading its Assign from the call's start and from its
//                   reply (the experiment is queued once its transaction committed, before the
//                   reply: so the queued .. Assign latency lies between the two; negative when the
//                   Assign came first); the run then finishes at once;
//   ProbeBigSubmit: one fake worker holding a running experiment; Status latency and the ack
//                   latency of a batch of 64 step events, first idle (1 s), then while a submit
//                   of `rows` rows (calls of 250 candidates x 16 replicates) goes on.
// Thread-safety: each probe runs its own threads and joins them before it returns.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

namespace xv::bench {

struct ScaleFigures {
  std::map<std::string, std::vector<double>> query_s;  // by probe name
  std::vector<double> dispatch_s;                      // Submit start .. Assign read
  std::vector<double> dispatch_queued_s;  // Submit reply .. Assign read (< 0: Assign first)
  std::vector<double> dispatch_submit_s;  // Submit start .. its reply
  std::vector<double> status_idle_s, status_during_submit_s;
  std::vector<double> ack_idle_s, ack_during_submit_s;
  double big_submit_s = 0;
  int64_t big_submit_rows = 0;
};

// Each returns "" or what failed.
std::string ProbeQueries(const std::shared_ptr<grpc::Channel>& channel, const std::string& campaign,
                         int calls, ScaleFigures* out);
std::string ProbeDispatch(const std::shared_ptr<grpc::Channel>& channel, int calls,
                          ScaleFigures* out);
std::string ProbeBigSubmit(const std::shared_ptr<grpc::Channel>& channel, int64_t rows,
                           ScaleFigures* out);

}  // namespace xv::bench
