#include "worker/autoresearch_trainer.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/bounded_json_or_discarded.h"
#include "common/recipe.h"
#include "common/sha256.h"
#include "common/text_file.h"

namespace xv::worker {
namespace {

using nlohmann::json;

#ifndef XV_AUTORESEARCH_PREPARE_INSTALLED
#define XV_AUTORESEARCH_PREPARE_INSTALLED "/usr/local/share/xv/python/xv_autoresearch"
#endif
#ifndef XV_AUTORESEARCH_PREPARE_SOURCE
#define XV_AUTORESEARCH_PREPARE_SOURCE ""
#endif

// A source file is read whole; a train.py is a few tens of KiB.
constexpr size_t kMaxSourceBytes = 4 << 20;

bool Readable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status ReadSource(const std::string& path, std::string* text) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IoError(path + ": cannot read the trainer's source");
  std::ostringstream s;
  s << f.rdbuf();
  if (!f && !f.eof()) return Status::IoError(path + ": read failed");
  *text = s.str();
  if (text->size() > kMaxSourceBytes) {
    return Status::InvalidArgument(path + ": " + std::to_string(text->size()) +
                                   " bytes; a trainer source may have at most " +
                                   std::to_string(kMaxSourceBytes));
  }
  return Status::Ok();
}

// Step 1: the code candidate's source when the spec carries one (issue 16), else the configured
// file. *name is how errors name it.
Status ReadAttemptSource(const TrainerConfig& trainer, const v1::ExperimentSpec& spec,
                         AutoresearchAttempt* a, std::string* source, std::string* name) {
  if (spec.source_text().empty()) {
    *name = trainer.source;
    return ReadSource(trainer.source, source);
  }
  // The daemon assigns code candidates only to workers that offer them; refuse one that reached
  // a worker whose config does not allow it (an older daemon) before anything runs.
  if (!trainer.allow_code_candidates || !trainer.sandbox) {
    return Status::InvalidArgument(
        "trainer '" + trainer.name +
        "' does not run code candidates on this worker (its config needs "
        "allow_code_candidates: true and sandbox: bubblewrap)");
  }
  if (Sha256Hex(spec.source_text()) != spec.source_sha256()) {
    return Status::InvalidArgument("source_sha256: the code candidate's text does not hash to " +
                                   spec.source_sha256().substr(0, 64));
  }
  a->candidate_sha256 = spec.source_sha256();
  *name = "code candidate " + spec.source_sha256().substr(0, 12) + " (" + FileName(trainer.source) +
          ")";
  *source = spec.source_text();
  return Status::Ok();
}

// The environment an autoresearch trainer gets on top of the command contract's.
void AddAutoresearchEnvironment(const AutoresearchAttempt& a, const json& recipe, ChildSpec* cs) {
  std::string configured_path;
  for (const auto& [name, value] : cs->env_overrides) {
    if (name == "PYTHONPATH") configured_path = value;
  }
  cs->env_overrides.emplace_back(
      "PYTHONPATH", a.prepare_dir + (configured_path.empty() ? "" : ":" + configured_path));
  cs->env_overrides.emplace_back("PYTHONUNBUFFERED", "1");
  cs->env_overrides.emplace_back("PYTHONDONTWRITEBYTECODE", "1");
  cs->env_overrides.emplace_back("XV_SOURCE_SHA256", a.rewritten.sha256);
  if (recipe.contains("threads") && recipe["threads"].is_number_integer() &&
      recipe["threads"].get<int64_t>() > 0) {
    cs->env_overrides.emplace_back("OMP_NUM_THREADS", recipe["threads"].dump());
  }
}

}  // namespace

std::string AutoresearchPrepareDir(const TrainerConfig& trainer) {
  if (!trainer.prepare_dir.empty()) return trainer.prepare_dir;
  const std::string installed = XV_AUTORESEARCH_PREPARE_INSTALLED;
  if (Readable(installed + "/prepare.py")) return installed;
  return XV_AUTORESEARCH_PREPARE_SOURCE;
}

Status PrepareAutoresearchTrainer(const TrainerConfig& trainer, const v1::ExperimentSpec& spec,
                                  const CommandTrainerContext& context, const std::string& spec_dir,
                                  ChildSpec* child, AutoresearchAttempt* attempt) {
  AutoresearchAttempt a;
  a.source_path = trainer.source;
  // 1. The configured source, or the code candidate's.
  std::string source, source_name;
  XV_RETURN_IF_ERROR(ReadAttemptSource(trainer, spec, &a, &source, &source_name));
  // 2. Its constants from the resolved recipe; a knob it cannot take is refused here.
  const json recipe = ParseBoundedJsonOrDiscarded(spec.recipe_json());
  if (!recipe.is_object()) {
    return Status::InvalidArgument("recipe_json: not a JSON object; cannot rewrite " + source_name);
  }
  XV_RETURN_IF_ERROR(
      RewriteSourceConstants(source, source_name, recipe, RecipeToJson(Recipe{}), &a.rewritten));
  // 3. The prepare module.
  a.prepare_dir = AutoresearchPrepareDir(trainer);
  if (a.prepare_dir.empty() || !Readable(a.prepare_dir + "/prepare.py")) {
    return Status::FailedPrecondition(
        "trainer '" + trainer.name + "': no prepare.py in '" + a.prepare_dir +
        "' (set the trainer's `prepare` to the folder of xv's python/xv_autoresearch/prepare.py)");
  }
  // 4. The rewritten copy in the attempt directory.
  a.copy_path = spec_dir + "/" + FileName(trainer.source);
  XV_RETURN_IF_ERROR(WriteWholeFile(a.copy_path, a.rewritten.text));
  // 5. The command contract, running the copy.
  TrainerConfig as_command = trainer;
  as_command.args.insert(as_command.args.begin(), a.copy_path);
  XV_RETURN_IF_ERROR(PrepareCommandTrainer(as_command, spec, context, spec_dir, child));
  AddAutoresearchEnvironment(a, recipe, child);
  *attempt = std::move(a);
  return Status::Ok();
}

json SourceEvent(const AutoresearchAttempt& attempt, const std::string& trainer_name,
                 double now_s) {
  json constants = json::object();
  for (const auto& [name, literal] : attempt.rewritten.assigned) constants[name] = literal;
  return {{"type", "source"},
          {"t", now_s},
          {"trainer", trainer_name},
          {"file", attempt.source_path},
          {"candidate_sha256", attempt.candidate_sha256},
          {"copy", attempt.copy_path},
          {"sha256", attempt.rewritten.sha256},
          {"constants", constants},
          {"prepare_dir", attempt.prepare_dir},
          {"metric_version", kPrepareModuleMetricVersion}};
}

}  // namespace xv::worker
