// The Finished report of an attempt that its worker stopped itself: the worker process was told to
// stop (SIGTERM or SIGINT: systemd stopping the unit, Slurm ending the job, Kubernetes deleting the
// pod) while the trainer ran. It is neither the trainer's outcome nor a cancel asked for by a
// person: xvd treats the attempt as lost with its worker (requeued while the experiment has
// attempts left, the same rule as a lease that expired; docs/worker.md § Stopping a worker).
#pragma once

namespace xv {

// Finished.state of such an attempt (never a state an experiment ends in).
inline constexpr const char* kInterruptedFinishedState = "interrupted";
// Its Finished.failure_kind.
inline constexpr const char* kWorkerStoppedFailureKind = "worker_stopped";

}  // namespace xv
