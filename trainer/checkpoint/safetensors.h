// Safetensors files (the format of Hugging Face's safetensors): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the raw little-endian tensor bytes. Used for checkpoints, verify cases and their outputs.
// Thread-safety: plain functions; no shared state.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>

#include "common/status.h"

namespace xv::trainer {

// Reads every tensor of `path` into `out` (CPU, contiguous, owning its memory). Supported dtypes:
// F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL. Fails with a message naming the file, the
// tensor and the offset for truncated files, bad headers, unknown dtypes and out-of-range offsets.
xv::Status LoadSafetensors(const std::string& path, std::map<std::string, torch::Tensor>* out);

// Writes `tensors` (any device; copied to CPU, contiguous) to `path` atomically (a temporary file
// renamed into place). `metadata` goes to "__metadata__" (string values). Fails naming the tensor
// for unsupported dtypes, or the path for I/O errors.
xv::Status SaveSafetensors(const std::string& path,
                           const std::map<std::string, torch::Tensor>& tensors,
                           const std::map<std::string, std::string>& metadata = {});

}  // namespace xv::trainer
