// GPTConfig construction (from a recipe or a reference case), validation and window sizes.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "trainer/model/block.h"
#include "trainer/model/gpt.h"

namespace xv::trainer {

GPTConfig GPTConfigFromRecipe(const xv::Recipe& recipe, const xv::ResolvedSizes& sizes) {
  GPTConfig cfg;
  cfg.sequence_len = xv::TrainingSequenceLen(recipe);
  cfg.rotary_len = 10 * std::max<int64_t>(cfg.sequence_len, recipe.sequence_len);
  cfg.vocab_size = recipe.vocab_size;
  cfg.n_layer = recipe.depth;
  cfg.n_head = sizes.n_head;
  cfg.n_kv_head = sizes.n_kv_head;
  cfg.n_embd = sizes.model_dim;
  cfg.window_pattern = recipe.window_pattern;
  cfg.short_window_fraction = recipe.short_window_fraction;
  cfg.mlp_ratio = recipe.mlp_ratio;
  cfg.activation = recipe.activation;
  cfg.softcap = recipe.softcap;
  cfg.x0_lambda_init = recipe.x0_lambda_init;
  cfg.resid_lambda_init = recipe.resid_lambda_init;
  cfg.rope_base = recipe.rope_base;
  cfg.value_embeddings = recipe.value_embeddings;
  cfg.attention_backend = recipe.attention_backend;
  return cfg;
}

GPTConfig GPTConfigFromJson(const nlohmann::json& config) {
  GPTConfig cfg;
  auto take = [&config](const char* key, auto* field) {
    auto it = config.find(key);
    if (it != config.end()) *field = it->template get<std::decay_t<decltype(*field)>>();
  };
  take("sequence_len", &cfg.sequence_len);
  take("vocab_size", &cfg.vocab_size);
  take("n_layer", &cfg.n_layer);
  take("n_head", &cfg.n_head);
  take("n_kv_head", &cfg.n_kv_head);
  take("n_embd", &cfg.n_embd);
  take("window_pattern", &cfg.window_pattern);
  take("short_window_fraction", &cfg.short_window_fraction);
  take("mlp_ratio", &cfg.mlp_ratio);
  take("activation", &cfg.activation);
  take("softcap", &cfg.softcap);
  take("x0_lambda_init", &cfg.x0_lambda_init);
  take("resid_lambda_init", &cfg.resid_lambda_init);
  take("rope_base", &cfg.rope_base);
  take("value_embeddings", &cfg.value_embeddings);
  take("attention_backend", &cfg.attention_backend);
  return cfg;
}

xv::Status ValidateGPTConfig(const GPTConfig& cfg) {
  auto bad = [](const std::string& field, const std::string& what) {
    return xv::Status::InvalidArgument(field + ": " + what);
  };
  if (cfg.sequence_len < 1) return bad("sequence_len", "must be >= 1");
  if (cfg.vocab_size < 1) return bad("vocab_size", "must be >= 1");
  if (cfg.n_layer < 1) return bad("n_layer", "must be >= 1");
  if (cfg.n_head < 1) return bad("n_head", "must be >= 1");
  if (cfg.n_embd < 1 || cfg.n_embd % cfg.n_head != 0) {
    return bad("n_embd", "must be a positive multiple of n_head (" + std::to_string(cfg.n_head) +
                             "), got " + std::to_string(cfg.n_embd));
  }
  if ((cfg.n_embd / cfg.n_head) % 2 != 0) {
    return bad("n_embd", "head_dim = n_embd / n_head must be even for rotary embeddings, got " +
                             std::to_string(cfg.n_embd / cfg.n_head));
  }
  if (cfg.n_kv_head < 1 || cfg.n_kv_head > cfg.n_head || cfg.n_head % cfg.n_kv_head != 0) {
    return bad("n_kv_head", "must divide n_head (" + std::to_string(cfg.n_head) + "), got " +
                                std::to_string(cfg.n_kv_head));
  }
  if (cfg.value_embeddings && cfg.n_embd < kValueGateChannels) {
    return bad("n_embd", "must be >= " + std::to_string(kValueGateChannels) +
                             " when value_embeddings is on (the gate reads that many channels)");
  }
  if (cfg.window_pattern.empty()) return bad("window_pattern", "must not be empty");
  for (size_t i = 0; i < cfg.window_pattern.size(); ++i) {
    char c = static_cast<char>(std::toupper(static_cast<unsigned char>(cfg.window_pattern[i])));
    if (c != 'S' && c != 'L') {
      return bad("window_pattern", "letter " + std::to_string(i) + " is '" +
                                       std::string(1, cfg.window_pattern[i]) +
                                       "'; only S and L are allowed");
    }
  }
  if (!(cfg.short_window_fraction > 0 && cfg.short_window_fraction <= 1)) {
    return bad("short_window_fraction", "must be in (0, 1]");
  }
  if (!(cfg.mlp_ratio > 0) || std::llround(cfg.mlp_ratio * cfg.n_embd) < 1) {
    return bad("mlp_ratio", "must give a hidden width >= 1");
  }
  if (cfg.activation != "relu2" && cfg.activation != "swiglu") {
    return bad("activation", "expected relu2|swiglu, got '" + cfg.activation + "'");
  }
  if (!(cfg.rope_base > 1)) return bad("rope_base", "must be > 1");
  if (!std::isfinite(cfg.softcap)) return bad("softcap", "must be finite");
  const std::string& b = cfg.attention_backend;
  if (b != "auto" && b != "flash" && b != "sdpa" && b != "math") {
    return bad("attention_backend", "expected auto|flash|sdpa|math, got '" + b + "'");
  }
  return xv::Status::Ok();
}

std::vector<std::array<int64_t, 2>> ComputeWindowSizes(const GPTConfig& cfg) {
  const int64_t long_window = cfg.sequence_len;
  const auto short_window = static_cast<int64_t>(
      std::floor(static_cast<double>(long_window) * cfg.short_window_fraction));
  std::vector<std::array<int64_t, 2>> sizes;
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    char c = static_cast<char>(std::toupper(
        static_cast<unsigned char>(cfg.window_pattern[i % cfg.window_pattern.size()])));
    sizes.push_back({c == 'L' ? long_window : short_window, 0});
  }
  if (!sizes.empty()) sizes.back() = {long_window, 0};
  return sizes;
}

}  // namespace xv::trainer
