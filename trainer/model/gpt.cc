#include "trainer/model/gpt.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "trainer/model/attention.h"
#include "trainer/model/block.h"
#include "trainer/model/residual_mix.h"
#include "trainer/model/rotary.h"
#include "trainer/model/softcap_cross_entropy.h"
#include "trainer/model/speed_levers.h"
#include "trainer/torch_compat.h"

namespace xv::trainer {

namespace {

std::vector<Block>& BlocksOf(torch::nn::ModuleList& h, std::vector<Block>* cache) {
  if (cache->empty()) {
    for (size_t i = 0; i < h->size(); ++i) cache->push_back(Block(h->ptr<BlockImpl>(i)));
  }
  return *cache;
}

}  // namespace

GPTImpl::GPTImpl(const GPTConfig& cfg) : cfg_(cfg) {
  xv::Status st = ValidateGPTConfig(cfg);
  TORCH_CHECK(st.ok(), "GPT config: ", st.message());
  window_sizes_ = ComputeWindowSizes(cfg);
  const int64_t head_dim = cfg.n_embd / cfg.n_head;
  const int64_t kv_dim = cfg.n_kv_head * head_dim;
  const int64_t hidden = std::llround(cfg.mlp_ratio * static_cast<double>(cfg.n_embd));

  wte_ = torch::nn::Embedding(cfg.vocab_size, cfg.n_embd);
  h_ = torch::nn::ModuleList();
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    bool ve = cfg.value_embeddings && HasValueEmbedding(i, cfg.n_layer);
    h_->push_back(
        Block(cfg.n_embd, cfg.n_head, cfg.n_kv_head, ve, hidden, cfg.activation, cfg.norm_eps));
  }
  transformer_ = torch::nn::ModuleDict();
  transformer_->update({{"wte", wte_.ptr()}, {"h", h_.ptr()}});
  transformer_ = register_module("transformer", transformer_);
  lm_head_ = register_module(
      "lm_head",
      torch::nn::Linear(torch::nn::LinearOptions(cfg.n_embd, cfg.vocab_size).bias(false)));
  resid_lambdas_ = register_parameter("resid_lambdas", torch::ones({cfg.n_layer}));
  x0_lambdas_ = register_parameter("x0_lambdas", torch::zeros({cfg.n_layer}));
  value_embeds_ = torch::nn::ModuleDict();
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    if (cfg.value_embeddings && HasValueEmbedding(i, cfg.n_layer)) {
      value_embeds_->update(
          {{std::to_string(i), torch::nn::Embedding(cfg.vocab_size, kv_dim).ptr()}});
      ve_layers_.push_back(i);
    }
  }
  value_embeds_ = register_module("value_embeds", value_embeds_);
  BuildRotary();
  chunked_cross_entropy_ = SpeedLeverEnabled(kLeverChunkedCrossEntropy);
}

void GPTImpl::CastEmbeddings(torch::ScalarType dtype) {
  wte_->to(dtype);
  for (int64_t i : ve_layers_) value_embeds_[std::to_string(i)]->to(dtype);
}

void GPTImpl::BuildRotary() {
  const int64_t head_dim = cfg_.n_embd / cfg_.n_head;
  auto tables = PrecomputeRotary(std::max(cfg_.sequence_len * 10, cfg_.rotary_len), head_dim,
                                 cfg_.rope_base, wte_->weight.device());
  cos_ = register_buffer("cos", tables.first);
  sin_ = register_buffer("sin", tables.second);
}

void GPTImpl::InitWeights() {
  torch::NoGradGuard no_grad;
  const double s = std::sqrt(3.0) / std::sqrt(static_cast<double>(cfg_.n_embd));
  torch::nn::init::normal_(wte_->weight, 0.0, 1.0);
  torch::nn::init::normal_(lm_head_->weight, 0.0, 0.001);
  std::vector<Block> cache;
  auto& blocks = BlocksOf(h_, &cache);
  for (auto& block : blocks) {
    torch::nn::init::uniform_(block->attn->c_q->weight, -s, s);
    torch::nn::init::uniform_(block->attn->c_k->weight, -s, s);
    torch::nn::init::uniform_(block->attn->c_v->weight, -s, s);
    torch::nn::init::zeros_(block->attn->c_proj->weight);
    torch::nn::init::uniform_(block->mlp->c_fc->weight, -s, s);
    torch::nn::init::zeros_(block->mlp->c_proj->weight);
  }
  resid_lambdas_.fill_(cfg_.resid_lambda_init);
  x0_lambdas_.fill_(cfg_.x0_lambda_init);
  for (auto& [name, weight] : ValueEmbedParameters()) {
    (void)name;
    torch::nn::init::uniform_(weight, -s, s);
  }
  for (auto& block : blocks) {
    if (!block->attn->ve_gate.is_empty()) torch::nn::init::zeros_(block->attn->ve_gate->weight);
  }
}

torch::Tensor GPTImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets,
                               const std::string& reduction) {
  TORCH_CHECK(idx.dim() == 2, "GPT forward: idx must be [B, T], got ", idx.sizes());
  const int64_t t = idx.size(1);
  TORCH_CHECK(t <= cos_.size(1), "GPT forward: sequence of ", t,
              " tokens exceeds the rotary table (", cos_.size(1), ")");
  torch::Tensor cos = cos_.narrow(1, 0, t);
  torch::Tensor sin = sin_.narrow(1, 0, t);

  torch::Tensor x = compat::RmsNorm(wte_(idx), cfg_.norm_eps);
  torch::Tensor x0 = x;
  std::vector<Block> cache;
  auto& blocks = BlocksOf(h_, &cache);
  size_t next_ve = 0;
  for (int64_t i = 0; i < cfg_.n_layer; ++i) {
    x = ResidualMix(x, x0, resid_lambdas_[i], x0_lambdas_[i]);
    torch::Tensor ve;
    if (next_ve < ve_layers_.size() && ve_layers_[next_ve] == i) {
      ve = value_embeds_[std::to_string(i)]->as<torch::nn::EmbeddingImpl>()->forward(idx);
      ++next_ve;
    }
    x = blocks[i]->forward(x, ve, cos, sin, window_sizes_[i][0], cfg_.attention_backend);
  }
  last_backend_ = blocks[0]->attn->last_backend;
  for (int64_t i = 1; i < cfg_.n_layer; ++i) {  // e.g. "flash+cudnn": windowed and full layers
    const std::string& b = blocks[i]->attn->last_backend;
    if (("+" + last_backend_ + "+").find("+" + b + "+") == std::string::npos) {
      last_backend_ += "+" + b;
    }
  }
  x = compat::RmsNorm(x, cfg_.norm_eps);
  torch::Tensor logits = lm_head_(x);
  if (targets.defined()) {
    torch::Tensor flat = logits.view({-1, logits.size(-1)});
    if (chunked_cross_entropy_)
      return SoftcapCrossEntropy(flat, targets.view({-1}), cfg_.softcap, reduction);
    return SoftcapCrossEntropyPlain(flat, targets.view({-1}), cfg_.softcap, reduction);
  }
  // Upstream's logits.float(): an upcast of bf16/fp16 logits; an fp64 model keeps fp64.
  if (logits.scalar_type() != torch::kDouble) logits = logits.to(torch::kFloat32);
  if (cfg_.softcap > 0) logits = cfg_.softcap * torch::tanh(logits / cfg_.softcap);
  return logits;
}

std::vector<std::pair<std::string, torch::Tensor>> GPTImpl::NamedParameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters(/*recurse=*/true))
    out.emplace_back(item.key(), item.value());
  return out;
}

xv::Status GPTImpl::LoadParameters(const std::map<std::string, torch::Tensor>& tensors,
                                   const std::string& prefix) {
  torch::NoGradGuard no_grad;
  auto params = NamedParameters();
  for (auto& [name, p] : params) {
    auto it = tensors.find(prefix + name);
    if (it == tensors.end())
      return xv::Status::NotFound("parameter " + prefix + name + ": missing");
    if (it->second.sizes() != p.sizes()) {
      std::ostringstream msg;
      msg << "parameter " << prefix << name << ": shape " << it->second.sizes()
          << ", model expects " << p.sizes();
      return xv::Status::InvalidArgument(msg.str());
    }
  }
  for (auto& [name, p] : params) p.copy_(tensors.at(prefix + name).to(p.scalar_type()));
  return xv::Status::Ok();
}

std::vector<std::pair<std::string, torch::Tensor>> GPTImpl::ValueEmbedParameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (int64_t i : ve_layers_) {
    std::string key = std::to_string(i);
    out.emplace_back("value_embeds." + key + ".weight",
                     value_embeds_[key]->as<torch::nn::EmbeddingImpl>()->weight);
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> GPTImpl::BlockParameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : h_->named_parameters(/*recurse=*/true)) {
    out.emplace_back("transformer.h." + item.key(), item.value());
  }
  return out;
}

std::map<std::string, int64_t> GPTImpl::NumScalingParams() const {
  int64_t wte = wte_->weight.numel();
  int64_t ve = 0;
  for (const auto& item : value_embeds_->parameters()) ve += item.numel();
  int64_t lm_head = lm_head_->weight.numel();
  int64_t matrices = 0;
  for (const auto& p : h_->parameters()) matrices += p.numel();
  int64_t scalars = resid_lambdas_.numel() + x0_lambdas_.numel();
  return {{"wte", wte},         {"value_embeds", ve},
          {"lm_head", lm_head}, {"transformer_matrices", matrices},
          {"scalars", scalars}, {"total", wte + ve + lm_head + matrices + scalars}};
}

int64_t GPTImpl::EstimateFlops() const {
  auto counts = NumScalingParams();
  const int64_t nparams_counted =
      counts["total"] - counts["wte"] - counts["value_embeds"] - counts["scalars"];
  const int64_t h = cfg_.n_head;
  const int64_t q = cfg_.n_embd / cfg_.n_head;
  const int64_t t = cfg_.sequence_len;
  int64_t attn = 0;
  for (const auto& w : window_sizes_) {
    const int64_t effective = w[0] < 0 ? t : std::min(w[0], t);
    attn += 12 * h * q * effective;
  }
  return 6 * nparams_counted + attn;
}

std::string GPTImpl::AttentionBackend() const {
  if (!last_backend_.empty()) return last_backend_;
  return ResolveAttentionBackend(cfg_.attention_backend,
                                 torch::empty({0}, wte_->weight.options().dtype(torch::kFloat32)));
}

std::string GPTImpl::PlannedAttentionBackend(torch::ScalarType compute_dtype) const {
  return ResolveAttentionBackend(cfg_.attention_backend,
                                 torch::empty({0}, wte_->weight.options().dtype(compute_dtype)));
}

bool GPTImpl::WindowsHonoured() const { return true; }

}  // namespace xv::trainer
