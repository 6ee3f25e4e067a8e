// WorkersService: the xv.v1.Workers gRPC service. Each Session call is one worker's bidirectional
// stream (protocol in proto/xv/v1/workers.proto):
//   Register -> Registered (+ EventAck/Cancel for attempts the worker reports as running), then the
//   daemon pushes Assign/Cancel/EventAck while the worker sends Heartbeat, TrainerEvent and
//   Finished.
// Trainer events are batched (up to kMaxBatch events or kFlushInterval) and stored in one
// transaction; the EventAck then carries the highest contiguous seq stored. Finished flushes the
// batch first, so an attempt's events are always stored before its terminal state. Thread-safety:
// gRPC runs each Session on its own thread; the handler starts one writer thread per session (gRPC
// allows one concurrent reader and one concurrent writer per stream).
#pragma once

#include "daemon/api/dispatcher.h"
#include "daemon/store/experiment_store.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::daemon {

class WorkersService final : public xv::v1::Workers::Service {
 public:
  // `store` and `dispatcher` must outlive the service.
  WorkersService(store::ExperimentStore* store, Dispatcher* dispatcher);

  grpc::Status Session(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<xv::v1::DaemonMessage, xv::v1::WorkerMessage>* stream) override;

 private:
  store::ExperimentStore* const store_;
  Dispatcher* const dispatcher_;
};

}  // namespace xv::daemon
