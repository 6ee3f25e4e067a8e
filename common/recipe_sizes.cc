// Derived sizes of a recipe, as upstream train.py computes them: build_model_config (model_dim,
// heads), GPT._compute_window_sizes, the grad-accum division, GPT.num_scaling_params and
// GPT.estimate_flops, generalised to the recipe's extra knobs (GQA, MLP ratio/activation, value
// embeddings on/off, short-window fraction).
#include <algorithm>
#include <cmath>
#include <string>

#include "common/recipe.h"
#include "common/recipe_knobs.h"

namespace xv {

namespace {

constexpr int kValueEmbeddingGateChannels = 32;  // upstream ve_gate_channels
constexpr int64_t kMaxModelDim = 65536;

bool HasValueEmbedding(int layer, int n_layer) { return layer % 2 == (n_layer - 1) % 2; }

}  // namespace

Status ResolveSizes(const Recipe& r, ResolvedSizes* out) {
  // Every knob within its own range first: the arithmetic below relies on it (no overflow, no
  // NaN, bounded layer count), also when the caller skipped ValidateRecipe.
  for (const RecipeKnob& knob : RecipeKnobTable())
    XV_RETURN_IF_ERROR(CheckRecipeKnobRange(knob, r));
  ResolvedSizes s;
  // model_dim = depth * aspect_ratio rounded up to a multiple of head_dim.
  const int64_t base_dim = static_cast<int64_t>(r.depth) * r.aspect_ratio;
  const int64_t model_dim = ((base_dim + r.head_dim - 1) / r.head_dim) * r.head_dim;
  if (model_dim < 1 || model_dim > kMaxModelDim) {
    return Status::InvalidArgument(
        "aspect_ratio: model_dim = depth * aspect_ratio rounded up to head_dim "
        "must be in [1, " +
        std::to_string(kMaxModelDim) + "], got " + std::to_string(model_dim));
  }
  s.model_dim = static_cast<int>(model_dim);
  s.n_head = s.model_dim / r.head_dim;
  // Key/value heads.
  if (r.n_kv_head > 0) {
    if (r.kv_head_divisor != 1) {
      return Status::InvalidArgument(
          "n_kv_head: set either n_kv_head or kv_head_divisor, not both (got " +
          std::to_string(r.n_kv_head) + " and " + std::to_string(r.kv_head_divisor) + ")");
    }
    if (r.n_kv_head > s.n_head || s.n_head % r.n_kv_head != 0) {
      return Status::InvalidArgument("n_kv_head: must divide n_head = " + std::to_string(s.n_head) +
                                     " (model_dim " + std::to_string(s.model_dim) + " / head_dim " +
                                     std::to_string(r.head_dim) + "), got " +
                                     std::to_string(r.n_kv_head));
    }
    s.n_kv_head = r.n_kv_head;
  } else {
    if (r.kv_head_divisor < 1 || s.n_head % r.kv_head_divisor != 0) {
      return Status::InvalidArgument(
          "kv_head_divisor: must divide n_head = " + std::to_string(s.n_head) + ", got " +
          std::to_string(r.kv_head_divisor));
    }
    s.n_kv_head = s.n_head / r.kv_head_divisor;
  }
  // Windows: the pattern cycles over layers; the last layer always sees the full sequence.
  if (r.window_pattern.empty()) {
    return Status::InvalidArgument("window_pattern: must be a non-empty string of S and L letters");
  }
  // Windows derive from the training length, as upstream's GPT derives them from the length it
  // trains at; evaluation rows of sequence_len tokens see the same windows.
  const int train_len = TrainingSequenceLen(r);
  const std::string train_len_name =
      r.train_sequence_len > 0 ? "train_sequence_len" : "sequence_len";
  const int long_window = train_len;
  // Plain floor, as the trainer's window computation does (no rounding tolerance).
  const double short_exact = std::floor(static_cast<double>(train_len) * r.short_window_fraction);
  if (short_exact < 1) {
    return Status::InvalidArgument(
        "short_window_fraction: the short window floor(" + train_len_name +
        " * short_window_fraction) must be >= 1 token, got floor(" + std::to_string(train_len) +
        " * " + std::to_string(r.short_window_fraction) + ") = 0");
  }
  s.short_window = std::min(static_cast<int>(short_exact), long_window);
  s.window_sizes.clear();
  for (int layer = 0; layer < r.depth; ++layer) {
    const char c = r.window_pattern[layer % r.window_pattern.size()];
    if (c != 'S' && c != 'L') {
      return Status::InvalidArgument("window_pattern: letters must be S or L, got '" +
                                     r.window_pattern + "'");
    }
    s.window_sizes.push_back({c == 'S' ? s.short_window : long_window, 0});
  }
  s.window_sizes.back() = {long_window, 0};
  // Batch.
  s.tokens_per_micro_step = static_cast<int64_t>(r.device_batch_size) * train_len;
  if (r.total_batch_size % s.tokens_per_micro_step != 0) {
    return Status::InvalidArgument(
        "total_batch_size: must be a multiple of device_batch_size * " + train_len_name + " = " +
        std::to_string(r.device_batch_size) + " * " + std::to_string(train_len) + " = " +
        std::to_string(s.tokens_per_micro_step) + ", got " + std::to_string(r.total_batch_size));
  }
  const int64_t accum = r.total_batch_size / s.tokens_per_micro_step;
  if (accum < 1) {
    return Status::InvalidArgument(
        "total_batch_size: must be at least device_batch_size * " + train_len_name + " = " +
        std::to_string(s.tokens_per_micro_step) + ", got " + std::to_string(r.total_batch_size));
  }
  if (accum > 1000000) {
    return Status::InvalidArgument("total_batch_size: more than 1000000 micro-steps per step (" +
                                   std::to_string(accum) + ")");
  }
  s.grad_accum_steps = static_cast<int>(accum);
  // MLP width.
  const double hidden = std::round(r.mlp_ratio * s.model_dim);
  if (!(hidden >= 1) || hidden > 64.0 * kMaxModelDim) {
    return Status::InvalidArgument("mlp_ratio: round(mlp_ratio * model_dim) must be >= 1, got " +
                                   std::to_string(hidden));
  }
  s.mlp_hidden_dim = static_cast<int>(hidden);
  if (r.value_embeddings && s.model_dim < kValueEmbeddingGateChannels) {
    return Status::InvalidArgument(
        "value_embeddings: the value-embedding gate reads the first 32 channels, but model_dim "
        "is " +
        std::to_string(s.model_dim) + "; raise aspect_ratio or set value_embeddings: false");
  }
  // num_scaling_params.
  const int64_t d = s.model_dim, V = r.vocab_size, L = r.depth;
  const int64_t kv_dim = static_cast<int64_t>(s.n_kv_head) * r.head_dim;
  const int64_t q_dim = static_cast<int64_t>(s.n_head) * r.head_dim;  // == d
  const int64_t h = s.mlp_hidden_dim;
  const int64_t mlp_in_rows = r.activation == "swiglu" ? 2 * h : h;
  int64_t ve_layers = 0;
  if (r.value_embeddings) {
    for (int layer = 0; layer < r.depth; ++layer) ve_layers += HasValueEmbedding(layer, r.depth);
  }
  const int64_t per_layer = d * q_dim + 2 * d * kv_dim + q_dim * d + mlp_in_rows * d + d * h;
  s.params_wte = V * d;
  s.params_value_embeds = ve_layers * V * kv_dim;
  s.params_lm_head = d * V;
  s.params_transformer_matrices =
      L * per_layer + ve_layers * kValueEmbeddingGateChannels * s.n_kv_head;
  s.params_scalars = 2 * L;
  s.params_total = s.params_wte + s.params_value_embeds + s.params_lm_head +
                   s.params_transformer_matrices + s.params_scalars;
  // estimate_flops: 6 x (params without embeddings and scalars) + 12 * h * q * effective window,
  // per training token (the window capped at the training row).
  int64_t attn_flops = 0;
  for (const auto& w : s.window_sizes) {
    const int64_t effective = std::min<int64_t>(w[0] < 0 ? train_len : w[0], train_len);
    attn_flops += 12 * static_cast<int64_t>(s.n_head) * r.head_dim * effective;
  }
  s.flops_per_token = 6 * (s.params_lm_head + s.params_transformer_matrices) + attn_flops;
  *out = s;
  return Status::Ok();
}

nlohmann::json ResolvedConfigJson(const Recipe& r, const ResolvedSizes& s) {
  nlohmann::json j = RecipeToJson(r);
  // Added after configs were first stored: left out at its neutral value (0: train at
  // sequence_len), so the identity (CanonicalHash) of a config stored before it is unchanged.
  if (r.train_sequence_len == 0) j.erase("train_sequence_len");
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : s.window_sizes) windows.push_back({w[0], w[1]});
  j["derived"] = {
      {"model_dim", s.model_dim},
      {"n_head", s.n_head},
      {"n_kv_head", s.n_kv_head},
      {"short_window", s.short_window},
      {"window_sizes", windows},
      {"mlp_hidden_dim", s.mlp_hidden_dim},
      {"grad_accum_steps", s.grad_accum_steps},
      {"tokens_per_micro_step", s.tokens_per_micro_step},
      {"num_scaling_params",
       {{"wte", s.params_wte},
        {"value_embeds", s.params_value_embeds},
        {"lm_head", s.params_lm_head},
        {"transformer_matrices", s.params_transformer_matrices},
        {"scalars", s.params_scalars},
        {"total", s.params_total}}},
      {"flops_per_token", s.flops_per_token},
  };
  return j;
}

}  // namespace xv
