// ServeWatch: the body of Experiments.Watch. Validates the request, subscribes to the hub, replays
// the stored events after `since` up to the hub's position, then streams live events until the
// client cancels, the daemon stops, or (until_idle) the scope has nothing left to do.
// Thread-safety: one call per RPC thread; the hub and store are shared.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "daemon/api/watch_hub.h"
#include "daemon/store/experiment_store.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon {

grpc::Status ServeWatch(store::ExperimentStore* store, WatchHub* hub, grpc::ServerContext* ctx,
                        const xv::v1::WatchRequest& req,
                        grpc::ServerWriter<xv::v1::WatchEvent>* writer);

}  // namespace xv::daemon
