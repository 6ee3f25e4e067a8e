// ReadWatchReplay: the MCP tools' one way to read stored events through a Watch replay (the
// experiment tool's event list, the events tool's pages). A live Watch stream never ends by itself;
// this reads until the caller has what it needs, the replay goes quiet, the limits are hit or the
// MCP call is cancelled, and then cancels the stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

#include "client/daemon_client.h"
#include "client/mcp/mcp_server.h"
#include "common/status.h"
#include "xv/v1/experiments.pb.h"

namespace xv::client {

// Where a replay read stops (whichever comes first).
struct WatchReplayLimits {
  size_t max_events = 100;                // more than this: *more is set, the extra one dropped
  std::chrono::milliseconds quiet{1000};  // this long without an event: the stored ones were sent
  std::chrono::milliseconds total{8000};  // the whole read, as the call's gRPC deadline
};

// How a replay read ended.
struct WatchReplayEnd {
  bool more = false;  // max_events was reached with events still coming
  bool last = false;  // `is_last` said an event was the last one wanted
};

// Reads the events `req` replays (req.since is the cursor) into *out, in order. `is_last`, when
// set, is asked about each event kept: true ends the read after it. Returns the daemon's refusal
// of the stream (a bad kind, an unknown campaign) as a Status; a stream cancelled or cut by the
// deadline here is no error.
Status ReadWatchReplay(DaemonClient* client, const v1::WatchRequest& req,
                       const WatchReplayLimits& limits,
                       const std::function<bool(const v1::WatchEvent&)>& is_last,
                       McpCallContext* call, std::vector<v1::WatchEvent>* out, WatchReplayEnd* end);

}  // namespace xv::client
