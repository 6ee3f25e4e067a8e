// xv-bench-trainer: training-step throughput of xv-train's model and optimizer (trainer/), side by
// side in one run:
//   - for each attention backend that runs here (math and sdpa; flash on CUDA with bf16), and on
//     the CPU with 1 thread and with all cores: ms per optimizer step (every micro-step's forward
//     and backward, then MuonAdamW's step), tok/s, achieved GFLOP/s from the recipe's FLOPs per
//     token (upstream estimate_flops) and that figure against the measured matmul ceiling;
//   - the ratios sdpa/math (flash/sdpa on CUDA) and N threads / 1 thread;
//   - the BLAS in use: which library is mapped into the process, OpenBLAS's own configuration when
//     it is OpenBLAS, and fp32 512x512 matmul GFLOP/s with 1 and N threads (the reference BLAS is
//     an order of magnitude slower than OpenBLAS).
// Configurations are interleaved step by step (one step of each in turn, round after round), so a
// change in the load of a shared machine hits every configuration alike; each figure is the median
// over the timed steps. Batches are random tokens, fixed for the run: the data path is not timed.
//
// Usage: xv-bench-trainer [--recipe FILE] [--set KEY=VALUE ...] [--device auto|cpu|cuda|cuda:N]
//                         [--steps N] [--warmup N] [--threads N] [--backends math,sdpa,flash]
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "common/recipe.h"
#include "trainer/device/autocast_scope.h"
#include "trainer/device/compute_device.h"
#include "trainer/model/attention.h"
#include "trainer/model/gpt.h"
#include "trainer/model/speed_levers.h"
#include "trainer/optim/muon_adamw.h"
#include "trainer/torch_compat.h"
#include "trainer/train/recipe_loader.h"

namespace {

using xv::Recipe;
using xv::ResolvedSizes;
using xv::Status;
using xv::trainer::ComputeDevice;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double ProcessCpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return one.empty() ? "unknown" : one + " (1 min), " + five + " (5 min)";
}

void Sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

// The BLAS under LibTorch's CPU matmuls. Debian's LibTorch calls libblas.so.3, which the
// alternatives system points at OpenBLAS or at the reference (netlib) BLAS; a PyTorch-shipped
// LibTorch carries MKL inside libtorch_cpu. OpenBLAS keeps its own thread pool, which
// at::set_num_threads does not size: SetThreads sizes both.
class BlasInfo {
 public:
  BlasInfo() {
    set_threads_ = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    get_threads_ = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    auto get_config =
        reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    if (get_config != nullptr) openblas_config_ = get_config();
    std::ifstream maps("/proc/self/maps");
    std::string line;
    std::set<std::string> seen;
    while (std::getline(maps, line)) {
      const size_t slash = line.find('/');
      if (slash == std::string::npos) continue;
      const std::string path = line.substr(slash);
      const std::string file = path.substr(path.rfind('/') + 1);
      // CPU BLAS only: the GPU BLAS libraries (cuBLAS, hipBLAS, rocBLAS) of GPU builds are skipped.
      const bool gpu_blas = file.rfind("libcublas", 0) == 0 || file.rfind("libhipblas", 0) == 0 ||
                            file.rfind("librocblas", 0) == 0;
      if ((file.find("blas") != std::string::npos || file.find("mkl") != std::string::npos) &&
          !gpu_blas && seen.insert(path).second) {
        libraries_.push_back(path);
      }
    }
  }

  // "OpenBLAS", "reference BLAS (netlib)", "MKL (inside LibTorch)" or "unknown".
  std::string Kind() const {
    if (!openblas_config_.empty() || set_threads_ != nullptr) return "OpenBLAS";
    for (const auto& lib : libraries_) {
      if (lib.find("/blas/") != std::string::npos || lib.find("libblas") != std::string::npos) {
        return "reference BLAS (netlib)";
      }
    }
    if (at::globalContext().hasMKL()) return "MKL (inside LibTorch)";
    return "unknown";
  }
  const std::string& openblas_config() const { return openblas_config_; }
  const std::vector<std::string>& libraries() const { return libraries_; }

  // Sizes LibTorch's intra-op pool and OpenBLAS's pool (when OpenBLAS is loaded).
  void SetThreads(int n) const {
    at::set_num_threads(n);
    if (set_threads_ != nullptr) set_threads_(n);
  }
  // OpenBLAS's thread count, or -1 when it is not OpenBLAS.
  int BlasThreads() const { return get_threads_ != nullptr ? get_threads_() : -1; }

 private:
  void (*set_threads_)(int) = nullptr;
  int (*get_threads_)() = nullptr;
  std::string openblas_config_;
  std::vector<std::string> libraries_;
};

// GFLOP/s of an n x n x n matmul of `dtype` on `device` (median of 5 batches of calls).
double MatmulGflops(int64_t n, torch::ScalarType dtype, const torch::Device& device) {
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  auto a = torch::randn({n, n}, opts);
  auto b = torch::randn({n, n}, opts);
  torch::Tensor c;
  for (int i = 0; i < 3; ++i) c = torch::matmul(a, b);
  Sync(device);
  // Calls per batch: about 50 ms of work at the rate of the warm-up.
  double t0 = Now();
  c = torch::matmul(a, b);
  Sync(device);
  const int calls = std::max(1, static_cast<int>(0.05 / std::max(Now() - t0, 1e-6)));
  std::vector<double> rates;
  for (int batch = 0; batch < 5; ++batch) {
    t0 = Now();
    for (int i = 0; i < calls; ++i) c = torch::matmul(a, b);
    Sync(device);
    rates.push_back(2.0 * n * n * n * calls / (Now() - t0) / 1e9);
  }
  return Median(rates);
}

// One measured configuration: a backend's model and optimizer, run with `threads` CPU threads
// (0 on GPUs, where the CPU thread count is not what is measured).
struct Config {
  std::string backend;
  int threads = 0;
  size_t model_index = 0;  // into the per-backend models
  std::vector<double> step_s, fwd_bwd_s, optim_s, cpu_s;
  double last_loss = 0;
  bool finite = true;
  std::string error;  // set when a step threw (out of memory, ...): the configuration stops
};

struct BackendModel {
  std::string backend;
  std::unique_ptr<xv::trainer::GPT> model;
  std::unique_ptr<xv::trainer::MuonAdamW> optimizer;
};

xv::trainer::MuonAdamWOptions OptimizerOptions(const Recipe& recipe) {
  xv::trainer::MuonAdamWOptions o;
  o.unembedding_lr = recipe.unembedding_lr;
  o.embedding_lr = recipe.embedding_lr;
  o.matrix_lr = recipe.matrix_lr;
  o.weight_decay = recipe.weight_decay;
  o.scalar_lr = recipe.scalar_lr;
  o.adam_betas = recipe.adam_betas;
  o.ns_steps = recipe.muon_ns_steps;
  o.beta2 = recipe.muon_beta2;
  o.momentum = recipe.muon_momentum_start;
  return o;
}

// One optimizer step as xv-train's loop runs it (trainer/train/training_loop.cc): grad_accum
// micro-steps of forward under autocast and backward of loss / grad_accum, then the optimizer
// step and ZeroGrad; one host read of the last loss at the end.
void RunStep(BackendModel& bm, const torch::Tensor& x, const torch::Tensor& y, int64_t grad_accum,
             const torch::Device& device, torch::ScalarType autocast_dtype, Config* c, bool timed) {
  Sync(device);
  const double cpu0 = ProcessCpu();
  const double t0 = Now();
  torch::Tensor loss;
  for (int64_t micro = 0; micro < grad_accum; ++micro) {
    {
      xv::trainer::AutocastScope autocast(device, autocast_dtype);
      loss = (*bm.model)->forward(x, y);
    }
    (loss / static_cast<double>(grad_accum)).backward();
  }
  Sync(device);
  const double t1 = Now();
  bm.optimizer->SetSchedule(1.0, 0.95, 1.0);
  bm.optimizer->Step();
  bm.optimizer->ZeroGrad();
  const double value = loss.item<double>();
  Sync(device);
  const double t2 = Now();
  c->last_loss = value;
  c->finite = c->finite && std::isfinite(value);
  if (!timed) return;
  c->step_s.push_back(t2 - t0);
  c->fwd_bwd_s.push_back(t1 - t0);
  c->optim_s.push_back(t2 - t1);
  c->cpu_s.push_back(ProcessCpu() - cpu0);
}

int Usage(FILE* out) {
  std::fprintf(out,
               "usage: xv-bench-trainer [--recipe FILE] [--set KEY=VALUE ...] [--device "
               "auto|cpu|cuda|cuda:N]\n"
               "                        [--steps N] [--warmup N] [--threads N] [--backends "
               "math,sdpa,flash]\n"
               "  --recipe    recipe YAML whose shapes are measured (default %s)\n"
               "  --set       recipe override, as xv-train --set (repeatable)\n"
               "  --device    default: the recipe's device\n"
               "  --steps     timed steps per configuration (default 5)\n"
               "  --warmup    untimed steps per configuration first (default 2)\n"
               "  --threads   the 'all cores' thread count (default: every hardware thread)\n"
               "  --backends  attention backends to try (default math,sdpa,flash; those that "
               "cannot run here are listed and skipped)\n",
               XV_BENCH_DEFAULT_RECIPE);
  return out == stdout ? 0 : 2;
}

bool ParseCount(const std::string& flag, const std::string& text, int min, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > 100000) {
    std::fprintf(stderr, "%s: expected an integer >= %d, got '%s'\n", flag.c_str(), min,
                 text.c_str());
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines as they come, also into a pipe or a file
  std::string recipe_path = XV_BENCH_DEFAULT_RECIPE;
  std::vector<std::string> sets;
  std::string device_flag;
  int steps = 5, warmup = 2;
  int all_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> backends = {"math", "sdpa", "flash"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") return Usage(stdout);
    if (a != "--recipe" && a != "--set" && a != "--device" && a != "--steps" && a != "--warmup" &&
        a != "--threads" && a != "--backends") {
      std::fprintf(stderr, "unknown argument '%s'\n", a.c_str());
      return Usage(stderr);
    }
    if (!value(&v)) return 2;
    if (a == "--recipe") {
      recipe_path = v;
    } else if (a == "--set") {
      sets.push_back(v);
    } else if (a == "--device") {
      device_flag = v;
    } else if (a == "--steps") {
      if (!ParseCount(a, v, 1, &steps)) return 2;
    } else if (a == "--warmup") {
      if (!ParseCount(a, v, 0, &warmup)) return 2;
    } else if (a == "--threads") {
      if (!ParseCount(a, v, 1, &all_threads)) return 2;
    } else if (a == "--backends") {
      backends.clear();
      std::stringstream list(v);
      std::string b;
      while (std::getline(list, b, ',')) {
        if (b != "math" && b != "sdpa" && b != "flash") {
          std::fprintf(stderr, "--backends: '%s' is not math, sdpa or flash\n", b.c_str());
          return 2;
        }
        backends.push_back(b);
      }
      if (backends.empty()) {
        std::fprintf(stderr, "--backends: empty list\n");
        return 2;
      }
    }
  }

  Recipe recipe;
  if (Status s = xv::trainer::LoadRecipe(recipe_path, "", sets, &recipe); !s.ok()) {
    std::fprintf(stderr, "xv-bench-trainer: %s\n", s.message().c_str());
    return 2;
  }
  if (!device_flag.empty()) recipe.device = device_flag;
  ResolvedSizes sizes;
  if (Status s = xv::ResolveSizes(recipe, &sizes); !s.ok()) {
    std::fprintf(stderr, "xv-bench-trainer: %s\n", s.message().c_str());
    return 2;
  }
  ComputeDevice device;
  if (Status s = xv::trainer::SelectComputeDevice(recipe.device, &device); !s.ok()) {
    std::fprintf(stderr, "xv-bench-trainer: --device: %s\n", s.message().c_str());
    return 2;
  }
  const bool gpu = !device.is_cpu();
  const torch::ScalarType autocast_dtype =
      (!gpu || recipe.dtype == "float32")
          ? torch::kFloat
          : (recipe.dtype == "float16" ? torch::kHalf : torch::kBFloat16);
  const std::string dtype_name = autocast_dtype == torch::kFloat  ? "float32"
                                 : autocast_dtype == torch::kHalf ? "float16"
                                                                  : "bfloat16";

  try {
    BlasInfo blas;
    std::printf("xv-bench-trainer: recipe %s%s\n", recipe_path.c_str(),
                sets.empty() ? "" : " with --set overrides");
    std::printf("  device: %s (%s), LibTorch %s, %d hardware threads, load average %s\n",
                device.name.c_str(), xv::trainer::BackendName(device.backend),
                xv::trainer::compat::TorchVersionString().c_str(),
                static_cast<int>(std::thread::hardware_concurrency()), LoadAverage().c_str());
    std::printf("  BLAS: %s", blas.Kind().c_str());
    if (!blas.openblas_config().empty()) std::printf(" [%s]", blas.openblas_config().c_str());
    std::printf("\n");
    for (const auto& lib : blas.libraries()) std::printf("    mapped: %s\n", lib.c_str());
    std::printf("  LibTorch: OpenMP %s, MKL %s\n", at::globalContext().hasOpenMP() ? "yes" : "no",
                at::globalContext().hasMKL() ? "yes" : "no");

    // The BLAS ceiling on the CPU, with 1 thread and all cores.
    // (The training steps on a GPU run at one thread count: all cores.)
    std::vector<int> thread_counts = {1};
    if (all_threads > 1) thread_counts.push_back(all_threads);
    std::vector<double> cpu_matmul;
    for (int t : thread_counts) {
      blas.SetThreads(t);
      cpu_matmul.push_back(MatmulGflops(512, torch::kFloat, torch::Device(torch::kCPU)));
      std::printf(
          "  fp32 matmul 512^3 on the CPU, %d thread%s (LibTorch %d, BLAS %d): %.1f GFLOP/s\n", t,
          t == 1 ? "" : "s", at::get_num_threads(), blas.BlasThreads(), cpu_matmul.back());
    }
    double gpu_matmul = 0;
    if (gpu) {
      blas.SetThreads(all_threads);
      gpu_matmul = MatmulGflops(4096, autocast_dtype, device.device);
      std::printf("  %s matmul 4096^3 on %s: %.1f TFLOP/s\n", dtype_name.c_str(),
                  device.name.c_str(), gpu_matmul / 1e3);
    }

    // The model's shape and cost.
    xv::trainer::GPTConfig cfg = xv::trainer::GPTConfigFromRecipe(recipe, sizes);
    if (Status s = xv::trainer::ValidateGPTConfig(cfg); !s.ok()) {
      std::fprintf(stderr, "xv-bench-trainer: %s\n", s.message().c_str());
      return 2;
    }
    const int64_t grad_accum = sizes.grad_accum_steps;
    const int64_t tokens_per_step = recipe.total_batch_size;
    std::printf(
        "  model: depth %d, dim %d, %d heads (%d kv) x %d, vocab %d, sequence %d, window pattern "
        "%s\n",
        recipe.depth, sizes.model_dim, sizes.n_head, sizes.n_kv_head, recipe.head_dim,
        recipe.vocab_size, recipe.sequence_len, recipe.window_pattern.c_str());
    std::printf(
        "  step: %lld tokens = %lld micro-step%s of %d x %d, %s; random tokens; %d warm-up + %d "
        "timed steps per configuration, interleaved; figures are medians\n",
        static_cast<long long>(tokens_per_step), static_cast<long long>(grad_accum),
        grad_accum == 1 ? "" : "s", recipe.device_batch_size, recipe.sequence_len,
        dtype_name.c_str(), warmup, steps);

    // One model and optimizer per backend that runs here, from one initialisation.
    const torch::Tensor probe =
        torch::empty({1, 1, 1, recipe.head_dim},
                     torch::TensorOptions().dtype(autocast_dtype).device(device.device));
    std::vector<BackendModel> models;
    for (const auto& backend : backends) {
      try {
        const std::string resolved = xv::trainer::ResolveAttentionBackend(backend, probe);
        if (resolved != backend) {
          std::printf("  attention %s: not run (resolves to %s here)\n", backend.c_str(),
                      resolved.c_str());
          continue;
        }
      } catch (const c10::Error& e) {
        std::printf("  attention %s: not available here (%s)\n", backend.c_str(),
                    e.what_without_backtrace());
        continue;
      }
      xv::trainer::GPTConfig backend_cfg = cfg;
      backend_cfg.attention_backend = backend;
      torch::manual_seed(static_cast<uint64_t>(recipe.seed));
      BackendModel bm;
      bm.backend = backend;
      bm.model = std::make_unique<xv::trainer::GPT>(backend_cfg);
      (*bm.model)->InitWeights();
      (*bm.model)->to(device.device);
      // As xv-train: a bf16 run keeps the embeddings bf16 (upstream init_weights) unless switched
      // off.
      if (autocast_dtype == torch::kBFloat16 &&
          xv::trainer::SpeedLeverEnabled(xv::trainer::kLeverBf16Embeddings))
        (*bm.model)->CastEmbeddings(torch::kBFloat16);
      (*bm.model)->train();
      bm.optimizer = std::make_unique<xv::trainer::MuonAdamW>(*bm.model, OptimizerOptions(recipe));
      models.push_back(std::move(bm));
    }
    if (models.empty()) {
      std::fprintf(stderr, "xv-bench-trainer: no attention backend of --backends runs here\n");
      return 1;
    }
    const double flops_per_token = static_cast<double>((*models[0].model)->EstimateFlops());
    const auto scaling = (*models[0].model)->NumScalingParams();
    std::printf("  parameters: %.3f M; FLOPs per token (upstream estimate_flops): %.3e\n",
                static_cast<double>(scaling.count("total") ? scaling.at("total") : 0) / 1e6,
                flops_per_token);

    torch::manual_seed(static_cast<uint64_t>(recipe.seed) + 1);
    const auto long_opts = torch::TensorOptions().dtype(torch::kLong);
    const torch::Tensor x =
        torch::randint(recipe.vocab_size, {recipe.device_batch_size, recipe.sequence_len},
                       long_opts)
            .to(device.device);
    const torch::Tensor y =
        torch::randint(recipe.vocab_size, {recipe.device_batch_size, recipe.sequence_len},
                       long_opts)
            .to(device.device);

    std::vector<Config> configs;
    for (size_t m = 0; m < models.size(); ++m) {
      for (int t : gpu ? std::vector<int>{0} : thread_counts) {
        Config c;
        c.backend = models[m].backend;
        c.threads = t;
        c.model_index = m;
        configs.push_back(c);
      }
    }
    const double bench_start = Now();
    for (int round = 0; round < warmup + steps; ++round) {
      for (auto& c : configs) {
        if (!c.error.empty()) continue;
        blas.SetThreads(c.threads > 0 ? c.threads : all_threads);
        try {
          RunStep(models[c.model_index], x, y, grad_accum, device.device, autocast_dtype, &c,
                  round >= warmup);
        } catch (const c10::Error& e) {
          c.error = e.what_without_backtrace();
          models[c.model_index].optimizer->ZeroGrad();
        }
      }
    }
    const double bench_seconds = Now() - bench_start;

    // The table.
    std::printf("\n%-6s %7s %10s %10s %9s %11s %11s %9s %9s %8s %9s\n", "attn", "threads",
                "ms/step", "fwd+bwd ms", "optim ms", "tok/s", "tok/cpu-s", "GFLOP/s", "% matmul",
                "cpu/wall", "loss");
    std::vector<double> tok_s(configs.size());
    bool all_finite = true;
    for (size_t i = 0; i < configs.size(); ++i) {
      const Config& c = configs[i];
      if (!c.error.empty()) {
        tok_s[i] = 0;
        std::printf("%-6s %7s failed: %.200s\n", c.backend.c_str(),
                    c.threads > 0 ? std::to_string(c.threads).c_str() : "-", c.error.c_str());
        continue;
      }
      const double step = Median(c.step_s);
      tok_s[i] = step > 0 ? static_cast<double>(tokens_per_step) / step : 0;
      const double gflops = tok_s[i] * flops_per_token / 1e9;
      double ceiling = gpu ? gpu_matmul : 0;
      for (size_t t = 0; !gpu && t < thread_counts.size(); ++t) {
        if (thread_counts[t] == c.threads) ceiling = cpu_matmul[t];
      }
      double cpu_total = 0, wall_total = 0;
      for (size_t s = 0; s < c.step_s.size(); ++s) {
        cpu_total += c.cpu_s[s];
        wall_total += c.step_s[s];
      }
      all_finite = all_finite && c.finite;
      const double cpu_step = Median(c.cpu_s);
      std::printf("%-6s %7s %10.1f %10.1f %9.1f %11.0f %11.0f %9.2f %8.1f%% %8.2f %9.4f%s\n",
                  c.backend.c_str(), c.threads > 0 ? std::to_string(c.threads).c_str() : "-",
                  step * 1e3, Median(c.fwd_bwd_s) * 1e3, Median(c.optim_s) * 1e3, tok_s[i],
                  cpu_step > 0 ? static_cast<double>(tokens_per_step) / cpu_step : 0.0, gflops,
                  ceiling > 0 ? 100.0 * gflops / ceiling : 0.0,
                  wall_total > 0 ? cpu_total / wall_total : 0.0, c.last_loss,
                  c.finite ? "" : "  NON-FINITE");
    }
    std::printf(
        "(%% matmul: achieved GFLOP/s against the %s matmul measured above at the same "
        "thread count; tok/cpu-s: tokens per CPU-second of the process, the figure to compare on "
        "a loaded machine; cpu/wall: process CPU seconds per wall second during the step)\n",
        gpu ? dtype_name.c_str() : "fp32 512^3");

    // Ratios.
    auto find = [&](const std::string& backend, int threads) -> double {
      for (size_t i = 0; i < configs.size(); ++i) {
        if (configs[i].backend == backend && configs[i].threads == threads) return tok_s[i];
      }
      return 0;
    };
    std::printf("\nratios (tok/s):\n");
    for (int t : gpu ? std::vector<int>{0} : thread_counts) {
      const std::string where =
          t > 0 ? " (" + std::to_string(t) + " thread" + (t == 1 ? ")" : "s)") : "";
      const double math = find("math", t), sdpa = find("sdpa", t), flash = find("flash", t);
      if (math > 0 && sdpa > 0) std::printf("  sdpa / math%s: %.2fx\n", where.c_str(), sdpa / math);
      if (sdpa > 0 && flash > 0) {
        std::printf("  flash / sdpa%s: %.2fx\n", where.c_str(), flash / sdpa);
      }
      if (math > 0 && flash > 0) {
        std::printf("  flash / math%s: %.2fx\n", where.c_str(), flash / math);
      }
    }
    if (thread_counts.size() > 1) {
      for (const auto& bm : models) {
        const double one = find(bm.backend, 1), all = find(bm.backend, all_threads);
        if (!gpu && one > 0 && all > 0) {
          std::printf("  %d threads / 1 thread, %s: %.2fx\n", all_threads, bm.backend.c_str(),
                      all / one);
        }
      }
      std::printf("  %d threads / 1 thread, fp32 matmul 512^3: %.2fx\n", all_threads,
                  cpu_matmul[1] / cpu_matmul[0]);
    }
    std::printf("\n%.1f s of steps; load average now %s\n", bench_seconds, LoadAverage().c_str());
    if (!all_finite) {
      std::fprintf(stderr, "xv-bench-trainer: a configuration produced a non-finite loss\n");
      return 1;
    }
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "xv-bench-trainer: LibTorch error: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xv-bench-trainer: %s\n", e.what());
    return 1;
  }
  return 0;
}
