// Orphaned trainers: a worker killed with SIGKILL leaves its trainer running (the trainer has its
// own process group), with its stdout pipe broken, so no one can read its events or its result.
// A restarted worker finds such processes of an attempt by the XV_SPEC_DIR=<spec dir> entry the
// worker puts in every trainer's environment (read from /proc/<pid>/environ, which the same user
// may read) and kills their process groups, so the device is free before new work arrives.
#pragma once

#include <string>

namespace xv::worker {

// SIGKILLs the process group of every process whose environment holds XV_SPEC_DIR=`spec_dir`,
// then waits up to `wait_s` seconds for them to be gone. Returns how many processes it found.
// Linux only (/proc); elsewhere it finds none.
int KillOrphanedTrainers(const std::string& spec_dir, double wait_s);

}  // namespace xv::worker
