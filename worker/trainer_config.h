// TrainerConfig / WorkerConfig: the trainer plugins one xv-worker offers (DESIGN.md "Trainers are
// plugins of the worker"), read from the worker's YAML config file (`xv-worker --config FILE`,
// docs/worker.md). A submitted experiment names a trainer by its configured name; the command line
// a name stands for lives only here, on the worker's machine, never in an API request.
//
// File format (unknown keys at any level are errors naming the field):
//
//   trainers:
//     - name: libtorch            # [A-Za-z0-9._-], at most 64 characters, unique
//       kind: libtorch            # libtorch | command
//       program: /opt/xv/bin/xv-train   # libtorch: optional (default: --trainer-bin)
//     - name: upstream-fork
//       kind: command
//       program: /usr/bin/python3       # command: required, an absolute path
//       args: [/home/me/autoresearch/train.py]   # fixed list (default [])
//       env: {PYTHONUNBUFFERED: "1"}             # optional; names [A-Za-z_][A-Za-z0-9_]*
//       # or a list: env: [WANDB_API_KEY, PYTHONUNBUFFERED=1]: NAME passes the worker's value on
//       # (when it has one), NAME=value sets it
//       output: auto              # auto | xv-events | upstream (command only; default auto)
//     - name: my-fork
//       kind: autoresearch        # a command trainer for an autoresearch train.py (see below)
//       source: /home/me/autoresearch/train.py   # required, an absolute path
//       program: /usr/bin/python3                # optional (default /usr/bin/python3)
//       prepare: /opt/xv/share/xv/python/xv_autoresearch   # optional: the folder of xv's
//                                                 # prepare.py (default: the installed one)
//       args, env, output: as for command (output default auto)
//       sandbox: bubblewrap       # command and autoresearch: none (default) | bubblewrap
//       allow_code_candidates: true   # autoresearch under bubblewrap only (default false): run
//                                 # submitted train.py sources (code candidates, issue 16)
//
// An autoresearch trainer runs `program SPEC_DIR/<source's file name> args...`: the worker copies
// the source into the attempt directory with its constants rewritten from the resolved recipe
// (worker/autoresearch_source.h) and puts `prepare` first on PYTHONPATH
// (worker/autoresearch_trainer.h).
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace xv::worker {

// kAutoresearch is a command trainer whose source file the worker rewrites per attempt.
enum class TrainerKind { kLibtorch, kCommand, kAutoresearch };

// How a trainer's stdout is read (worker/trainer_output_reader.h).
enum class TrainerOutputFormat {
  kXvEvents,  // one xv JSON event per line (docs/events.md); other lines become log events
  kUpstream,  // upstream autoresearch train.py: progress lines and the `---` summary block
  kAuto,      // each line: an xv JSON event if it is one, else upstream, else a log event
};

struct TrainerConfig {
  std::string name;
  TrainerKind kind = TrainerKind::kLibtorch;
  std::string program;            // "" for libtorch: the worker's --trainer-bin
  std::vector<std::string> args;  // command only: argv[1..]
  std::vector<std::pair<std::string, std::string>> env;  // set before the worker's XV_* variables
  // Names whose value the trainer gets from the worker's environment (when set there). A command
  // trainer's environment is otherwise clean (worker/command_trainer.h); libtorch trainers inherit
  // the worker's whole environment anyway.
  std::vector<std::string> env_inherit;
  TrainerOutputFormat output = TrainerOutputFormat::kXvEvents;  // libtorch: always kXvEvents
  std::string source;       // autoresearch only: the fork's train.py (absolute)
  std::string prepare_dir;  // autoresearch only: folder of prepare.py ("" = the installed one)
  bool sandbox = false;     // command-like only: run under bubblewrap (worker/trainer_sandbox.h)
  // autoresearch with sandbox only: runs code candidates (a submitted train.py instead of
  // `source`); the worker offers them in Capabilities.code_candidate_trainers.
  bool allow_code_candidates = false;
};

// True for the kinds that run a configured program with the command contract (command_trainer.h).
inline bool IsCommandLike(TrainerKind kind) { return kind != TrainerKind::kLibtorch; }

struct WorkerConfig {
  std::vector<TrainerConfig> trainers;  // in file order; names unique
};

// The configuration of a worker started without --config: one `libtorch` trainer.
WorkerConfig DefaultWorkerConfig();

// Says whether a top-level key of the file is one of xv-worker's flags (`daemon`, `tls-ca`, ...),
// which common/config_file.h reads from the same file.
using IsWorkerFlagKey = std::function<bool(const std::string& key)>;

// Parses the YAML text above. Errors name the field path ("trainers[1].program: must be an
// absolute path, got 'train.py'") and YAML syntax errors add "(line N, column M)". On error
// *config is unchanged. Does not look at the file system (see CheckWorkerConfigPrograms).
// Top-level keys for which `is_flag_key` says true are skipped; a file that has such keys but no
// `trainers` list gets DefaultWorkerConfig(). Any other top-level key is an error.
Status ParseWorkerConfigYaml(const std::string& yaml_text, WorkerConfig* config,
                             const IsWorkerFlagKey& is_flag_key = nullptr);

// Reads and parses `path`; errors start with the path.
Status LoadWorkerConfigFile(const std::string& path, WorkerConfig* config,
                            const IsWorkerFlagKey& is_flag_key = nullptr);

// Every command trainer's program exists and is executable, and every autoresearch trainer's
// source is a readable file; the message names the trainer.
Status CheckWorkerConfigPrograms(const WorkerConfig& config);

// The trainer named `name` ("" means "libtorch"), or nullptr.
const TrainerConfig* FindTrainer(const WorkerConfig& config, const std::string& name);

// "libtorch" / "command" / "autoresearch"; "auto" / "xv-events" / "upstream".
const char* TrainerKindName(TrainerKind kind);
const char* TrainerOutputFormatName(TrainerOutputFormat format);

}  // namespace xv::worker
