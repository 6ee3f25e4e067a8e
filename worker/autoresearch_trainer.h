// The `autoresearch` trainer plugin's launch (docs/autoresearch.md): an upstream-style train.py,
// unmodified, run on xv's data with the experiment's knobs in its constants.
//
// For one attempt, in order:
//  1. read the configured source (an error names the file: the attempt fails, crashed), or take
//     the code candidate's text from the spec (ExperimentSpec.source_text; issue 16): only for a
//     trainer with allow_code_candidates and the sandbox, its sha256 checked (INVALID_ARGUMENT:
//     the attempt ends invalid before anything runs);
//  2. rewrite its top-level constants from the resolved recipe (worker/autoresearch_source.h); a
//     knob the file cannot take is refused here, before the trainer starts (INVALID_ARGUMENT
//     naming the knob, its constant and the file: the attempt ends invalid, invalid_config);
//  3. find prepare.py in the trainer's `prepare` folder (else the installed one, else the source
//     tree's python/xv_autoresearch);
//  4. write the rewritten copy as SPEC_DIR/<the source's file name>;
//  5. the command contract (worker/command_trainer.h) with argv `program COPY args...`, and on top
//     of its environment: PYTHONPATH = the prepare folder first (then a configured PYTHONPATH),
//     PYTHONUNBUFFERED=1, PYTHONDONTWRITEBYTECODE=1, XV_SOURCE_SHA256 (the copy's hash), and
//     OMP_NUM_THREADS when the recipe's `threads` is above 0.
// The attempt then relays a `source` event (SourceEvent) before the trainer's own output, so the
// rewritten file's hash is stored with the experiment.
//
// Thread-safety: pure functions apart from the files they read and write.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "worker/autoresearch_source.h"
#include "worker/child_process.h"
#include "worker/command_trainer.h"
#include "worker/trainer_config.h"
#include "xv/v1/types.pb.h"

namespace xv::worker {

struct AutoresearchAttempt {
  std::string source_path;  // the configured file
  // A code candidate (issue 16): the sha256 of the submitted source run instead of the configured
  // file's text ("" = the configured file).
  std::string candidate_sha256;
  std::string copy_path;    // SPEC_DIR/<file name>, the program's first argument
  std::string prepare_dir;  // first on PYTHONPATH
  RewrittenSource rewritten;
};

// The folder of prepare.py for `trainer`: its `prepare`, else the installed copy when it exists,
// else the source tree's.
std::string AutoresearchPrepareDir(const TrainerConfig& trainer);

// Steps 1-5 above. Errors: IO_ERROR naming the source or the copy; INVALID_ARGUMENT for a knob
// the source cannot take (step 2); FAILED_PRECONDITION when the prepare folder has no prepare.py.
Status PrepareAutoresearchTrainer(const TrainerConfig& trainer, const v1::ExperimentSpec& spec,
                                  const CommandTrainerContext& context, const std::string& spec_dir,
                                  ChildSpec* child, AutoresearchAttempt* attempt);

// {"type": "source", "t": unix seconds, "trainer", "file" (the configured source),
//  "candidate_sha256" (the code candidate's submitted source, "" for the configured file), "copy",
//  "sha256" (of the rewritten copy), "constants" ({CONSTANT: literal} as written),
//  "prepare_dir", "metric_version" (kPrepareModuleMetricVersion)}.
nlohmann::json SourceEvent(const AutoresearchAttempt& attempt, const std::string& trainer_name,
                           double now_s);

}  // namespace xv::worker
