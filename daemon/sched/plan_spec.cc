#include "daemon/sched/plan_spec.h"

#include <cctype>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "common/recipe.h"
#include "common/recipe_knobs.h"

namespace xv::sched {
namespace {

constexpr int kMaxPhases = 64;
constexpr int kMaxCandidates = 256;
constexpr int kMaxReplicates = 64;

Status Bad(const std::string& path, const std::string& what) {
  return Status::InvalidArgument(path + ": " + what);
}

// Fails on any key of `map` outside `allowed`.
Status CheckKeys(const YAML::Node& map, const std::string& path,
                 const std::set<std::string>& allowed) {
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    if (allowed.count(key) == 0) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Bad(path.empty() ? key : path + "." + key, "unknown key (allowed: " + list + ")");
    }
  }
  return Status::Ok();
}

Status ReadString(const YAML::Node& node, const std::string& path, std::string* out) {
  if (!node.IsScalar()) return Bad(path, "expected a string");
  *out = node.Scalar();
  return Status::Ok();
}

Status ReadInt(const YAML::Node& node, const std::string& path, int lo, int hi, int* out) {
  if (!node.IsScalar()) return Bad(path, "expected an integer");
  try {
    const int v = node.as<int>();
    if (v < lo || v > hi) {
      return Bad(path, "must be " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                           node.Scalar());
    }
    *out = v;
    return Status::Ok();
  } catch (const YAML::Exception&) {
    return Bad(path, "not an integer: '" + node.Scalar() + "'");
  }
}

bool IsPlainName(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

// Checks `key` is a knob and `value` one of its values; *text receives the override text.
// *number receives the value of numeric knobs (for the failure map's order).
Status ReadKnobValue(const std::string& key, const YAML::Node& value, const std::string& path,
                     std::string* text, double* number = nullptr, bool* numeric = nullptr) {
  const RecipeKnob* knob = FindRecipeKnob(key);
  if (knob == nullptr) {
    const std::string close = ClosestRecipeKnobName(key);
    return Bad(path, "unknown knob '" + key + "'" +
                         (close.empty() ? std::string() : " (did you mean " + close + "?)"));
  }
  if (key == "seed") return Bad(path, "seed is not a plan knob (replicates and confirm set seeds)");
  if (!value.IsScalar() && !value.IsSequence()) return Bad(path, "expected a value, got a mapping");
  Recipe scratch;
  XV_RETURN_IF_ERROR(SetRecipeKnobFromYaml(*knob, value, &scratch).WithContext(path + ": "));
  if (value.IsScalar()) {
    *text = value.Scalar();
  } else {
    std::string t = "[";
    for (size_t i = 0; i < value.size(); ++i) t += (i ? ", " : "") + value[i].Scalar();
    *text = t + "]";
  }
  const nlohmann::json j = RecipeKnobToJson(*knob, scratch);
  if (numeric) *numeric = j.is_number();
  if (number && j.is_number()) *number = j.get<double>();
  return Status::Ok();
}

Status ReadOverrideSet(const YAML::Node& node, const std::string& path, PlanOverrides* out) {
  if (!node.IsMap() || node.size() == 0) {
    return Bad(path, "expected a mapping of knob: value (at least one)");
  }
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    std::string text;
    XV_RETURN_IF_ERROR(ReadKnobValue(key, kv.second, path + "." + key, &text));
    out->emplace_back(key, text);
  }
  return Status::Ok();
}

Status ReadPhase(const YAML::Node& node, const std::string& path, int index, PlanPhase* phase) {
  if (!node.IsMap()) return Bad(path, "expected a mapping (name, kind, ...)");
  XV_RETURN_IF_ERROR(CheckKeys(node, path,
                               {"name", "kind", "sweep", "candidates", "seeds", "candidate",
                                "failure_map", "replicates", "stop_if"}));
  phase->name = "phase-" + std::to_string(index + 1);
  if (node["name"]) {
    XV_RETURN_IF_ERROR(ReadString(node["name"], path + ".name", &phase->name));
    if (!IsPlainName(phase->name)) {
      return Bad(path + ".name", "'" + phase->name + "' is not a name (letters, digits, - _ .)");
    }
  }
  if (!node["kind"]) {
    return Bad(path + ".kind", "missing (sweep | candidates | ablation | confirm | failure_map)");
  }
  std::string kind;
  XV_RETURN_IF_ERROR(ReadString(node["kind"], path + ".kind", &kind));
  const std::map<std::string, PlanPhaseKind> kinds = {{"sweep", PlanPhaseKind::kSweep},
                                                      {"candidates", PlanPhaseKind::kCandidates},
                                                      {"ablation", PlanPhaseKind::kAblation},
                                                      {"confirm", PlanPhaseKind::kConfirm},
                                                      {"failure_map", PlanPhaseKind::kFailureMap}};
  auto k = kinds.find(kind);
  if (k == kinds.end()) {
    return Bad(path + ".kind",
               "'" + kind + "' is not sweep, candidates, ablation, confirm or failure_map");
  }
  phase->kind = k->second;
  // Keys that belong to other kinds are mistakes, not options.
  const std::map<std::string, std::set<PlanPhaseKind>> owner = {
      {"sweep", {PlanPhaseKind::kSweep}},
      {"candidates", {PlanPhaseKind::kCandidates}},
      {"seeds", {PlanPhaseKind::kConfirm}},
      {"candidate", {PlanPhaseKind::kConfirm}},
      {"failure_map", {PlanPhaseKind::kFailureMap}}};
  for (const auto& [key, kinds_of_key] : owner) {
    if (node[key] && kinds_of_key.count(phase->kind) == 0) {
      return Bad(path + "." + key, "not a key of a " + kind + " phase");
    }
  }
  if (node["replicates"]) {
    if (phase->kind == PlanPhaseKind::kFailureMap || phase->kind == PlanPhaseKind::kConfirm) {
      return Bad(path + ".replicates",
                 "not a key of a " + kind +
                     " phase (failure_map runs each value once; confirm uses seeds)");
    }
    XV_RETURN_IF_ERROR(
        ReadInt(node["replicates"], path + ".replicates", 1, kMaxReplicates, &phase->replicates));
  }
  if (node["stop_if"]) {
    std::string stop;
    XV_RETURN_IF_ERROR(ReadString(node["stop_if"], path + ".stop_if", &stop));
    if (stop != "no_keep") return Bad(path + ".stop_if", "'" + stop + "' is not no_keep");
    phase->stop_if_no_keep = true;
  }

  switch (phase->kind) {
    case PlanPhaseKind::kSweep: {
      const YAML::Node sweep = node["sweep"];
      if (!sweep || !sweep.IsMap() || sweep.size() == 0) {
        return Bad(path + ".sweep", "expected a mapping knob: [values] (at least one knob)");
      }
      size_t product = 1;
      for (const auto& kv : sweep) {
        const std::string key = kv.first.Scalar();
        const std::string kpath = path + ".sweep." + key;
        if (!kv.second.IsSequence() || kv.second.size() == 0) {
          return Bad(kpath, "expected a list of values (at least one)");
        }
        std::vector<std::string> values;
        std::set<std::string> seen;
        for (size_t i = 0; i < kv.second.size(); ++i) {
          std::string text;
          XV_RETURN_IF_ERROR(
              ReadKnobValue(key, kv.second[i], kpath + "[" + std::to_string(i) + "]", &text));
          if (!seen.insert(text).second) {
            return Bad(kpath + "[" + std::to_string(i) + "]", "value " + text + " repeated");
          }
          values.push_back(text);
        }
        product *= values.size();
        if (product > static_cast<size_t>(kMaxCandidates)) {
          return Bad(path + ".sweep",
                     "more than " + std::to_string(kMaxCandidates) + " candidates");
        }
        phase->sweep.emplace_back(key, std::move(values));
      }
      break;
    }
    case PlanPhaseKind::kCandidates: {
      const YAML::Node cands = node["candidates"];
      if (!cands || !cands.IsSequence() || cands.size() == 0) {
        return Bad(path + ".candidates", "expected a list of override mappings (at least one)");
      }
      if (cands.size() > static_cast<size_t>(kMaxCandidates)) {
        return Bad(path + ".candidates", "more than " + std::to_string(kMaxCandidates));
      }
      for (size_t i = 0; i < cands.size(); ++i) {
        PlanOverrides o;
        XV_RETURN_IF_ERROR(
            ReadOverrideSet(cands[i], path + ".candidates[" + std::to_string(i) + "]", &o));
        phase->candidates.push_back(std::move(o));
      }
      break;
    }
    case PlanPhaseKind::kAblation:
      break;
    case PlanPhaseKind::kConfirm: {
      if (!node["seeds"]) return Bad(path + ".seeds", "missing (how many fresh seeds, 1..64)");
      XV_RETURN_IF_ERROR(ReadInt(node["seeds"], path + ".seeds", 1, kMaxReplicates, &phase->seeds));
      if (node["candidate"]) {
        PlanOverrides o;
        XV_RETURN_IF_ERROR(ReadOverrideSet(node["candidate"], path + ".candidate", &o));
        phase->candidates.push_back(std::move(o));
      }
      break;
    }
    case PlanPhaseKind::kFailureMap: {
      const YAML::Node fm = node["failure_map"];
      const std::string fpath = path + ".failure_map";
      if (!fm || !fm.IsMap()) return Bad(fpath, "expected a mapping {knob, values}");
      XV_RETURN_IF_ERROR(CheckKeys(fm, fpath, {"knob", "values"}));
      if (!fm["knob"]) return Bad(fpath + ".knob", "missing");
      XV_RETURN_IF_ERROR(ReadString(fm["knob"], fpath + ".knob", &phase->failure_knob));
      const YAML::Node values = fm["values"];
      if (!values || !values.IsSequence() || values.size() < 2) {
        return Bad(fpath + ".values", "expected a list of at least 2 values, ascending");
      }
      if (values.size() > static_cast<size_t>(kMaxCandidates)) {
        return Bad(fpath + ".values", "more than " + std::to_string(kMaxCandidates));
      }
      double previous = 0;
      for (size_t i = 0; i < values.size(); ++i) {
        const std::string vpath = fpath + ".values[" + std::to_string(i) + "]";
        std::string text;
        double number = 0;
        bool numeric = false;
        XV_RETURN_IF_ERROR(
            ReadKnobValue(phase->failure_knob, values[i], vpath, &text, &number, &numeric));
        if (!numeric) return Bad(fpath + ".knob", phase->failure_knob + " is not a numeric knob");
        if (i > 0 && !(number > previous)) {
          return Bad(vpath, "not ascending (" + text + " after a value >= it)");
        }
        previous = number;
        phase->failure_values.push_back(text);
      }
      break;
    }
  }
  return Status::Ok();
}

Status ReadCreate(const YAML::Node& node, PlanCreate* create) {
  if (!node.IsMap()) return Bad("create", "expected a mapping (recipe, policy, device_filter)");
  XV_RETURN_IF_ERROR(CheckKeys(node, "create", {"recipe", "policy", "device_filter", "trainer"}));
  if (!node["recipe"]) return Bad("create.recipe", "missing (a recipe file)");
  XV_RETURN_IF_ERROR(ReadString(node["recipe"], "create.recipe", &create->recipe_path));
  if (create->recipe_path.empty()) return Bad("create.recipe", "empty");
  if (node["policy"]) {
    if (node["policy"].IsScalar()) {
      create->policy_path = node["policy"].Scalar();
    } else if (node["policy"].IsMap()) {
      YAML::Emitter em;
      em << node["policy"];
      create->policy_yaml = em.c_str();
    } else {
      return Bad("create.policy", "expected a policy file name or a mapping");
    }
  }
  if (node["device_filter"]) {
    XV_RETURN_IF_ERROR(
        ReadString(node["device_filter"], "create.device_filter", &create->device_filter));
  }
  if (node["trainer"]) {
    XV_RETURN_IF_ERROR(ReadString(node["trainer"], "create.trainer", &create->trainer));
    if (!IsPlainName(create->trainer)) return Bad("create.trainer", "not a trainer name");
  }
  create->set = true;
  return Status::Ok();
}

}  // namespace

const char* PlanPhaseKindName(PlanPhaseKind kind) {
  switch (kind) {
    case PlanPhaseKind::kSweep:
      return "sweep";
    case PlanPhaseKind::kCandidates:
      return "candidates";
    case PlanPhaseKind::kAblation:
      return "ablation";
    case PlanPhaseKind::kConfirm:
      return "confirm";
    case PlanPhaseKind::kFailureMap:
      return "failure_map";
  }
  return "?";
}

Status ParsePlanYaml(const std::string& yaml_text, PlanSpec* out) {
  if (yaml_text.size() > 256 * 1024) return Bad("plan", "larger than 256 KiB");
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("plan: YAML: " + e.msg + " (line " +
                                   std::to_string(e.mark.line + 1) + ", column " +
                                   std::to_string(e.mark.column + 1) + ")");
  }
  if (!root.IsMap()) return Bad("plan", "expected a mapping (name, campaign, phases)");
  PlanSpec spec;
  try {
    XV_RETURN_IF_ERROR(CheckKeys(root, "", {"name", "campaign", "create", "phases"}));
    if (!root["name"]) return Bad("name", "missing");
    XV_RETURN_IF_ERROR(ReadString(root["name"], "name", &spec.name));
    if (!IsPlainName(spec.name)) {
      return Bad("name", "'" + spec.name + "' is not a name (letters, digits, - _ ., <= 100)");
    }
    if (!root["campaign"]) return Bad("campaign", "missing");
    XV_RETURN_IF_ERROR(ReadString(root["campaign"], "campaign", &spec.campaign));
    if (spec.campaign.empty() || spec.campaign.size() > 200) {
      return Bad("campaign", "must be 1..200 characters");
    }
    if (root["create"]) XV_RETURN_IF_ERROR(ReadCreate(root["create"], &spec.create));
    const YAML::Node phases = root["phases"];
    if (!phases || !phases.IsSequence() || phases.size() == 0) {
      return Bad("phases", "expected a list of phases (at least one)");
    }
    if (phases.size() > static_cast<size_t>(kMaxPhases)) {
      return Bad("phases", "more than " + std::to_string(kMaxPhases));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < phases.size(); ++i) {
      const std::string path = "phases[" + std::to_string(i) + "]";
      PlanPhase phase;
      XV_RETURN_IF_ERROR(ReadPhase(phases[i], path, static_cast<int>(i), &phase));
      if (!names.insert(phase.name).second) {
        return Bad(path + ".name", "'" + phase.name + "' repeated");
      }
      spec.phases.push_back(std::move(phase));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("plan: YAML: " + e.msg);
  }
  *out = std::move(spec);
  return Status::Ok();
}

std::vector<PlanOverrides> ExpandPhaseCandidates(const PlanPhase& phase) {
  std::vector<PlanOverrides> out;
  switch (phase.kind) {
    case PlanPhaseKind::kSweep: {
      out.emplace_back();
      for (const auto& [knob, values] : phase.sweep) {
        std::vector<PlanOverrides> next;
        for (const auto& partial : out) {
          for (const auto& v : values) {
            PlanOverrides o = partial;
            o.emplace_back(knob, v);
            next.push_back(std::move(o));
          }
        }
        out = std::move(next);
      }
      return out;
    }
    case PlanPhaseKind::kCandidates:
    case PlanPhaseKind::kConfirm:
      return phase.candidates;
    case PlanPhaseKind::kFailureMap:
      for (const auto& v : phase.failure_values) out.push_back({{phase.failure_knob, v}});
      return out;
    case PlanPhaseKind::kAblation:
      return out;
  }
  return out;
}

std::string JoinPlanOverrides(const PlanOverrides& overrides) {
  std::string s;
  for (const auto& [k, v] : overrides) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

}  // namespace xv::sched
