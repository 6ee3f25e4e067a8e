// Orphaned trainers: a worker killed with SIGKILL leaves its trainer running (the trainer has its
// own process group), with its stdout pipe broken, so no one can read its events or its result.
// A restarted worker finds such processes by the XV_SPEC_DIR=<work dir>/exp-<id>-a<attempt> entry
// the worker puts in every trainer's environment (read from /proc/<pid>/environ, which the same
// user may read) and kills their process groups, so the device is free before new work arrives.
// The spool's lock (worker/event_spool.h) makes sure no other live worker uses the same work dir.
#pragma once

#include <string>

namespace xv::worker {

// SIGKILLs the process group of every process whose environment holds XV_SPEC_DIR=<a directory
// inside `work_dir`>, then waits up to `wait_s` seconds for them to be gone. Returns how many
// processes it found. Linux only (/proc); elsewhere it finds none.
int KillOrphanedTrainers(const std::string& work_dir, double wait_s);

}  // namespace xv::worker
