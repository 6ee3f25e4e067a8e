#include "common/bearer_token.h"

#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>

#include "common/sha256.h"

namespace xv {
namespace {

constexpr int kTokenBytes = 32;

std::string Trimmed(const std::string& text) {
  const char* space = " \t\r\n";
  const size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(space) - begin + 1);
}

Status ReadTokenFile(const std::string& path, const std::string& named_by, std::string* token) {
  std::ifstream in(path);
  if (!in) return Status::IoError(named_by + " " + path + ": cannot read the token file");
  std::string line;
  std::getline(in, line);
  *token = Trimmed(line);
  if (token->empty()) {
    return Status::InvalidArgument(named_by + " " + path +
                                   ": the file is empty (expected the token on its first line)");
  }
  return Status::Ok();
}

}  // namespace

Status GenerateBearerToken(std::string* token) {
  unsigned char bytes[kTokenBytes];
  if (RAND_bytes(bytes, kTokenBytes) != 1) {
    return Status::Internal("token: the system's random source failed (OpenSSL RAND_bytes)");
  }
  static const char* kHex = "0123456789abcdef";
  std::string text = "xv_";
  for (unsigned char b : bytes) {
    text.push_back(kHex[b >> 4]);
    text.push_back(kHex[b & 15]);
  }
  *token = std::move(text);
  return Status::Ok();
}

std::string HashBearerToken(const std::string& token) { return Sha256Hex(token); }

Status ReadClientToken(const std::string& token_file, std::string* token) {
  token->clear();
  if (!token_file.empty()) return ReadTokenFile(token_file, "--token-file", token);
  if (const char* file = std::getenv("XV_TOKEN_FILE"); file != nullptr && *file != '\0') {
    return ReadTokenFile(file, "XV_TOKEN_FILE", token);
  }
  if (const char* value = std::getenv("XV_TOKEN"); value != nullptr) *token = Trimmed(value);
  return Status::Ok();
}

}  // namespace xv
