// `xv-train train`: loads and validates a recipe, checks it against the data directory, builds the
// GPT and MuonAdamW, trains for the recipe's time budget, evaluates val_bpb, and reports through
// events on stdout (docs/events.md) and upstream's log and summary block on stderr. Thread-safety:
// runs on the main thread (the batch loaders own their prefetch threads).
#pragma once

#include <string>
#include <vector>

#include "trainer/events/event_writer.h"

namespace xv::trainer {

struct TrainCommandOptions {
  std::string recipe_path;        // --recipe FILE.yaml
  std::string recipe_json_path;   // --recipe-json FILE.json (exactly one of the two)
  std::string data_dir;           // --data DIR
  std::vector<std::string> sets;  // --set KEY=VALUE, applied in order after the recipe
  std::string device;             // --device auto|cpu|cuda[:N]; empty: the recipe's `device`
  std::string save_path;          // --save CKPT.safetensors (after the final evaluation)
  std::string init_from;          // --init-from CKPT.safetensors (instead of InitWeights)
  double start_time = 0;          // unix seconds when the process started (total_seconds)
};

// Returns the process exit code (events/exit_codes.h). Every failing exit writes an `error` event
// first (and a `nan` event before exit 3).
int RunTrainCommand(const TrainCommandOptions& options, EventWriter* events);

// Writes an `error` event and the same message to stderr; returns `exit_code`.
int ReportFailure(EventWriter* events, int exit_code, const std::string& message);

}  // namespace xv::trainer
