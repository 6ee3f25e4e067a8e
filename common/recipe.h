// Recipe: every knob of an xv-train run, parsed from YAML, validated with field paths, resolved
// into the derived sizes the trainer and the scheduler need, and hashed canonically.
//
// Contract (used by the daemon at submit time, by xvctl, and by xv-train at start):
//  - ParseRecipeYaml rejects unknown keys, wrong types, out-of-range values and impossible
//    combinations with a Status whose message starts with the field path ("matrix_lr: must be
//    in [0, 1000000], got -1.0"); errors from YAML end with "(line N, column M)".
//  - ApplyOverride takes "key" + YAML scalar text ("0.03", "[0.8, 0.95]", "SSSL") and validates
//    the whole recipe again.
//  - ResolveSizes computes the derived sizes (model_dim, n_head, n_kv_head, window sizes,
//    grad-accum steps, parameter counts, FLOPs per token) exactly as upstream train.py does.
//  - CanonicalJson is JSON with sorted keys and shortest round-trip numbers; CanonicalHash is the
//    hex SHA-256 of the resolved config in that form. Equal hashes mean identical runs (seed
//    included).
//  - The knob table (common/recipe_knobs.h) is the single source of truth for names, types,
//    defaults, units, ranges and docs; docs/recipe.md is written from it.
// Model-shape conventions the trainer follows and the parameter counts assume:
//  - MLP hidden width = round(mlp_ratio * model_dim). relu2: c_fc [hidden, d], c_proj [d, hidden].
//    swiglu: c_fc [2*hidden, d] (gate rows first, then up rows), c_proj [d, hidden].
//  - value_embeddings: layers i with i % 2 == (depth - 1) % 2 (the last always) get an embedding
//    [vocab, n_kv_head*head_dim] and a gate ve_gate [n_kv_head, 32] (needs model_dim >= 32).
//  - softcap 0 disables the soft-cap.
// Thread-safety: plain values; no shared state.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace xv {

struct Recipe {
  // Model shape.
  int depth = 8;          // transformer layers
  int aspect_ratio = 64;  // model_dim = depth * aspect_ratio, rounded up to head_dim
  int head_dim = 128;
  int n_kv_head = 0;                    // 0: derived from kv_head_divisor
  int kv_head_divisor = 1;              // n_kv_head = n_head / kv_head_divisor (1 = MHA)
  std::string window_pattern = "SSSL";  // S = short window, L = full; last layer always L
  double short_window_fraction = 0.5;
  double mlp_ratio = 4.0;
  std::string activation = "relu2";  // relu2 | swiglu
  double softcap = 15.0;
  double x0_lambda_init = 0.1;
  double resid_lambda_init = 1.0;
  double rope_base = 10000.0;
  bool value_embeddings = true;
  int vocab_size = 8192;
  // Batch and sequence.
  int64_t total_batch_size = 1 << 19;  // tokens per optimizer step
  int device_batch_size = 128;         // rows per micro-step
  int sequence_len = 2048;             // context of the evaluation rows (and of training when
                                       // train_sequence_len is 0); a campaign pins it
  int train_sequence_len = 0;          // context of the training rows; 0: sequence_len
  // Optimizer.
  double embedding_lr = 0.6;
  double unembedding_lr = 0.004;
  double matrix_lr = 0.04;
  double scalar_lr = 0.5;
  double weight_decay = 0.2;
  std::array<double, 2> adam_betas = {0.8, 0.95};
  double warmup_ratio = 0.0;
  double warmdown_ratio = 0.5;
  double final_lr_frac = 0.0;
  double muon_momentum_start = 0.85;
  double muon_momentum_end = 0.95;
  int muon_momentum_warmup_steps = 300;
  int muon_ns_steps = 5;
  double muon_beta2 = 0.95;
  // Run.
  int64_t seed = 42;
  double time_budget_s = 300.0;
  int64_t eval_tokens = 40 * 524288;
  std::string dtype = "bfloat16";          // bfloat16 | float32 | float16 (autocast dtype)
  std::string attention_backend = "auto";  // auto | flash | sdpa | math
  std::string device = "auto";             // auto | cuda | cpu
  int threads = 0;                         // CPU intra-op threads; 0 = all cores
};

// The derived sizes of a recipe (upstream train.py's names where it has them).
struct ResolvedSizes {
  int model_dim = 0;
  int n_head = 0;
  int n_kv_head = 0;
  std::vector<std::array<int, 2>> window_sizes;  // per layer (left, right), flash convention
  int short_window = 0;    // floor(TrainingSequenceLen * short_window_fraction); >= 1 or invalid
  int mlp_hidden_dim = 0;  // round(mlp_ratio * model_dim)
  int grad_accum_steps = 0;
  int64_t tokens_per_micro_step = 0;
  // num_scaling_params breakdown, as upstream's estimate (manifest.json derived_sizes).
  int64_t params_wte = 0, params_value_embeds = 0, params_lm_head = 0,
          params_transformer_matrices = 0, params_scalars = 0, params_total = 0;
  int64_t flops_per_token = 0;
};

// The context length of the training rows: train_sequence_len, or sequence_len when that is 0.
// The model's windows derive from it (upstream's GPT derives them from the length it trains at);
// the evaluation rows always have sequence_len tokens.
inline int TrainingSequenceLen(const Recipe& r) {
  return r.train_sequence_len > 0 ? r.train_sequence_len : r.sequence_len;
}

// Parses a recipe from YAML text. Missing keys take their defaults (the struct above).
Status ParseRecipeYaml(const std::string& yaml_text, Recipe* out);
// Parses the JSON form written by RecipeToJson (for specs sent to the trainer). A "derived" member
// (as written by ResolvedConfigJson) is accepted and ignored: the sizes are always recomputed.
Status ParseRecipeJson(const nlohmann::json& j, Recipe* out);
// Sets one knob from YAML scalar text and revalidates the whole recipe. On error *recipe is
// unchanged. To change knobs that must move together (device_batch_size with total_batch_size,
// n_kv_head with kv_head_divisor), use ApplyOverrides: each single step may be invalid on its own.
Status ApplyOverride(const std::string& key, const std::string& value_text, Recipe* recipe);
// Sets every (key, YAML value text) pair, then validates the whole recipe once, so the result does
// not depend on the order. A knob named twice is an error. On error *recipe is unchanged.
Status ApplyOverrides(const std::vector<std::pair<std::string, std::string>>& overrides,
                      Recipe* recipe);
// Validates ranges and combinations; the message names the field.
Status ValidateRecipe(const Recipe& r);
// Fills the derived sizes; fails (naming the field) for impossible combinations.
Status ResolveSizes(const Recipe& r, ResolvedSizes* out);
// Checks the recipe against the data directory it will train on (vocab_size must equal the
// tokenizer's vocabulary size); the message names vocab_size.
Status CheckRecipeAgainstData(const Recipe& r, int data_vocab_size);
// All knobs as a JSON object (every field, defaults included).
nlohmann::json RecipeToJson(const Recipe& r);
// Knobs + derived sizes, the form printed by the trainer and sent as its first event: every knob
// at the top level (as RecipeToJson) plus "derived": {model_dim, n_head, n_kv_head, short_window,
// window_sizes: [[left, right], ...], mlp_hidden_dim, grad_accum_steps, tokens_per_micro_step,
// num_scaling_params: {wte, value_embeds, lm_head, transformer_matrices, scalars, total},
// flops_per_token}. train_sequence_len is left out when 0 (it was added after configs were first
// stored; leaving it out keeps their CanonicalHash).
nlohmann::json ResolvedConfigJson(const Recipe& r, const ResolvedSizes& s);
// Compact JSON with object keys sorted, integers as integers and floating-point numbers in the
// shortest text that reads back to the same double (0.1 -> "0.1", 15.0 -> "15.0"). Non-finite
// numbers are written as null.
std::string CanonicalJson(const nlohmann::json& j);
// Hex SHA-256 of CanonicalJson(ResolvedConfigJson(r, sizes)); when the sizes cannot be resolved
// (an invalid recipe) it hashes CanonicalJson(RecipeToJson(r)) instead.
std::string CanonicalHash(const Recipe& r);
// Names of every knob, for --help, validation of overrides and docs.
const std::vector<std::string>& RecipeKnobNames();

}  // namespace xv
