// Fuzz target: safetensors reading (trainer/checkpoint/safetensors.h). Links LibTorch.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "fuzz_driver.h"
#include "fuzz_targets.h"
#include "trainer/checkpoint/safetensors.h"

namespace xv::fuzz {

int FuzzSafetensors(const uint8_t* data, size_t size) {
  // One scratch file for the process, removed at exit.
  static const struct ScratchFile {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("xv-fuzz-" + std::to_string(::getpid()) + ".safetensors"))
                           .string();
    ~ScratchFile() { std::remove(path.c_str()); }
  } scratch;
  const std::string& path = scratch.path;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::map<std::string, torch::Tensor> tensors;
  const Status st = trainer::LoadSafetensors(path, &tensors);
  if (!st.ok()) {
    XV_FUZZ_CHECK(st.message().rfind(path + ": ", 0) == 0,
                  "the refusal does not name the file: " + st.message());
    XV_FUZZ_CHECK(tensors.empty(), "a refused file filled the output");
    return 0;
  }
  XV_FUZZ_CHECK(size >= 8, "accepted a file shorter than its header length");
  for (const auto& [name, t] : tensors) {
    XV_FUZZ_CHECK(t.defined() && t.is_contiguous() && t.device().is_cpu(),
                  "tensor '" + name + "' is not a contiguous CPU tensor");
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    XV_FUZZ_CHECK(bytes <= size, "tensor '" + name + "' holds more bytes than the file");
  }
  // Entries may share bytes (the format does not forbid it), so each one is bounded on its own.
  return 0;
}

}  // namespace xv::fuzz
