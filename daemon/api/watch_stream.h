// The body of Experiments.Watch on gRPC's callback API: no thread is held per stream. Validates
// the request, subscribes to the hub (RESOURCE_EXHAUSTED past WatchHubOptions::max_streams),
// replays the stored events after `since` up to the hub's position, then streams live events
// until the client cancels, the daemon stops, or (until_idle) the scope has nothing left to do.
//
// Who runs what: the replay (store reads) runs in gRPC's reactions (the handler, then each
// OnWriteDone); once live, queued events are written from OnWriteDone and from the hub's feed
// thread (the subscription's listener, called after every publishing round and at least every
// poll_ms), which is also where until_idle looks at the store. One write is in flight at a time.
//
// Thread-safety: the reactor owns itself (deleted in OnDone); the hub and store are shared and
// must outlive every stream (DaemonServer stops the hub, which ends the streams, before the
// server).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_callback.h>

#include "daemon/api/watch_hub.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon {

// A reactor serving one Watch call (hub null: UNAVAILABLE). gRPC deletes nothing: the reactor
// deletes itself when the call is done.
grpc::ServerWriteReactor<xv::v1::WatchEvent>* StartWatch(store::Store* store, WatchHub* hub,
                                                         grpc::CallbackServerContext* ctx,
                                                         const xv::v1::WatchRequest& req);

}  // namespace xv::daemon
