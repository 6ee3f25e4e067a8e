#include "trainer/device/device_probe.h"

#include <chrono>
#include <functional>

#include <torch/torch.h>

#include "trainer/device/device_fingerprint.h"
#include "trainer/model/attention.h"

namespace xv::trainer {

namespace {

void Sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

// Mean seconds per call of `fn` over `iters` calls after `warmup` calls.
double TimeIt(const torch::Device& d, int warmup, int iters, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  Sync(d);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  Sync(d);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

nlohmann::json ProbeMatmul(const ComputeDevice& dev) {
  nlohmann::json out = nlohmann::json::array();
  const bool gpu = !dev.is_cpu();
  const auto dtype = gpu ? torch::kBFloat16 : torch::kFloat;
  const std::vector<int64_t> sizes =
      gpu ? std::vector<int64_t>{4096, 8192} : std::vector<int64_t>{512, 1024};
  for (int64_t n : sizes) {
    auto opts = torch::TensorOptions().dtype(dtype).device(dev.device);
    auto a = torch::randn({n, n}, opts);
    auto b = torch::randn({n, n}, opts);
    torch::Tensor c;
    double s = TimeIt(dev.device, 2, gpu ? 20 : 3, [&] { c = torch::matmul(a, b); });
    double flops = 2.0 * n * n * n;
    out.push_back({{"n", n},
                   {"dtype", gpu ? "bfloat16" : "float32"},
                   {"seconds", s},
                   {"tflops", flops / s / 1e12}});
  }
  return out;
}

nlohmann::json ProbeAttention(const ComputeDevice& dev, const Recipe& r, const ResolvedSizes& sz) {
  const bool gpu = !dev.is_cpu();
  int64_t b = gpu ? r.device_batch_size : 1;
  const int64_t train_len = TrainingSequenceLen(r);  // the rows a training step attends over
  int64_t t = gpu ? train_len : std::min<int64_t>(train_len, 256);
  int64_t h = sz.n_head, hkv = sz.n_kv_head, d = r.head_dim;
  nlohmann::json out;
  out["shape"] = {{"batch", b}, {"seq", t}, {"n_head", h}, {"n_kv_head", hkv}, {"head_dim", d}};
  if (!gpu) out["note"] = "CPU: batch 1 and at most 256 positions, fp32";
  const auto dtype = gpu ? torch::kBFloat16 : torch::kFloat;
  nlohmann::json backends = nlohmann::json::object();
  for (const std::string backend : {"flash", "sdpa", "math"}) {
    nlohmann::json entry;
    try {
      auto opts = torch::TensorOptions().dtype(dtype).device(dev.device).requires_grad(true);
      auto q = torch::randn({b, t, h, d}, opts);
      auto k = torch::randn({b, t, hkv, d}, opts);
      auto v = torch::randn({b, t, hkv, d}, opts);
      auto run = [&](int64_t window) {
        auto y = CausalAttention(q, k, v, window, backend);
        y.sum().backward();
      };
      double full = TimeIt(dev.device, 1, gpu ? 5 : 2, [&] { run(t); });
      int64_t short_window = static_cast<int64_t>(t * r.short_window_fraction);
      double windowed = TimeIt(dev.device, 1, gpu ? 5 : 2, [&] { run(short_window); });
      entry = {{"available", true},
               {"fwd_bwd_ms_full", full * 1e3},
               {"fwd_bwd_ms_short_window", windowed * 1e3},
               {"short_window", short_window}};
    } catch (const c10::Error& e) {
      entry = {{"available", false}, {"error", std::string(e.what_without_backtrace())}};
    } catch (const std::exception& e) {
      entry = {{"available", false}, {"error", std::string(e.what()).substr(0, 300)}};
    }
    backends[backend] = entry;
  }
  out["backends"] = backends;
  return out;
}

nlohmann::json ProbeBandwidth(const ComputeDevice& dev) {
  const bool gpu = !dev.is_cpu();
  const int64_t bytes = gpu ? (int64_t{1} << 30) : (int64_t{1} << 28);
  auto src =
      torch::empty({bytes / 4}, torch::TensorOptions().dtype(torch::kFloat).device(dev.device));
  src.fill_(1.0);
  auto dst = torch::empty_like(src);
  double s = TimeIt(dev.device, 1, gpu ? 10 : 3, [&] { dst.copy_(src); });
  return {{"bytes", bytes},
          {"seconds", s},
          {"gb_per_s", 2.0 * static_cast<double>(bytes) / s / 1e9},
          {"method", "device copy; read + write counted"}};
}

}  // namespace

nlohmann::json RunDeviceProbe(const ComputeDevice& dev, const Recipe& r, const ResolvedSizes& sz) {
  nlohmann::json out;
  out["device"] = DeviceFingerprint(dev);
  if (dev.is_cpu()) out["note"] = "CPU: fp32 matmuls at 512 and 1024 (not bf16 4096/8192)";
  out["matmul"] = ProbeMatmul(dev);
  out["attention"] = ProbeAttention(dev, r, sz);
  out["bandwidth"] = ProbeBandwidth(dev);
  return out;
}

}  // namespace xv::trainer
