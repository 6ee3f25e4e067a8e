#include "tokenizer/tiktoken_ranks.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "tokenizer/tiktoken_metadata.h"

namespace xv::tok {

namespace {

constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                 (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                 static_cast<unsigned char>(bytes[i + 2]);
    out += kBase64Alphabet[(v >> 18) & 63];
    out += kBase64Alphabet[(v >> 12) & 63];
    out += kBase64Alphabet[(v >> 6) & 63];
    out += kBase64Alphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest == 1) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    out += kBase64Alphabet[(v >> 18) & 63];
    out += kBase64Alphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                 (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += kBase64Alphabet[(v >> 18) & 63];
    out += kBase64Alphabet[(v >> 12) & 63];
    out += kBase64Alphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

Status Base64Decode(std::string_view text, std::string* bytes) {
  bytes->clear();
  if (text.size() % 4 != 0) {
    return Status::InvalidArgument("base64 length " + std::to_string(text.size()) +
                                   " is not a multiple of 4");
  }
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int padding = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++padding;
        continue;
      }
      if (padding > 0 || (v[k] = Base64Value(c)) < 0) {
        return Status::InvalidArgument("bad base64 character at position " + std::to_string(i + k));
      }
    }
    const uint32_t word = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    bytes->push_back(static_cast<char>((word >> 16) & 0xFF));
    if (padding < 2) bytes->push_back(static_cast<char>((word >> 8) & 0xFF));
    if (padding < 1) bytes->push_back(static_cast<char>(word & 0xFF));
  }
  return Status::Ok();
}

Status WriteTiktokenRanks(const std::string& path, const TokenRanks& ranks) {
  std::string content;
  content.reserve(ranks.size() * 16);
  for (size_t r = 0; r < ranks.size(); ++r) {
    content += Base64Encode(ranks[r]);
    content += ' ';
    content += std::to_string(r);
    content += '\n';
  }
  return WriteFileAtomically(path, content);
}

Status ParseTiktokenRanks(std::string_view text, const std::string& name, TokenRanks* ranks) {
  ranks->clear();
  std::unordered_map<std::string, size_t> line_of_token;
  size_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = name + ":" + std::to_string(line_number) + ": ";
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
      return Status::InvalidArgument(where + "expected '<base64 token> <rank>'");
    }
    std::string token;
    Status st = Base64Decode(line.substr(0, space), &token);
    if (!st.ok()) return Status::InvalidArgument(where + st.message());
    if (token.empty()) return Status::InvalidArgument(where + "empty token");
    std::string_view rank_text = line.substr(space + 1);
    uint64_t rank = 0;
    if (rank_text.empty() || rank_text.size() > 10) {
      return Status::InvalidArgument(where + "bad rank '" + std::string(rank_text) + "'");
    }
    for (char c : rank_text) {
      if (c < '0' || c > '9') {
        return Status::InvalidArgument(where + "bad rank '" + std::string(rank_text) + "'");
      }
      rank = rank * 10 + (c - '0');
    }
    if (rank != ranks->size()) {
      return Status::InvalidArgument(where + "rank " + std::to_string(rank) + " where rank " +
                                     std::to_string(ranks->size()) +
                                     " was expected (ranks must be dense and in order)");
    }
    auto [it, inserted] = line_of_token.emplace(token, line_number);
    if (!inserted) {
      return Status::InvalidArgument(where + "duplicate token (same bytes as line " +
                                     std::to_string(it->second) + ")");
    }
    ranks->push_back(std::move(token));
  }
  if (ranks->empty()) return Status::InvalidArgument(name + ": no ranks (empty file)");
  return Status::Ok();
}

Status ReadTiktokenRanks(const std::string& path, TokenRanks* ranks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open ranks file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read error");
  return ParseTiktokenRanks(buffer.str(), path, ranks);
}

}  // namespace xv::tok
