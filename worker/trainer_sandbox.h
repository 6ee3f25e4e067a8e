// TrainerSandbox: runs a command or autoresearch trainer inside Debian's bubblewrap (`bwrap`), for
// trainers whose config says `sandbox: bubblewrap` (docs/autoresearch.md § Sandbox).
//
// Inside, the trainer sees:
//  - the system read-only: /usr (and the /bin, /lib, /lib64, /sbin links or directories), /etc;
//  - the data directory read-only, and every extra folder the attempt needs read-only (an
//    autoresearch trainer's prepare folder; a command trainer's program when it lies elsewhere);
//  - the attempt directory read-write, and nothing else writable but a private /tmp (tmpfs);
//  - a private /proc and a minimal /dev, plus the GPU device nodes that exist on the host
//    (/dev/nvidia*, /dev/nvidia-caps, /dev/dri, /dev/kfd) passed through, and then /sys
//    read-only too (the GPU runtimes read the devices' PCI and NUMA topology there);
//  - the trainer's program, when it lies outside the system folders: its folder, or the whole
//    Python virtual environment it belongs to, and the base interpreter's prefix
//    (ProgramReadOnlyFolders), read-only;
//  - no network (a network namespace of its own: connecting anywhere fails);
//  - nothing of the worker's work directory (other attempts), the daemon's state directory, home
//    directories or /work: those paths do not exist there.
// bwrap runs with --die-with-parent and stays in the worker's process group for the attempt, so
// the deadline's TERM/KILL reach it as they reach any trainer.
//
// A sandboxed trainer that fails after the system denied it something (a write outside its
// directory, a read of a hidden path, a socket) ends `failed` with failure_kind `sandbox_denied`:
// see SandboxDenial.
//
// Thread-safety: pure functions (SandboxedChild reads /dev to find the GPU nodes).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "worker/child_process.h"

namespace xv::worker {

inline constexpr const char* kBubblewrapPath = "/usr/bin/bwrap";
inline constexpr const char* kSandboxDeniedKind = "sandbox_denied";

struct SandboxMounts {
  std::string attempt_dir;             // read-write
  std::string data_dir;                // read-only
  std::vector<std::string> read_only;  // more read-only folders or files (absolute)
};

// Wraps `child` (argv, working directory) in bwrap with `mounts`. Errors: bwrap missing
// (FAILED_PRECONDITION naming kBubblewrapPath and the package), a mount path that is not absolute.
Status SandboxedChild(const SandboxMounts& mounts, ChildSpec* child);

// The bwrap arguments (everything before the trainer's argv), for tests and logs.
std::vector<std::string> BubblewrapArguments(const SandboxMounts& mounts,
                                             const std::vector<std::string>& gpu_nodes);

// The folders a sandboxed `program` needs to run, read-only, beyond the system folders (/usr,
// /bin, /sbin, /lib*, /etc, which are always there): none for a program inside them; else the
// program's folder, or, when that folder is `bin` of a Python virtual environment (a pyvenv.cfg
// beside it), the environment's root; plus, when they lie outside the system folders, the prefix
// of the file the program links to and of the environment's base interpreter (pyvenv.cfg's
// `home`): the folder above `bin`. A venv's site-packages live under its root, so a trainer
// whose program is /opt/torch/.venv/bin/python3 imports torch inside the sandbox. Reads the file
// system; the order is stable and without duplicates.
std::vector<std::string> ProgramReadOnlyFolders(const std::string& program);

// The GPU device nodes present on this host (absolute paths), in a stable order.
std::vector<std::string> HostGpuDeviceNodes();

// When a sandboxed trainer failed: the first line of its stderr tail that says the system denied
// an operation (read-only file system, permission denied, operation not permitted, no such file
// or directory, network unreachable, connection refused), or "" when none does.
std::string SandboxDenial(const std::string& stderr_tail);

}  // namespace xv::worker
