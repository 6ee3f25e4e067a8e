#include "tokenizer/tiktoken_metadata.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace xv::tok {

namespace {

Status ReadJsonFile(const std::string& path, nlohmann::json* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    *out = nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument(path + ": bad JSON at byte " + std::to_string(e.byte) + ": " +
                                   e.what());
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(temp + ": cannot create: " + std::strerror(errno));
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string error = std::strerror(errno);
      ::close(fd);
      ::unlink(temp.c_str());
      return Status::IoError(temp + ": write failed: " + error);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string error = std::strerror(errno);
    ::unlink(temp.c_str());
    return Status::IoError(temp + ": sync/close failed: " + error);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    ::unlink(temp.c_str());
    return Status::IoError(path + ": rename failed: " + error);
  }
  return Status::Ok();
}

Status WriteTokenizerMeta(const std::string& path, const TokenizerMeta& meta) {
  nlohmann::ordered_json j;
  j["pattern"] = meta.pattern;
  nlohmann::ordered_json specials = nlohmann::ordered_json::object();
  for (size_t i = 0; i < meta.specials.size(); ++i) specials[meta.specials[i]] = meta.n_ranks + i;
  j["special_tokens"] = specials;
  j["bos"] = meta.bos;
  j["bos_id"] = meta.bos_id;
  j["n_ranks"] = meta.n_ranks;
  j["vocab_size"] = meta.vocab_size;
  return WriteFileAtomically(path, j.dump(1) + "\n");
}

Status ReadTokenizerMeta(const std::string& path, TokenizerMeta* meta) {
  nlohmann::json j;
  XV_RETURN_IF_ERROR(ReadJsonFile(path, &j));
  if (!j.is_object()) return Status::InvalidArgument(path + ": expected a JSON object");
  if (!j.contains("pattern") || !j["pattern"].is_string()) {
    return Status::InvalidArgument(path + ": pattern: missing or not a string");
  }
  *meta = TokenizerMeta();
  meta->pattern = j["pattern"].get<std::string>();
  if (!j.contains("special_tokens") || !j["special_tokens"].is_object()) {
    return Status::InvalidArgument(path + ": special_tokens: missing or not an object");
  }
  std::map<int64_t, std::string> by_id;
  for (auto& [name, id] : j["special_tokens"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return Status::InvalidArgument(path + ": special_tokens." + name +
                                     ": expected a non-negative integer id");
    }
    if (!by_id.emplace(id.get<int64_t>(), name).second) {
      return Status::InvalidArgument(path + ": special_tokens." + name + ": id " +
                                     std::to_string(id.get<int64_t>()) + " used twice");
    }
  }
  int64_t n_ranks = -1;
  if (j.contains("n_ranks")) {
    if (!j["n_ranks"].is_number_integer() || j["n_ranks"].get<int64_t>() <= 0) {
      return Status::InvalidArgument(path + ": n_ranks: expected a positive integer");
    }
    n_ranks = j["n_ranks"].get<int64_t>();
  } else if (!by_id.empty()) {
    n_ranks = by_id.begin()->first;
  } else if (j.contains("vocab_size") && j["vocab_size"].is_number_integer()) {
    n_ranks = j["vocab_size"].get<int64_t>();
  } else {
    return Status::InvalidArgument(path + ": n_ranks: missing (and no special tokens to infer it)");
  }
  int64_t expected = n_ranks;
  for (auto& [id, name] : by_id) {
    if (id != expected) {
      return Status::InvalidArgument(path + ": special_tokens." + name + ": id " +
                                     std::to_string(id) + ", expected " + std::to_string(expected) +
                                     " (specials follow the ranks consecutively)");
    }
    meta->specials.push_back(name);
    ++expected;
  }
  meta->n_ranks = static_cast<uint32_t>(n_ranks);
  meta->vocab_size = static_cast<uint32_t>(expected);
  if (j.contains("vocab_size")) {
    if (!j["vocab_size"].is_number_integer() || j["vocab_size"].get<int64_t>() != expected) {
      return Status::InvalidArgument(path + ": vocab_size: expected " + std::to_string(expected) +
                                     " (n_ranks + specials)");
    }
  }
  if (j.contains("bos")) {
    if (!j["bos"].is_string()) return Status::InvalidArgument(path + ": bos: not a string");
    meta->bos = j["bos"].get<std::string>();
  } else if (!meta->specials.empty()) {
    meta->bos = meta->specials.front();
  }
  meta->bos_id = meta->vocab_size;
  for (size_t i = 0; i < meta->specials.size(); ++i) {
    if (meta->specials[i] == meta->bos) meta->bos_id = meta->n_ranks + static_cast<uint32_t>(i);
  }
  if (!meta->bos.empty() && meta->bos_id == meta->vocab_size) {
    return Status::InvalidArgument(path + ": bos: '" + meta->bos + "' is not a special token");
  }
  if (j.contains("bos_id") &&
      (!j["bos_id"].is_number_integer() || j["bos_id"].get<int64_t>() != meta->bos_id)) {
    return Status::InvalidArgument(path + ": bos_id: does not match the id of bos (" +
                                   std::to_string(meta->bos_id) + ")");
  }
  return Status::Ok();
}

Status WriteTokenBytes(const std::string& path, const std::vector<int32_t>& token_bytes) {
  std::string content = "[";
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (i > 0) content += ',';
    content += std::to_string(token_bytes[i]);
  }
  content += "]\n";
  return WriteFileAtomically(path, content);
}

Status ReadTokenBytes(const std::string& path, std::vector<int32_t>* token_bytes) {
  nlohmann::json j;
  XV_RETURN_IF_ERROR(ReadJsonFile(path, &j));
  const nlohmann::json* array = &j;
  if (j.is_object() && j.contains("token_bytes")) array = &j["token_bytes"];
  if (!array->is_array()) return Status::InvalidArgument(path + ": expected a JSON array");
  token_bytes->clear();
  token_bytes->reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const auto& v = (*array)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 20)) {
      return Status::InvalidArgument(path + ": token_bytes[" + std::to_string(i) +
                                     "]: expected a non-negative integer");
    }
    token_bytes->push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  if (token_bytes->empty()) return Status::InvalidArgument(path + ": token_bytes is empty");
  return Status::Ok();
}

}  // namespace xv::tok
