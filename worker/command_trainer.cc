#include "worker/command_trainer.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>

extern char** environ;

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"

namespace xv::worker {
namespace {

using nlohmann::json;

std::string EnvValue(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_array()) {
    std::string joined;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) joined += ",";
      joined += EnvValue(v[i]);
    }
    return joined;
  }
  return v.dump();  // numbers (shortest round-trip text), true / false
}

std::string UpperCase(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool IsBaseEnvironmentName(const std::string& name) {
  static const char* const kNames[] = {"PATH",   "HOME", "USER",           "LOGNAME",
                                       "SHELL",  "LANG", "LANGUAGE",       "TZ",
                                       "TMPDIR", "TERM", "LD_LIBRARY_PATH"};
  static const char* const kPrefixes[] = {"LC_",   "CUDA_", "HIP_",    "HSA_",
                                          "ROCR_", "ROCM_", "NVIDIA_", "PYTORCH_"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> InheritedCommandEnvironment(
    const char* const* worker_env, const std::vector<std::string>& named) {
  std::map<std::string, std::string> kept;
  for (const char* const* e = worker_env; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = kv.substr(0, eq);
    if (IsBaseEnvironmentName(name) || std::find(named.begin(), named.end(), name) != named.end()) {
      kept[name] = kv.substr(eq + 1);
    }
  }
  return {kept.begin(), kept.end()};
}

std::vector<std::pair<std::string, std::string>> RecipeKnobEnvironment(const json& recipe) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!recipe.is_object()) return env;
  for (auto it = recipe.begin(); it != recipe.end(); ++it) {  // nlohmann::json keeps keys sorted
    if (it.value().is_object()) continue;
    bool name_ok = !it.key().empty();
    for (char c : it.key()) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') name_ok = false;
    }
    if (!name_ok) continue;
    env.emplace_back("XV_" + UpperCase(it.key()), EnvValue(it.value()));
  }
  return env;
}

json CommandSpecJson(const v1::ExperimentSpec& spec, const json& recipe,
                     const CommandTrainerContext& context, const std::string& spec_dir) {
  return {{"experiment_id", spec.experiment_id()},
          {"attempt", spec.attempt()},
          {"trainer", spec.trainer()},
          {"campaign_id", spec.campaign_id()},
          {"round_id", spec.round_id()},
          {"seed", spec.seed()},
          {"time_budget_s", spec.time_budget_s()},
          {"hard_deadline_s", spec.hard_deadline_s()},
          {"recipe_hash", spec.recipe_hash()},
          {"recipe", recipe},
          {"data_dir", context.data_dir},
          {"device", context.device_flag},
          {"visible_devices", context.visible_devices},
          {"spec_dir", spec_dir}};
}

Status PrepareCommandTrainer(const TrainerConfig& trainer, const v1::ExperimentSpec& spec,
                             const CommandTrainerContext& context, const std::string& spec_dir,
                             ChildSpec* child) {
  json recipe = ParseBoundedJsonOrDiscarded(spec.recipe_json());
  if (!recipe.is_object()) {
    return Status::InvalidArgument("recipe_json: not a JSON object; cannot make XV_* variables");
  }
  const std::string spec_path = spec_dir + "/spec.json";
  {
    std::ofstream f(spec_path, std::ios::binary | std::ios::trunc);
    if (!f) return Status::IoError(spec_path + ": cannot open for writing");
    f << DumpJsonLossless(CommandSpecJson(spec, recipe, context, spec_dir), 2) << '\n';
    f.close();
    if (!f) return Status::IoError(spec_path + ": write failed");
  }
  ChildSpec cs;
  cs.argv.push_back(trainer.program);
  cs.argv.insert(cs.argv.end(), trainer.args.begin(), trainer.args.end());
  // A clean environment: the worker's may hold credentials the trainer has no business with.
  cs.inherit_environment = false;
  cs.env_overrides = InheritedCommandEnvironment(environ, trainer.env_inherit);
  cs.env_overrides.insert(cs.env_overrides.end(), trainer.env.begin(), trainer.env.end());
  for (auto& kv : RecipeKnobEnvironment(recipe)) cs.env_overrides.push_back(std::move(kv));
  cs.env_overrides.insert(cs.env_overrides.end(),
                          {{"XV_SPEC", spec_path},
                           {"XV_SPEC_DIR", spec_dir},
                           {"XV_EXPERIMENT_ID", std::to_string(spec.experiment_id())},
                           {"XV_ATTEMPT", std::to_string(spec.attempt())},
                           {"XV_DATA_DIR", context.data_dir},
                           {"XV_DEVICE", context.device_flag},
                           {"XV_TRAINER", trainer.name},
                           {"CUDA_VISIBLE_DEVICES", context.visible_devices},
                           {"HIP_VISIBLE_DEVICES", context.visible_devices}});
  if (spec.time_budget_s() > 0) {
    cs.env_overrides.emplace_back("XV_TIME_BUDGET_S", json(spec.time_budget_s()).dump());
  }
  cs.working_dir = spec_dir;
  *child = std::move(cs);
  return Status::Ok();
}

}  // namespace xv::worker
