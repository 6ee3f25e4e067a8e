// The `command` trainer plugin's launch contract (docs/worker.md § Command trainers): how the
// worker starts a configured program for one attempt.
//
//  - argv: the configured program and its fixed args; nothing of it comes from the experiment;
//  - SPEC_DIR/spec.json: {experiment_id, attempt, trainer, campaign_id, round_id, seed,
//    time_budget_s, hard_deadline_s, recipe_hash, recipe (the resolved recipe object), data_dir,
//    device (cpu | cuda), visible_devices, spec_dir};
//  - environment: clean, not the worker's (which may hold credentials). From the worker's own
//    environment only the base set (IsBaseEnvironmentName: PATH, HOME, locale, TMPDIR, the GPU
//    runtimes' variables) and the names the trainer's config lists (`env: [NAME]`); then the
//    trainer's configured `env` values, then XV_<KNOB> for every
//    top-level recipe knob (name upper-cased; numbers as JSON writes them, booleans true/false,
//    lists comma-joined; nested objects such as `derived` are left out), then XV_SPEC,
//    XV_SPEC_DIR, XV_EXPERIMENT_ID, XV_ATTEMPT, XV_DATA_DIR, XV_DEVICE, XV_TRAINER,
//    XV_TIME_BUDGET_S (the spec's budget when it has one), CUDA_VISIBLE_DEVICES and
//    HIP_VISIBLE_DEVICES (the worker's device index; "" on a CPU worker). Later entries win.
//
// Thread-safety: pure functions (PrepareCommandTrainer writes one file).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "worker/child_process.h"
#include "worker/trainer_config.h"
#include "xv/v1/types.pb.h"

namespace xv::worker {

// What the worker fixes for its lifetime and hands to every command trainer.
struct CommandTrainerContext {
  std::string data_dir;
  std::string device_flag;      // cpu | cuda
  std::string visible_devices;  // "" hides every GPU
};

// True for the variables every command trainer gets from the worker's environment without being
// named: PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, TZ, TMPDIR, TERM, LD_LIBRARY_PATH, and
// the prefixes LC_, CUDA_, HIP_, HSA_, ROCR_, ROCM_, NVIDIA_, PYTORCH_ (what the GPU runtimes
// read: device selection, install paths, allocator settings).
bool IsBaseEnvironmentName(const std::string& name);

// The entries of `worker_env` (NAME=value strings, null-terminated like `environ`) that a command
// trainer inherits: the base set and the names in `named`, sorted by name.
std::vector<std::pair<std::string, std::string>> InheritedCommandEnvironment(
    const char* const* worker_env, const std::vector<std::string>& named);

// XV_<KNOB> pairs for every top-level knob of `recipe` (a JSON object), sorted by name.
std::vector<std::pair<std::string, std::string>> RecipeKnobEnvironment(
    const nlohmann::json& recipe);

// The spec.json object above. `recipe` is spec.recipe_json() parsed (null when it is not JSON).
nlohmann::json CommandSpecJson(const v1::ExperimentSpec& spec, const nlohmann::json& recipe,
                               const CommandTrainerContext& context, const std::string& spec_dir);

// Writes SPEC_DIR/spec.json and fills *child (argv, environment, working directory SPEC_DIR).
// Fails (naming the cause) when the recipe is not a JSON object or the file cannot be written.
Status PrepareCommandTrainer(const TrainerConfig& trainer, const v1::ExperimentSpec& spec,
                             const CommandTrainerContext& context, const std::string& spec_dir,
                             ChildSpec* child);

}  // namespace xv::worker
