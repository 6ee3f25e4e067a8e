#include "trainer/optim/muon_adamw.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "trainer/torch_compat.h"

namespace xv::trainer {

namespace {

// Upstream's polar-express coefficients (a, b, c) per iteration.
constexpr double kPolarExpressCoeffs[5][3] = {
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323},
};

// Rounds a scalar to bfloat16 and back, as upstream's `scalar_t.to(g.dtype)` does for bf16 g.
double RoundToBFloat16(double v) {
  return static_cast<double>(static_cast<float>(c10::BFloat16(static_cast<float>(v))));
}

// Rounds a scalar to fp32, as upstream's 0-dim fp32 hyperparameter tensors (`momentum_t.fill_(m)`)
// hold it.
double RoundToFloat32(double v) { return static_cast<double>(static_cast<float>(v)); }

}  // namespace

// bf16 arithmetic as recent ATen and cuBLAS do it: each operation computes in fp32 (products of
// bf16 values are exact there, scalars stay fp32) and rounds its result to bf16 once. Debian's CPU
// LibTorch 1.13 rounds Python-style scalars to bf16 first (8.1566 -> 8.125) and accumulates bf16
// matrix products in bf16, which moves the 5-step orthogonalisation by ~10%; on the CPU the
// operations therefore run explicitly in fp32 and are rounded. Other devices, and the CPU from
// LibTorch 2.11 on (the reference cases' own PyTorch), use ATen directly: its bf16 GEMM is the
// reference's, so a teacher-forced Muon step repeats the reference exactly there, while an fp32
// GEMM rounded once sums in another order and flips a few bf16 roundings (upstream's own code with
// that GEMM lands 1.3e-4 and 2.0e-3 from the reference's step-1 matrices; on CUDA 3.0e-3, 1.9e-3).
static bool EmulateBf16(const torch::Tensor& t) {
#if XV_TORCH_AT_LEAST(2, 11)
  (void)t;
  return false;
#else
  return t.scalar_type() == torch::kBFloat16 && t.device().is_cpu();
#endif
}

static torch::Tensor Matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (EmulateBf16(a)) {
    return torch::matmul(a.to(torch::kFloat32), b.to(torch::kFloat32)).to(torch::kBFloat16);
  }
  return torch::matmul(a, b);
}

static torch::Tensor Scale(const torch::Tensor& t, double s) {
  if (EmulateBf16(t)) return (t.to(torch::kFloat32) * s).to(torch::kBFloat16);
  return t * s;
}

static torch::Tensor AddScalar(const torch::Tensor& t, double s) {
  if (EmulateBf16(t)) return (t.to(torch::kFloat32) + s).to(torch::kBFloat16);
  return t + s;
}

torch::Tensor PolarExpress(const torch::Tensor& g, int steps, bool bf16) {
  TORCH_CHECK(g.dim() >= 2, "PolarExpress: expected a matrix or a stack of matrices, got ",
              g.sizes());
  TORCH_CHECK(steps >= 0 && steps <= 5, "PolarExpress: steps must be in [0, 5], got ", steps);
  torch::Tensor x = bf16 ? g.to(torch::kBFloat16) : g.to(torch::kFloat32);
  // The Frobenius norm accumulates in fp32 and is rounded to x's dtype (ATen's reduction).
  torch::Tensor norm =
      x.to(torch::kFloat32).norm(2, {-2, -1}, /*keepdim=*/true).to(x.scalar_type());
  x = x / AddScalar(Scale(norm, 1.02), 1e-6);
  const bool tall = g.size(-2) > g.size(-1);
  for (int i = 0; i < steps; ++i) {
    const double a = kPolarExpressCoeffs[i][0], b = kPolarExpressCoeffs[i][1],
                 c = kPolarExpressCoeffs[i][2];
    if (tall) {
      torch::Tensor A = Matmul(x.transpose(-2, -1), x);
      torch::Tensor B = Scale(A, b) + Scale(Matmul(A, A), c);
      x = Scale(x, a) + Matmul(x, B);
    } else {
      torch::Tensor A = Matmul(x, x.transpose(-2, -1));
      torch::Tensor B = Scale(A, b) + Scale(Matmul(A, A), c);
      x = Scale(x, a) + Matmul(B, x);
    }
  }
  return x;
}

MuonAdamWOptions MuonAdamWOptionsFromJson(const nlohmann::json& kwargs) {
  MuonAdamWOptions o;
  auto take = [&kwargs](const char* key, auto* field) {
    auto it = kwargs.find(key);
    if (it != kwargs.end()) *field = it->template get<std::decay_t<decltype(*field)>>();
  };
  take("unembedding_lr", &o.unembedding_lr);
  take("embedding_lr", &o.embedding_lr);
  take("matrix_lr", &o.matrix_lr);
  take("weight_decay", &o.weight_decay);
  take("scalar_lr", &o.scalar_lr);
  take("adam_betas", &o.adam_betas);
  take("ns_steps", &o.ns_steps);
  take("beta2", &o.beta2);
  take("momentum", &o.momentum);
  return o;
}

MuonAdamW::MuonAdamW(GPT& model, const MuonAdamWOptions& opts) {
  const double dmodel_lr_scale =
      std::pow(static_cast<double>(model->config().n_embd) / 768.0, -0.5);
  auto adamw = [&](std::vector<std::pair<std::string, torch::Tensor>> params, double lr,
                   std::array<double, 2> betas) {
    Group g;
    g.kind = "adamw";
    for (auto& [name, p] : params) {
      g.names.push_back(name);
      g.params.push_back(p);
    }
    g.lr = g.initial_lr = lr;
    g.betas = betas;
    g.eps = 1e-10;
    g.weight_decay = g.initial_weight_decay = 0.0;
    g.adam_steps.assign(g.params.size(), 0);
    g.exp_avg.resize(g.params.size());
    g.exp_avg_sq.resize(g.params.size());
    groups_.push_back(std::move(g));
  };
  adamw({{"lm_head.weight", model->lm_head_weight()}}, opts.unembedding_lr * dmodel_lr_scale,
        opts.adam_betas);
  adamw({{"transformer.wte.weight", model->wte_weight()}}, opts.embedding_lr * dmodel_lr_scale,
        opts.adam_betas);
  adamw(model->ValueEmbedParameters(), opts.embedding_lr * dmodel_lr_scale, opts.adam_betas);
  adamw({{"resid_lambdas", model->resid_lambdas()}}, opts.scalar_lr * 0.01, opts.adam_betas);
  adamw({{"x0_lambdas", model->x0_lambdas()}}, opts.scalar_lr, {0.96, 0.95});

  // Muon: one group per distinct shape, shapes in sorted (lexicographic) order.
  std::map<std::vector<int64_t>, Group> by_shape;
  for (auto& [name, p] : model->BlockParameters()) {
    std::vector<int64_t> shape(p.sizes().begin(), p.sizes().end());
    Group& g = by_shape[shape];
    g.kind = "muon";
    g.names.push_back(name);
    g.params.push_back(p);
  }
  for (auto& [shape, g] : by_shape) {
    (void)shape;
    g.lr = g.initial_lr = opts.matrix_lr;
    g.momentum = opts.momentum;
    g.ns_steps = opts.ns_steps;
    g.beta2 = opts.beta2;
    g.weight_decay = g.initial_weight_decay = opts.weight_decay;
    groups_.push_back(std::move(g));
  }
}

void MuonAdamW::StepAdamW(Group& g) {
  for (size_t i = 0; i < g.params.size(); ++i) {
    torch::Tensor& p = g.params[i];
    torch::Tensor grad = p.grad();
    if (!grad.defined()) continue;
    if (!g.exp_avg[i].defined()) {
      g.exp_avg[i] = torch::zeros_like(p);
      g.exp_avg_sq[i] = torch::zeros_like(p);
    }
    const int64_t step = ++g.adam_steps[i];
    const double beta1 = g.betas[0], beta2 = g.betas[1];
    p.mul_(1.0 - g.lr * g.weight_decay);
    g.exp_avg[i].lerp_(grad, 1.0 - beta1);
    g.exp_avg_sq[i].lerp_(grad.square(), 1.0 - beta2);
    const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    torch::Tensor denom = (g.exp_avg_sq[i] / bias2).sqrt() + g.eps;
    p.add_(g.exp_avg[i] / denom, -(g.lr / bias1));
  }
}

void MuonAdamW::StepMuon(Group& g) {
  if (g.params.empty()) return;
  bool any_grad = false;
  for (auto& p : g.params) any_grad = any_grad || p.grad().defined();
  if (!any_grad) return;
  const torch::Tensor& p0 = g.params[0];
  const int64_t n = static_cast<int64_t>(g.params.size());
  const int64_t rows = p0.size(-2), cols = p0.size(-1);
  if (!g.momentum_buffer.defined()) {
    g.momentum_buffer = torch::zeros({n, rows, cols}, p0.options());
    g.second_momentum_buffer = rows >= cols ? torch::zeros({n, rows, 1}, p0.options())
                                            : torch::zeros({n, 1, cols}, p0.options());
  }
  const int64_t red_dim = rows >= cols ? -1 : -2;
  std::vector<torch::Tensor> grads;
  for (auto& p : g.params) grads.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  torch::Tensor stacked_grads = torch::stack(grads);
  torch::Tensor stacked_params = torch::stack(g.params);

  // Nesterov momentum (in the parameters' dtype). Upstream's momentum is a 0-dim fp32 tensor, so
  // its `1 - momentum` is an fp32 subtraction (1 - 0.95f = 0.05000001f, not 0.05f): the ~2e-7
  // difference of the weight flips bf16 roundings of the orthogonalisation's input, which polar
  // express spreads into ~5e-3 differences of the step's matrices.
  const double momentum = RoundToFloat32(g.momentum);
  const double one_minus_momentum = static_cast<float>(1.0f - static_cast<float>(momentum));
  g.momentum_buffer.lerp_(stacked_grads, one_minus_momentum);
  torch::Tensor grad = stacked_grads.lerp_(g.momentum_buffer, momentum);
  // Polar-express orthogonalisation in bf16.
  torch::Tensor x = PolarExpress(grad, g.ns_steps, /*bf16=*/true);
  // NorMuon variance reduction. Scalars meet x's dtype (bf16) as upstream's `.to(g.dtype)`.
  const double beta2 = RoundToBFloat16(g.beta2);
  torch::Tensor v_mean = x.to(torch::kFloat32).square().mean(red_dim, /*keepdim=*/true);
  const int64_t red_dim_size = x.size(red_dim);
  torch::Tensor v_norm = (v_mean.sum({-2, -1}, /*keepdim=*/true) * red_dim_size).sqrt();
  g.second_momentum_buffer.lerp_(v_mean.to(g.second_momentum_buffer.scalar_type()),
                                 RoundToBFloat16(1.0 - beta2));
  torch::Tensor step_size = g.second_momentum_buffer.clamp_min(1e-10).rsqrt();
  torch::Tensor scaled_sq_sum = (v_mean * red_dim_size) * step_size.to(torch::kFloat32).square();
  torch::Tensor v_norm_new = scaled_sq_sum.sum({-2, -1}, /*keepdim=*/true).sqrt();
  torch::Tensor final_scale = step_size * (v_norm / v_norm_new.clamp_min(1e-10));
  x = x * final_scale.to(x.scalar_type());  // tensor x tensor: no scalar rounding issue
  // Cautious weight decay and the update; lr includes sqrt(max(1, rows/cols)).
  // Python's `** 0.5` is pow(), which may differ from sqrt() in the last bit.
  const double lr =
      RoundToBFloat16(g.lr * std::pow(std::max(1.0, static_cast<double>(rows) / cols), 0.5));
  const double lr_wd = RoundToBFloat16(lr * RoundToBFloat16(g.weight_decay));
  torch::Tensor mask = (x * stacked_params) >= 0;
  torch::Tensor update =
      Scale(x, lr).to(stacked_params.scalar_type()) + lr_wd * stacked_params * mask;
  stacked_params.sub_(update);
  for (int64_t i = 0; i < n; ++i) g.params[i].copy_(stacked_params[i]);
}

void MuonAdamW::Step() {
  torch::NoGradGuard no_grad;
  for (auto& g : groups_) {
    if (g.kind == "adamw") {
      StepAdamW(g);
    } else {
      StepMuon(g);
    }
  }
}

void MuonAdamW::ZeroGrad() {
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
    }
  }
}

void MuonAdamW::SetSchedule(double lr_multiplier, double muon_momentum,
                            double weight_decay_multiplier) {
  for (auto& g : groups_) {
    g.lr = g.initial_lr * lr_multiplier;
    if (g.kind == "muon") {
      g.momentum = muon_momentum;
      g.weight_decay = g.initial_weight_decay * weight_decay_multiplier;
    }
  }
}

nlohmann::json MuonAdamW::DescribeGroups() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : groups_) {
    nlohmann::json j;
    j["kind"] = g.kind;
    j["lr"] = g.lr;
    j["initial_lr"] = g.initial_lr;
    j["weight_decay"] = g.weight_decay;
    if (g.kind == "adamw") {
      j["betas"] = {g.betas[0], g.betas[1]};
      j["eps"] = g.eps;
    } else {
      j["momentum"] = g.momentum;
      j["ns_steps"] = g.ns_steps;
      j["beta2"] = g.beta2;
    }
    j["params"] = g.names;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace xv::trainer
