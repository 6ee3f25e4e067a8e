#include "client/mcp/mcp_watch_replay.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace xv::client {

Status ReadWatchReplay(DaemonClient* client, const v1::WatchRequest& req,
                       const WatchReplayLimits& limits,
                       const std::function<bool(const v1::WatchEvent&)>& is_last,
                       McpCallContext* call, std::vector<v1::WatchEvent>* out,
                       WatchReplayEnd* end) {
  using Clock = std::chrono::steady_clock;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + limits.total);
  auto reader = client->Watch(&ctx, req);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;          // the reader stopped: the stream ended, the page is full, or last
  bool stream_ended = false;  // the daemon ended the stream (a refusal): Finish has its status
  Clock::time_point latest = Clock::now();
  std::thread read([&] {
    v1::WatchEvent ev;
    bool open = true;
    while ((open = reader->Read(&ev))) {
      std::lock_guard<std::mutex> lock(mu);
      if (out->size() >= limits.max_events) {
        end->more = true;
        break;
      }
      out->push_back(ev);
      latest = Clock::now();
      if (is_last && is_last(ev)) {
        end->last = true;
        break;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    stream_ended = !open;
    cv.notify_all();
  });
  bool cancel = false;
  {
    std::unique_lock<std::mutex> lock(mu);
    while (!done && Clock::now() - latest < limits.quiet && !call->cancelled()) {
      cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    cancel = !stream_ended;
  }
  // The reader may still be blocked in Read: cancelling the stream returns it, and Finish.
  if (cancel) ctx.TryCancel();
  read.join();
  grpc::Status gs = reader->Finish();
  if (!gs.ok() && gs.error_code() != grpc::StatusCode::CANCELLED &&
      gs.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return client->FromGrpc(gs);
  }
  return Status::Ok();
}

}  // namespace xv::client
