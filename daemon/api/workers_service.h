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

#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include "daemon/api/dispatcher.h"
#include "daemon/store/store.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::daemon {

// The service is registered by hand rather than through the generated xv::v1::Workers::Service so
// that it reads the worker's messages as raw bytes and parses them itself
// (worker_message_edge.h ParseWorkerMessage): a message that does not parse is then a protocol
// error naming the field, instead of a stream that silently ends (gRPC's own parse failure looks
// like the worker closing the stream, and the worker resent the same message forever). An
// unreadable Finished still ends its attempt (failed, with the reason); an unreadable event is
// stored as a `refused` event under its seq; anything else ends the session with INVALID_ARGUMENT.
class WorkersService final : public grpc::Service {
 public:
  // `store` and `dispatcher` must outlive the service.
  WorkersService(store::Store* store, Dispatcher* dispatcher);

  grpc::Status Session(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<xv::v1::DaemonMessage, grpc::ByteBuffer>* stream);

 private:
  store::Store* const store_;
  Dispatcher* const dispatcher_;
};

}  // namespace xv::daemon
