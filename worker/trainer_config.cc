#include "worker/trainer_config.h"

#include <unistd.h>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace xv::worker {
namespace {

std::string MarkText(const YAML::Mark& mark) {
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

Status Invalid(const std::string& field, const std::string& what, const YAML::Node& at) {
  return Status::InvalidArgument(field + ": " + what + MarkText(at.Mark()));
}

bool IsTrainerName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

bool IsEnvName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

Status ReadScalar(const YAML::Node& node, const std::string& field, std::string* out) {
  if (!node.IsScalar()) return Invalid(field, "must be a string", node);
  *out = node.Scalar();
  return Status::Ok();
}

// args: a list of strings (null: none).
Status ParseArgs(const YAML::Node& value, const std::string& field,
                 std::vector<std::string>* args) {
  if (value.IsNull()) return Status::Ok();
  if (!value.IsSequence()) return Invalid(field, "must be a list of strings", value);
  for (size_t i = 0; i < value.size(); ++i) {
    std::string arg;
    XV_RETURN_IF_ERROR(ReadScalar(value[i], field + "[" + std::to_string(i) + "]", &arg));
    args->push_back(arg);
  }
  return Status::Ok();
}

// env: a mapping NAME: value, or a list [NAME, NAME=value, ...] where a bare name passes the
// worker's own value on (when set). Null: none.
Status ParseEnv(const YAML::Node& value, const std::string& field, TrainerConfig* t) {
  if (value.IsNull()) return Status::Ok();
  if (value.IsSequence()) {
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string item_field = field + "[" + std::to_string(i) + "]";
      std::string item;
      XV_RETURN_IF_ERROR(ReadScalar(value[i], item_field, &item));
      const size_t eq = item.find('=');
      const std::string name = item.substr(0, eq);
      if (!IsEnvName(name)) {
        return Invalid(
            item_field,
            "'" + name.substr(0, 64) + "' is not an environment variable name (NAME or NAME=value)",
            value[i]);
      }
      if (eq == std::string::npos) {
        t->env_inherit.push_back(name);
      } else {
        t->env.emplace_back(name, item.substr(eq + 1));
      }
    }
    return Status::Ok();
  }
  if (!value.IsMap()) {
    return Invalid(field, "must be a mapping NAME: value, or a list of NAME / NAME=value", value);
  }
  for (const auto& var : value) {
    const std::string name = var.first.Scalar();
    if (!IsEnvName(name)) {
      return Invalid(field, "'" + name + "' is not an environment variable name", var.first);
    }
    std::string text;
    XV_RETURN_IF_ERROR(ReadScalar(var.second, field + "." + name, &text));
    t->env.emplace_back(name, text);
  }
  return Status::Ok();
}

// The fields as given in one trainer's mapping, before the checks that span fields.
struct TrainerFields {
  TrainerConfig trainer;
  std::string kind, output;
  bool has_args = false, has_output = false;
};

Status ReadTrainerFields(const YAML::Node& node, const std::string& path, TrainerFields* f) {
  std::set<std::string> seen;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    const std::string field = path + "." + key;
    if (!seen.insert(key).second) return Invalid(field, "given twice", entry.first);
    const YAML::Node& value = entry.second;
    if (key == "name") {
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &f->trainer.name));
    } else if (key == "kind") {
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &f->kind));
    } else if (key == "program") {
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &f->trainer.program));
    } else if (key == "args") {
      f->has_args = true;
      XV_RETURN_IF_ERROR(ParseArgs(value, field, &f->trainer.args));
    } else if (key == "env") {
      XV_RETURN_IF_ERROR(ParseEnv(value, field, &f->trainer));
    } else if (key == "output") {
      f->has_output = true;
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &f->output));
    } else if (key == "source") {
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &f->trainer.source));
    } else if (key == "prepare") {
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &f->trainer.prepare_dir));
    } else if (key == "sandbox") {
      std::string mode;
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &mode));
      if (mode != "none" && mode != "bubblewrap") {
        return Invalid(field, "must be none or bubblewrap, got '" + mode + "'", value);
      }
      f->trainer.sandbox = mode == "bubblewrap";
    } else if (key == "allow_code_candidates") {
      std::string flag;
      XV_RETURN_IF_ERROR(ReadScalar(value, field, &flag));
      if (flag != "true" && flag != "false") {
        return Invalid(field, "must be true or false, got '" + flag + "'", value);
      }
      f->trainer.allow_code_candidates = flag == "true";
    } else {
      return Invalid(field,
                     "unknown field (a trainer has name, kind, program, args, env, output, "
                     "sandbox, and for autoresearch source, prepare and allow_code_candidates)",
                     entry.first);
    }
  }
  return Status::Ok();
}

// An autoresearch trainer: source required and absolute, prepare absolute when given, program
// /usr/bin/python3 unless given.
Status CheckAutoresearchFields(const std::string& path, const YAML::Node& node, TrainerConfig* t) {
  if (t->source.empty()) {
    return Invalid(path + ".source", "required for an autoresearch trainer (its train.py)", node);
  }
  if (t->source[0] != '/') {
    return Invalid(path + ".source", "must be an absolute path, got '" + t->source + "'", node);
  }
  if (!t->prepare_dir.empty() && t->prepare_dir[0] != '/') {
    return Invalid(path + ".prepare", "must be an absolute path, got '" + t->prepare_dir + "'",
                   node);
  }
  if (t->program.empty()) t->program = "/usr/bin/python3";
  // A code candidate is code from the API: it runs only inside the sandbox (issue 16).
  if (t->allow_code_candidates && !t->sandbox) {
    return Invalid(path + ".allow_code_candidates",
                   "code candidates run only sandboxed: add `sandbox: bubblewrap`", node);
  }
  return Status::Ok();
}

// The kind and what it allows: libtorch takes no args and writes xv-events; command needs a
// program and reads auto (default), xv-events or upstream output.
Status ApplyTrainerKind(const TrainerFields& f, const std::string& path, const YAML::Node& node,
                        TrainerConfig* t) {
  if (f.kind == "libtorch") {
    t->kind = TrainerKind::kLibtorch;
    if (f.has_args) return Invalid(path + ".args", "only command trainers take args", node);
    if (t->sandbox) {
      return Invalid(path + ".sandbox", "only command and autoresearch trainers run sandboxed",
                     node);
    }
    if (!t->source.empty() || !t->prepare_dir.empty()) {
      return Invalid(path + (t->source.empty() ? ".prepare" : ".source"),
                     "only autoresearch trainers take source and prepare", node);
    }
    if (t->allow_code_candidates) {
      return Invalid(path + ".allow_code_candidates",
                     "only autoresearch trainers run code candidates", node);
    }
    if (f.has_output && f.output != "xv-events") {
      return Invalid(path + ".output",
                     "a libtorch trainer writes xv-events, got '" + f.output + "'", node);
    }
    t->output = TrainerOutputFormat::kXvEvents;
    return Status::Ok();
  }
  if (f.kind == "command" || f.kind == "autoresearch") {
    const bool autoresearch = f.kind == "autoresearch";
    t->kind = autoresearch ? TrainerKind::kAutoresearch : TrainerKind::kCommand;
    if (autoresearch) {
      XV_RETURN_IF_ERROR(CheckAutoresearchFields(path, node, t));
    } else if (t->allow_code_candidates) {
      return Invalid(path + ".allow_code_candidates",
                     "only autoresearch trainers run code candidates", node);
    } else if (!t->source.empty() || !t->prepare_dir.empty()) {
      return Invalid(path + (t->source.empty() ? ".prepare" : ".source"),
                     "only autoresearch trainers take source and prepare", node);
    }
    if (t->program.empty()) {
      return Invalid(path + ".program", "required for a command trainer", node);
    }
    if (!f.has_output || f.output == "auto") {
      t->output = TrainerOutputFormat::kAuto;
    } else if (f.output == "xv-events") {
      t->output = TrainerOutputFormat::kXvEvents;
    } else if (f.output == "upstream") {
      t->output = TrainerOutputFormat::kUpstream;
    } else {
      return Invalid(path + ".output",
                     "must be auto, xv-events or upstream, got '" + f.output + "'", node);
    }
    return Status::Ok();
  }
  if (f.kind.empty()) {
    return Invalid(path + ".kind", "required (libtorch, command or autoresearch)", node);
  }
  return Invalid(path + ".kind", "must be libtorch, command or autoresearch, got '" + f.kind + "'",
                 node);
}

Status ParseTrainer(const YAML::Node& node, const std::string& path, TrainerConfig* out) {
  if (!node.IsMap()) return Invalid(path, "must be a mapping (name, kind, program, ...)", node);
  TrainerFields f;
  XV_RETURN_IF_ERROR(ReadTrainerFields(node, path, &f));
  TrainerConfig& t = f.trainer;
  if (t.name.empty()) return Invalid(path + ".name", "required", node);
  if (!IsTrainerName(t.name)) {
    return Invalid(
        path + ".name",
        "'" + t.name + "' is not a trainer name (letters, digits, - _ . only, at most 64)", node);
  }
  XV_RETURN_IF_ERROR(ApplyTrainerKind(f, path, node, &t));
  if (!t.program.empty() && t.program[0] != '/') {
    return Invalid(path + ".program", "must be an absolute path, got '" + t.program + "'", node);
  }
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace

WorkerConfig DefaultWorkerConfig() {
  WorkerConfig c;
  TrainerConfig t;
  t.name = "libtorch";
  c.trainers.push_back(t);
  return c;
}

Status ParseWorkerConfigYaml(const std::string& yaml_text, WorkerConfig* config,
                             const IsWorkerFlagKey& is_flag_key) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("worker config: invalid YAML: " + e.msg + MarkText(e.mark));
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument("worker config: must be a mapping with a 'trainers' list");
  }
  WorkerConfig parsed;
  bool has_trainers = false;
  bool has_flag_keys = false;
  try {
    for (const auto& entry : root) {
      const std::string key = entry.first.Scalar();
      if (key != "trainers" && is_flag_key && is_flag_key(key)) {
        has_flag_keys = true;
        continue;
      }
      if (key != "trainers") {
        return Invalid(key,
                       is_flag_key ? "unknown field (the worker config has 'trainers' and "
                                     "xv-worker's flags without '--': xv-worker --help)"
                                   : "unknown field (the worker config has only 'trainers')",
                       entry.first);
      }
      if (has_trainers) return Invalid(key, "given twice", entry.first);
      has_trainers = true;
      const YAML::Node& list = entry.second;
      if (!list.IsSequence() || list.size() == 0) {
        return Invalid("trainers", "must be a non-empty list", list);
      }
      std::set<std::string> names;
      for (size_t i = 0; i < list.size(); ++i) {
        TrainerConfig t;
        const std::string path = "trainers[" + std::to_string(i) + "]";
        XV_RETURN_IF_ERROR(ParseTrainer(list[i], path, &t));
        if (!names.insert(t.name).second) {
          return Invalid(path + ".name", "'" + t.name + "' is configured twice", list[i]);
        }
        parsed.trainers.push_back(std::move(t));
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("worker config: invalid YAML: " + e.msg + MarkText(e.mark));
  }
  if (!has_trainers && has_flag_keys) parsed = DefaultWorkerConfig();
  if (!has_trainers && !has_flag_keys) return Status::InvalidArgument("trainers: required");
  *config = std::move(parsed);
  return Status::Ok();
}

Status LoadWorkerConfigFile(const std::string& path, WorkerConfig* config,
                            const IsWorkerFlagKey& is_flag_key) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IoError(path + ": cannot open the worker config");
  std::stringstream text;
  text << f.rdbuf();
  return ParseWorkerConfigYaml(text.str(), config, is_flag_key).WithContext(path + ": ");
}

Status CheckWorkerConfigPrograms(const WorkerConfig& config) {
  for (const TrainerConfig& t : config.trainers) {
    if (!IsCommandLike(t.kind)) continue;
    if (::access(t.program.c_str(), X_OK) != 0) {
      return Status::InvalidArgument("trainer '" + t.name + "': program " + t.program +
                                     " is not an executable file");
    }
    if (t.kind == TrainerKind::kAutoresearch && ::access(t.source.c_str(), R_OK) != 0) {
      return Status::InvalidArgument("trainer '" + t.name + "': source " + t.source +
                                     " is not a readable file");
    }
  }
  return Status::Ok();
}

const TrainerConfig* FindTrainer(const WorkerConfig& config, const std::string& name) {
  const std::string wanted = name.empty() ? "libtorch" : name;
  for (const TrainerConfig& t : config.trainers) {
    if (t.name == wanted) return &t;
  }
  return nullptr;
}

const char* TrainerKindName(TrainerKind kind) {
  switch (kind) {
    case TrainerKind::kLibtorch:
      return "libtorch";
    case TrainerKind::kCommand:
      return "command";
    case TrainerKind::kAutoresearch:
      return "autoresearch";
  }
  return "command";
}

const char* TrainerOutputFormatName(TrainerOutputFormat format) {
  switch (format) {
    case TrainerOutputFormat::kXvEvents:
      return "xv-events";
    case TrainerOutputFormat::kUpstream:
      return "upstream";
    case TrainerOutputFormat::kAuto:
      return "auto";
  }
  return "auto";
}

}  // namespace xv::worker
