#include "common/recipe_knobs.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>

#include "common/shortest_double.h"

namespace xv {

namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

RecipeKnob Knob(const char* name, RecipeField field, const char* unit, const char* section,
                const char* doc, double min = 0, double max = 0, bool min_exclusive = false,
                bool max_exclusive = false) {
  RecipeKnob k{name, field, unit, section, doc, 0, 0, false, false, {}};
  k.min = min;
  k.max = max;
  k.min_exclusive = min_exclusive;
  k.max_exclusive = max_exclusive;
  return k;
}

RecipeKnob Choice(const char* name, std::string Recipe::*field, const char* section,
                  const char* doc, std::vector<std::string> choices) {
  RecipeKnob k{name, field, "", section, doc, 0, 0, false, false, {}};
  k.choices = std::move(choices);
  return k;
}

std::vector<RecipeKnob> BuildTable() {
  std::vector<RecipeKnob> t;
  // Model shape.
  t.push_back(Knob("depth", &Recipe::depth, "layers", "model",
                   "Transformer blocks (upstream DEPTH).", 1, 256));
  t.push_back(Knob("aspect_ratio", &Recipe::aspect_ratio, "", "model",
                   "model_dim = depth * aspect_ratio, rounded up to a multiple of head_dim "
                   "(ASPECT_RATIO).",
                   1, 4096));
  t.push_back(Knob("head_dim", &Recipe::head_dim, "channels", "model",
                   "Width of one attention head (HEAD_DIM); even, for the rotary embedding.", 2,
                   1024));
  t.push_back(Knob("n_kv_head", &Recipe::n_kv_head, "heads", "model",
                   "Key/value heads (GQA/MQA); must divide n_head. 0: n_head / kv_head_divisor.", 0,
                   4096));
  t.push_back(Knob("kv_head_divisor", &Recipe::kv_head_divisor, "", "model",
                   "When n_kv_head is 0: n_kv_head = n_head / kv_head_divisor (1 = multi-head).", 1,
                   4096));
  t.push_back(Knob("window_pattern", &Recipe::window_pattern, "", "model",
                   "Attention window per layer, cycled: S = short, L = full sequence; the last "
                   "layer is always L (WINDOW_PATTERN). Letters S and L only (case-insensitive)."));
  t.push_back(Knob("short_window_fraction", &Recipe::short_window_fraction, "", "model",
                   "S window = floor(training sequence length * short_window_fraction) tokens "
                   "(upstream: 1/2).",
                   0, 1, true, false));
  t.push_back(Knob("mlp_ratio", &Recipe::mlp_ratio, "", "model",
                   "MLP hidden width = round(mlp_ratio * model_dim) (upstream: 4).", 0, 64, true,
                   false));
  t.push_back(Choice("activation", &Recipe::activation, "model",
                     "MLP nonlinearity: relu2 = relu(x)^2 (upstream), swiglu = silu(gate) * up.",
                     {"relu2", "swiglu"}));
  t.push_back(Knob("softcap", &Recipe::softcap, "", "model",
                   "Logit soft-cap c in c * tanh(logits / c), computed in fp32; 0 disables it.", 0,
                   10000));
  t.push_back(Knob("x0_lambda_init", &Recipe::x0_lambda_init, "", "model",
                   "Initial value of every x0_lambdas entry (weight of the embedded input mixed "
                   "into each block).",
                   -100, 100));
  t.push_back(Knob("resid_lambda_init", &Recipe::resid_lambda_init, "", "model",
                   "Initial value of every resid_lambdas entry (scale of the residual stream "
                   "entering each block).",
                   -100, 100));
  t.push_back(Knob("rope_base", &Recipe::rope_base, "", "model", "Rotary embedding base (theta).",
                   1, 1e9, true, false));
  t.push_back(Knob("value_embeddings", &Recipe::value_embeddings, "", "model",
                   "Value embeddings with their gated mix on alternating layers (the last "
                   "always), as upstream; false removes them and their gates."));
  t.push_back(Knob("vocab_size", &Recipe::vocab_size, "tokens", "model",
                   "Vocabulary size; must equal the data directory's tokenizer (VOCAB_SIZE).", 2,
                   16777216));
  // Batch and sequence.
  t.push_back(Knob("total_batch_size", &Recipe::total_batch_size, "tokens", "batch",
                   "Tokens per optimizer step (TOTAL_BATCH_SIZE); a multiple of device_batch_size "
                   "* the training sequence length.",
                   1, 1099511627776.0));
  t.push_back(Knob("device_batch_size", &Recipe::device_batch_size, "rows", "batch",
                   "Rows per forward/backward micro-step (DEVICE_BATCH_SIZE); also the eval "
                   "batch.",
                   1, 65536));
  t.push_back(Knob("sequence_len", &Recipe::sequence_len, "tokens", "batch",
                   "Tokens per row, the context length (MAX_SEQ_LEN): of the evaluation rows "
                   "always, of the training rows unless train_sequence_len sets them. A "
                   "campaign pins it with eval_tokens.",
                   1, 1048576));
  t.push_back(Knob("train_sequence_len", &Recipe::train_sequence_len, "tokens", "batch",
                   "Tokens per training row when training at another context than the "
                   "evaluation's (0: sequence_len). The windows derive from it (an L layer "
                   "sees train_sequence_len tokens back, also in evaluation); total_batch_size "
                   "is a multiple of device_batch_size * train_sequence_len. A fork gets it as "
                   "prepare's MAX_SEQ_LEN.",
                   0, 1048576));
  // Optimizer.
  t.push_back(Knob("embedding_lr", &Recipe::embedding_lr, "", "optimizer",
                   "AdamW lr of the token and value embeddings, times (model_dim/768)^-0.5 "
                   "(EMBEDDING_LR).",
                   0, 1e6));
  t.push_back(Knob("unembedding_lr", &Recipe::unembedding_lr, "", "optimizer",
                   "AdamW lr of lm_head, times (model_dim/768)^-0.5 (UNEMBEDDING_LR).", 0, 1e6));
  t.push_back(Knob("matrix_lr", &Recipe::matrix_lr, "", "optimizer",
                   "Muon lr of the block matrices, times sqrt(max(1, rows/cols)) (MATRIX_LR).", 0,
                   1e6));
  t.push_back(Knob("scalar_lr", &Recipe::scalar_lr, "", "optimizer",
                   "AdamW lr of x0_lambdas; resid_lambdas get 0.01 x this (SCALAR_LR).", 0, 1e6));
  t.push_back(Knob("weight_decay", &Recipe::weight_decay, "", "optimizer",
                   "Muon cautious weight decay, scaled by (1 - progress) (WEIGHT_DECAY).", 0,
                   1000));
  t.push_back(Knob("adam_betas", &Recipe::adam_betas, "", "optimizer",
                   "AdamW (beta1, beta2) of the embedding, lm_head and resid_lambdas groups "
                   "(ADAM_BETAS); x0_lambdas keep (0.96, 0.95).",
                   0, 1, false, true));
  t.push_back(Knob("warmup_ratio", &Recipe::warmup_ratio, "", "optimizer",
                   "Fraction of the time budget with a linear lr warmup (WARMUP_RATIO).", 0, 1));
  t.push_back(Knob("warmdown_ratio", &Recipe::warmdown_ratio, "", "optimizer",
                   "Fraction of the time budget, at the end, with a linear lr warmdown "
                   "(WARMDOWN_RATIO); warmup_ratio + warmdown_ratio <= 1.",
                   0, 1));
  t.push_back(Knob("final_lr_frac", &Recipe::final_lr_frac, "", "optimizer",
                   "lr multiplier reached at the end of the warmdown (FINAL_LR_FRAC).", 0, 1));
  t.push_back(Knob("muon_momentum_start", &Recipe::muon_momentum_start, "", "optimizer",
                   "Muon Nesterov momentum at step 0.", 0, 1, false, true));
  t.push_back(Knob("muon_momentum_end", &Recipe::muon_momentum_end, "", "optimizer",
                   "Muon momentum after the ramp.", 0, 1, false, true));
  t.push_back(
      Knob("muon_momentum_warmup_steps", &Recipe::muon_momentum_warmup_steps, "steps", "optimizer",
           "Steps of the linear momentum ramp from start to end (0: end from step 0).", 0, 1e9));
  t.push_back(Knob("muon_ns_steps", &Recipe::muon_ns_steps, "", "optimizer",
                   "Polar-express orthogonalisation iterations (5 coefficient sets exist).", 1, 5));
  t.push_back(Knob("muon_beta2", &Recipe::muon_beta2, "", "optimizer",
                   "NorMuon second-moment decay (variance reduction).", 0, 1, false, true));
  // Run.
  t.push_back(Knob("seed", &Recipe::seed, "", "run",
                   "Random seed of the initialisation (upstream: 42).", 0, 9007199254740992.0));
  t.push_back(Knob("time_budget_s", &Recipe::time_budget_s, "s", "run",
                   "Training time budget; steps 0-10 are not timed (TIME_BUDGET).", 0, 1e6, true,
                   false));
  t.push_back(Knob("eval_tokens", &Recipe::eval_tokens, "tokens", "run",
                   "Validation tokens of the final val_bpb (EVAL_TOKENS); at least one eval batch "
                   "(device_batch_size * sequence_len).",
                   1, 1e12));
  t.push_back(Choice("dtype", &Recipe::dtype, "run",
                     "Autocast compute dtype (master weights stay fp32).",
                     {"bfloat16", "float32", "float16"}));
  t.push_back(Choice("attention_backend", &Recipe::attention_backend, "run",
                     "Attention implementation; auto picks the fastest that honours the windows.",
                     {"auto", "flash", "sdpa", "math"}));
  t.push_back(Choice("device", &Recipe::device, "run",
                     "Where to train; auto = cuda when present, else cpu.",
                     {"auto", "cuda", "cpu"}));
  t.push_back(Knob("threads", &Recipe::threads, "threads", "run",
                   "CPU intra-op threads; 0 = all cores.", 0, 4096));
  return t;
}

template <typename T>
const char* TypeNameOf() {
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t>) return "integer";
  if constexpr (std::is_same_v<T, double>) return "number";
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  if constexpr (std::is_same_v<T, std::string>) return "string";
  if constexpr (std::is_same_v<T, std::array<double, 2>>) return "pair of numbers";
  return "value";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Quote(const std::string& text) {
  constexpr size_t kMax = 60;
  if (text.size() > kMax) return "'" + text.substr(0, kMax) + "...'";
  return "'" + text + "'";
}

// Strict decimal integer: optional sign, digits only.
bool ParseIntegerText(const std::string& text, int64_t* out) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  if (i == text.size()) return false;
  for (size_t j = i; j < text.size(); ++j) {
    if (!std::isdigit(static_cast<unsigned char>(text[j]))) return false;
  }
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = v;
  return true;
}

// Strict decimal floating-point: [+-] digits [. digits] [e [+-] digits], or [+-] . digits [...].
bool ParseNumberText(const std::string& text, double* out) {
  size_t i = 0;
  const size_t n = text.size();
  if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
  size_t digits = 0;
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  if (i < n && text[i] == '.') {
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  if (i != n) return false;
  errno = 0;
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseBoolText(const std::string& text, bool* out) {
  const std::string t = Lower(text);
  if (t == "true" || t == "yes" || t == "on") {
    *out = true;
    return true;
  }
  if (t == "false" || t == "no" || t == "off") {
    *out = false;
    return true;
  }
  return false;
}

std::string FormatBound(double v) {
  if (v == std::floor(v) && std::fabs(v) <= 9007199254740992.0) {
    std::ostringstream os;
    os << static_cast<long long>(v);
    return os.str();
  }
  return ShortestDoubleText(v);
}

std::string NumericRangeText(const RecipeKnob& k) {
  return std::string(k.min_exclusive ? "(" : "[") + FormatBound(k.min) + ", " + FormatBound(k.max) +
         (k.max_exclusive ? ")" : "]");
}

bool InRange(const RecipeKnob& k, double v) {
  if (k.min_exclusive ? !(v > k.min) : !(v >= k.min)) return false;
  if (k.max_exclusive ? !(v < k.max) : !(v <= k.max)) return false;
  return true;
}

std::string ValueText(double v) { return FormatBound(v); }

Status OutOfRange(const RecipeKnob& k, const std::string& value_text) {
  return Status::InvalidArgument(std::string(k.name) + ": must be in " + NumericRangeText(k) +
                                 ", got " + value_text);
}

Status CheckInteger(const RecipeKnob& k, int64_t v) {
  const double lo = k.min, hi = k.max;
  const bool ok =
      (k.min_exclusive ? v > static_cast<int64_t>(lo) : v >= static_cast<int64_t>(lo)) &&
      (k.max_exclusive ? v < static_cast<int64_t>(hi) : v <= static_cast<int64_t>(hi));
  if (!ok) return OutOfRange(k, std::to_string(v));
  return Status::Ok();
}

Status CheckNumber(const RecipeKnob& k, double v, const char* element = nullptr) {
  if (!std::isfinite(v) || !InRange(k, v)) {
    return Status::InvalidArgument(std::string(k.name) + (element ? element : "") +
                                   ": must be in " + NumericRangeText(k) + ", got " +
                                   ShortestDoubleText(v));
  }
  return Status::Ok();
}

Status CheckString(const RecipeKnob& k, const std::string& v) {
  if (!k.choices.empty()) {
    if (std::find(k.choices.begin(), k.choices.end(), v) == k.choices.end()) {
      return Status::InvalidArgument(std::string(k.name) + ": must be one of " +
                                     RecipeKnobRangeText(k) + ", got " + Quote(v));
    }
    return Status::Ok();
  }
  // window_pattern: the only free-form string knob.
  if (v.empty()) {
    return Status::InvalidArgument(std::string(k.name) +
                                   ": must be a non-empty string of S and L letters, got ''");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != 'S' && v[i] != 'L') {
      return Status::InvalidArgument(std::string(k.name) + ": letters must be S or L, got " +
                                     Quote(v) + " (offending '" + std::string(1, v[i]) +
                                     "' at position " + std::to_string(i) + ")");
    }
  }
  return Status::Ok();
}

std::string NormaliseString(const RecipeKnob& k, const std::string& text) {
  if (k.choices.empty()) {  // window_pattern: upper-cased, as upstream's pattern.upper()
    std::string s = text;
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  }
  return Lower(text);
}

std::string DescribeYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return Quote(node.Scalar());
    default:
      return "an undefined value";
  }
}

std::string DescribeJson(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  if (j.is_string()) return "the string " + Quote(j.get<std::string>());
  return j.dump();
}

Status TypeError(const RecipeKnob& k, const std::string& got) {
  return Status::InvalidArgument(
      std::string(k.name) + ": expected " +
      std::visit(
          [](auto member) -> std::string {
            using T = std::remove_reference_t<decltype(std::declval<Recipe&>().*member)>;
            if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t>) return "an integer";
            if constexpr (std::is_same_v<T, double>) return "a number";
            if constexpr (std::is_same_v<T, bool>) return "a boolean (true/false)";
            if constexpr (std::is_same_v<T, std::string>) return "a string";
            return "a pair of numbers like [0.8, 0.95]";
          },
          k.field) +
      ", got " + got);
}

// Stores an integer after checking the knob's range (which also keeps it within int).
template <typename T>
Status StoreInteger(const RecipeKnob& k, T Recipe::*member, int64_t v, Recipe* r) {
  XV_RETURN_IF_ERROR(CheckInteger(k, v));
  if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
    return OutOfRange(k, std::to_string(v));
  }
  r->*member = static_cast<T>(v);
  return Status::Ok();
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string DefaultText(const RecipeKnob& k) {
  static const Recipe kDefaults;
  const nlohmann::json v = RecipeKnobToJson(k, kDefaults);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) return ValueText(v.get<double>());
  if (v.is_array())
    return "[" + ValueText(v[0].get<double>()) + ", " + ValueText(v[1].get<double>()) + "]";
  return v.dump();
}

}  // namespace

const std::vector<RecipeKnob>& RecipeKnobTable() {
  static const std::vector<RecipeKnob> table = BuildTable();
  return table;
}

const RecipeKnob* FindRecipeKnob(const std::string& name) {
  for (const RecipeKnob& k : RecipeKnobTable()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::string ClosestRecipeKnobName(const std::string& name) {
  const std::string needle = Lower(name);
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const RecipeKnob& k : RecipeKnobTable()) {
    const size_t d = EditDistance(needle, k.name);
    if (d < best_distance) {
      best_distance = d;
      best = k.name;
    }
  }
  // A suggestion only when at most about a third of the letters differ, or the name is a prefix.
  const size_t limit = std::max<size_t>(2, needle.size() / 3);
  if (best_distance <= limit) return best;
  for (const RecipeKnob& k : RecipeKnobTable()) {
    const std::string kn = k.name;
    if (needle.size() >= 3 && kn.compare(0, needle.size(), needle) == 0) return kn;
  }
  return "";
}

std::string RecipeKnobTypeName(const RecipeKnob& knob) {
  if (!knob.choices.empty()) return "enum";
  return std::visit(
      [](auto member) -> std::string {
        using T = std::remove_reference_t<decltype(std::declval<Recipe&>().*member)>;
        return TypeNameOf<T>();
      },
      knob.field);
}

std::string RecipeKnobRangeText(const RecipeKnob& knob) {
  if (!knob.choices.empty()) {
    std::string s;
    for (size_t i = 0; i < knob.choices.size(); ++i) s += (i ? ", " : "") + knob.choices[i];
    return s;
  }
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_reference_t<decltype(std::declval<Recipe&>().*member)>;
        if constexpr (std::is_same_v<T, bool>) return "true, false";
        if constexpr (std::is_same_v<T, std::string>) return "S/L letters";
        if constexpr (std::is_same_v<T, std::array<double, 2>>)
          return "each in " + NumericRangeText(knob);
        return NumericRangeText(knob);
      },
      knob.field);
}

Status SetRecipeKnobFromYaml(const RecipeKnob& knob, const YAML::Node& node, Recipe* recipe) {
  // A quoted scalar ("5") carries the non-specific tag "!": it is a string, not a number.
  const bool is_scalar = node.IsScalar();
  const bool quoted = is_scalar && node.Tag() == "!";
  return std::visit(
      [&](auto member) -> Status {
        using T = std::remove_reference_t<decltype(std::declval<Recipe&>().*member)>;
        if constexpr (std::is_same_v<T, std::array<double, 2>>) {
          if (!node.IsSequence() || node.size() != 2) {
            return TypeError(knob, node.IsSequence()
                                       ? "a sequence of " + std::to_string(node.size())
                                       : DescribeYaml(node));
          }
          std::array<double, 2> v{};
          for (size_t i = 0; i < 2; ++i) {
            const YAML::Node e = node[i];
            const std::string element = "[" + std::to_string(i) + "]";
            if (!e.IsScalar() || e.Tag() == "!" || !ParseNumberText(e.Scalar(), &v[i])) {
              return Status::InvalidArgument(std::string(knob.name) + element +
                                             ": expected a number, got " + DescribeYaml(e));
            }
            XV_RETURN_IF_ERROR(CheckNumber(knob, v[i], element.c_str()));
          }
          recipe->*member = v;
          return Status::Ok();
        } else {
          if (!is_scalar) return TypeError(knob, DescribeYaml(node));
          const std::string& text = node.Scalar();
          if constexpr (std::is_same_v<T, std::string>) {
            const std::string v = NormaliseString(knob, text);
            XV_RETURN_IF_ERROR(CheckString(knob, v));
            recipe->*member = v;
            return Status::Ok();
          } else if constexpr (std::is_same_v<T, bool>) {
            bool v = false;
            if (quoted || !ParseBoolText(text, &v)) {
              return TypeError(knob, quoted ? "the string " + Quote(text) : Quote(text));
            }
            recipe->*member = v;
            return Status::Ok();
          } else if constexpr (std::is_same_v<T, double>) {
            double v = 0;
            if (quoted || !ParseNumberText(text, &v)) {
              return TypeError(knob, quoted ? "the string " + Quote(text) : Quote(text));
            }
            XV_RETURN_IF_ERROR(CheckNumber(knob, v));
            recipe->*member = v;
            return Status::Ok();
          } else {
            int64_t v = 0;
            if (quoted || !ParseIntegerText(text, &v)) {
              double as_number = 0;
              if (!quoted && ParseNumberText(text, &as_number) &&
                  as_number == std::floor(as_number) && std::fabs(as_number) < 9.0e15 &&
                  text.find_first_of("eE") != std::string::npos) {
                v = static_cast<int64_t>(as_number);  // 1e6 style: accepted when integral
              } else {
                return TypeError(knob, quoted ? "the string " + Quote(text) : Quote(text));
              }
            }
            return StoreInteger(knob, member, v, recipe);
          }
        }
      },
      knob.field);
}

Status SetRecipeKnobFromJson(const RecipeKnob& knob, const nlohmann::json& value, Recipe* recipe) {
  return std::visit(
      [&](auto member) -> Status {
        using T = std::remove_reference_t<decltype(std::declval<Recipe&>().*member)>;
        if constexpr (std::is_same_v<T, std::array<double, 2>>) {
          if (!value.is_array() || value.size() != 2) return TypeError(knob, DescribeJson(value));
          std::array<double, 2> v{};
          for (size_t i = 0; i < 2; ++i) {
            const std::string element = "[" + std::to_string(i) + "]";
            if (!value[i].is_number()) {
              return Status::InvalidArgument(std::string(knob.name) + element +
                                             ": expected a number, got " + DescribeJson(value[i]));
            }
            v[i] = value[i].get<double>();
            XV_RETURN_IF_ERROR(CheckNumber(knob, v[i], element.c_str()));
          }
          recipe->*member = v;
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!value.is_string()) return TypeError(knob, DescribeJson(value));
          const std::string v = NormaliseString(knob, value.get<std::string>());
          XV_RETURN_IF_ERROR(CheckString(knob, v));
          recipe->*member = v;
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!value.is_boolean()) return TypeError(knob, DescribeJson(value));
          recipe->*member = value.get<bool>();
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!value.is_number()) return TypeError(knob, DescribeJson(value));
          const double v = value.get<double>();
          XV_RETURN_IF_ERROR(CheckNumber(knob, v));
          recipe->*member = v;
          return Status::Ok();
        } else {
          if (value.is_number_unsigned()) {
            const uint64_t u = value.get<uint64_t>();
            if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
              return OutOfRange(knob, std::to_string(u));
            }
            return StoreInteger(knob, member, static_cast<int64_t>(u), recipe);
          }
          if (!value.is_number_integer()) return TypeError(knob, DescribeJson(value));
          return StoreInteger(knob, member, value.get<int64_t>(), recipe);
        }
      },
      knob.field);
}

nlohmann::json RecipeKnobToJson(const RecipeKnob& knob, const Recipe& recipe) {
  return std::visit(
      [&](auto member) -> nlohmann::json {
        using T = std::remove_reference_t<decltype(std::declval<Recipe&>().*member)>;
        if constexpr (std::is_same_v<T, std::array<double, 2>>) {
          return nlohmann::json::array({(recipe.*member)[0], (recipe.*member)[1]});
        } else {
          return nlohmann::json(recipe.*member);
        }
      },
      knob.field);
}

Status CheckRecipeKnobRange(const RecipeKnob& knob, const Recipe& recipe) {
  return std::visit(
      [&](auto member) -> Status {
        using T = std::remove_reference_t<decltype(std::declval<Recipe&>().*member)>;
        const T& v = recipe.*member;
        if constexpr (std::is_same_v<T, std::array<double, 2>>) {
          XV_RETURN_IF_ERROR(CheckNumber(knob, v[0], "[0]"));
          return CheckNumber(knob, v[1], "[1]");
        } else if constexpr (std::is_same_v<T, std::string>) {
          return CheckString(knob, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, double>) {
          return CheckNumber(knob, v);
        } else {
          return CheckInteger(knob, static_cast<int64_t>(v));
        }
      },
      knob.field);
}

std::string RecipeKnobsMarkdown() {
  struct Section {
    const char* key;
    const char* title;
  };
  const Section sections[] = {{"model", "Model shape"},
                              {"batch", "Batch and sequence"},
                              {"optimizer", "Optimizer and schedules"},
                              {"run", "Run"}};
  std::ostringstream md;
  for (const Section& s : sections) {
    md << "### " << s.title << "\n\n";
    md << "| knob | type | default | unit | range | what it does |\n";
    md << "| --- | --- | --- | --- | --- | --- |\n";
    for (const RecipeKnob& k : RecipeKnobTable()) {
      if (std::string(k.section) != s.key) continue;
      md << "| `" << k.name << "` | " << RecipeKnobTypeName(k) << " | `" << DefaultText(k) << "` | "
         << (k.unit[0] ? k.unit : "") << " | " << RecipeKnobRangeText(k) << " | " << k.doc
         << " |\n";
    }
    md << "\n";
  }
  return md.str();
}

}  // namespace xv
