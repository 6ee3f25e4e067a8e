#include "trainer/checkpoint/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace xv::trainer {

namespace {

struct DtypeName {
  const char* name;
  torch::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
    {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
    {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
};

bool DtypeFromName(const std::string& name, torch::ScalarType* out) {
  for (const auto& d : kDtypes) {
    if (name == d.name) {
      *out = d.type;
      return true;
    }
  }
  return false;
}

const char* NameOfDtype(torch::ScalarType t) {
  for (const auto& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  return nullptr;
}

}  // namespace

xv::Status LoadSafetensors(const std::string& path, std::map<std::string, torch::Tensor>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return xv::Status::NotFound(path + ": cannot open for reading");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8) {
    return xv::Status::DataLoss(path + ": " + std::to_string(file_size) +
                                " bytes, too short for a safetensors header (offset 0)");
  }
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8 || header_len > (100u << 20)) {
    return xv::Status::DataLoss(path + ": header length " + std::to_string(header_len) +
                                " at offset 0 exceeds the file (" + std::to_string(file_size) +
                                " bytes)");
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    return xv::Status::DataLoss(path + ": header JSON at offset 8 is invalid: " + e.what());
  }
  if (!j.is_object()) return xv::Status::DataLoss(path + ": header at offset 8 is not an object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  std::vector<char> data(data_size);
  in.read(data.data(), static_cast<std::streamsize>(data_size));
  if (!in)
    return xv::Status::IoError(path + ": read failed at offset " + std::to_string(data_start));

  std::map<std::string, torch::Tensor> result;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string where = path + ": tensor '" + it.key() + "'";
    const auto& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets")) {
      return xv::Status::DataLoss(where + ": needs dtype, shape and data_offsets");
    }
    torch::ScalarType type;
    if (!e["dtype"].is_string() || !DtypeFromName(e["dtype"].get<std::string>(), &type)) {
      return xv::Status::InvalidArgument(where + ": unsupported dtype " + e["dtype"].dump());
    }
    std::vector<int64_t> shape;
    int64_t numel = 1, extent = 1;
    if (!e["shape"].is_array()) {
      return xv::Status::DataLoss(where + ": shape is not an array: " + e["shape"].dump());
    }
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return xv::Status::DataLoss(where + ": bad shape " + e["shape"].dump());
      }
      shape.push_back(d.get<int64_t>());
      // A header may claim dimensions whose product overflows (the tensor would then look tiny,
      // or LibTorch would be asked for impossible sizes or strides): refuse it here. Zero
      // dimensions count as 1, since the strides of the other dimensions still multiply.
      if (__builtin_mul_overflow(extent, std::max<int64_t>(shape.back(), 1), &extent)) {
        return xv::Status::DataLoss(where + ": shape " + e["shape"].dump() +
                                    " has more elements than fit in 64 bits");
      }
      numel *= shape.back();
    }
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      return xv::Status::DataLoss(where + ": bad data_offsets " + off.dump());
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    uint64_t expected = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel),
                               static_cast<uint64_t>(c10::elementSize(type)), &expected)) {
      return xv::Status::DataLoss(where + ": shape " + e["shape"].dump() + " of " +
                                  e["dtype"].get<std::string>() +
                                  " needs more bytes than fit in 64 bits");
    }
    if (begin > end || end > data_size) {
      return xv::Status::DataLoss(where + ": data_offsets [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + "] (file offset " +
                                  std::to_string(data_start + begin) + ") lie outside the " +
                                  std::to_string(data_size) + " data bytes");
    }
    if (end - begin != expected) {
      return xv::Status::DataLoss(where + ": " + std::to_string(end - begin) +
                                  " bytes at file offset " + std::to_string(data_start + begin) +
                                  ", shape and dtype need " + std::to_string(expected));
    }
    torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
    if (expected > 0) std::memcpy(t.data_ptr(), data.data() + begin, expected);
    result[it.key()] = t;
  }
  *out = std::move(result);
  return xv::Status::Ok();
}

xv::Status SaveSafetensors(const std::string& path,
                           const std::map<std::string, torch::Tensor>& tensors,
                           const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const char* dtype = NameOfDtype(t.scalar_type());
    if (dtype == nullptr) {
      return xv::Status::InvalidArgument("tensor '" + name + "': dtype " +
                                         std::string(c10::toString(t.scalar_type())) +
                                         " cannot be written to safetensors");
    }
    torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {
        {"dtype", dtype}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(c);
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h.push_back(' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return xv::Status::IoError(tmp + ": cannot open for writing");
    uint64_t len = h.size();
    unsigned char len_bytes[8];
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>((len >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const auto& c : cpu) {
      out.write(static_cast<const char*>(c.data_ptr()),
                static_cast<std::streamsize>(c.numel() * c.element_size()));
    }
    out.flush();
    if (!out) return xv::Status::IoError(tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return xv::Status::IoError(path + ": cannot rename " + tmp + " into place");
  }
  return xv::Status::Ok();
}

}  // namespace xv::trainer
