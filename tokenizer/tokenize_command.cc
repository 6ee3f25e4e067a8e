#include "tokenizer/tokenize_command.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/bpe_split_pattern.h"
#include "tokenizer/bpe_tokenizer.h"

namespace xv::tok {

namespace {

bool IsBlank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

Status EncodeLine(const BpeTokenizer& tok, const std::string& line, std::string* out) {
  size_t bad = 0;
  if (!ValidateUtf8(line, &bad).ok()) {
    return Status::InvalidArgument("invalid UTF-8 at byte offset " + std::to_string(bad));
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument("bad JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  }
  if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
    return Status::InvalidArgument("expected {\"text\": \"...\"}");
  }
  std::vector<uint32_t> ids;
  Status st = tok.EncodeOrdinaryChecked(j["text"].get_ref<const std::string&>(), &ids);
  if (!st.ok()) return st.WithContext("text: ");
  out->assign("{\"ids\":[");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append(std::to_string(ids[i]));
  }
  out->append("]}");
  return Status::Ok();
}

Status DecodeLine(const BpeTokenizer& tok, const std::string& line, std::string* out) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument("bad JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  }
  if (!j.is_object() || !j.contains("ids") || !j["ids"].is_array()) {
    return Status::InvalidArgument("expected {\"ids\": [...]}");
  }
  std::vector<uint32_t> ids;
  const auto& array = j["ids"];
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const auto& v = array[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() >= static_cast<int64_t>(tok.vocab_size())) {
      return Status::InvalidArgument("ids[" + std::to_string(i) + "]: " + v.dump() +
                                     " is not a token id in [0, " +
                                     std::to_string(tok.vocab_size()) + ")");
    }
    ids.push_back(static_cast<uint32_t>(v.get<int64_t>()));
  }
  std::string bytes;
  XV_RETURN_IF_ERROR(tok.Decode(ids, &bytes));
  nlohmann::json result = {{"text", bytes}};
  *out = result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return Status::Ok();
}

}  // namespace

Status RunTokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out) {
  std::unique_ptr<BpeTokenizer> tok;
  XV_RETURN_IF_ERROR(BpeTokenizer::Load(options.ranks_path, options.meta_path, &tok));
  std::string line;
  std::string result;
  size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (IsBlank(line)) continue;
    Status st = options.decode ? DecodeLine(*tok, line, &result) : EncodeLine(*tok, line, &result);
    if (!st.ok()) return st.WithContext("stdin line " + std::to_string(line_number) + ": ");
    out << result << '\n';
  }
  if (in.bad())
    return Status::IoError("stdin: read error after line " + std::to_string(line_number));
  out.flush();
  if (!out) return Status::IoError("stdout: write error");
  return Status::Ok();
}

void AddTokenizeCommand(CLI::App* app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app->add_subcommand("tokenize",
                                      "Encode JSON lines {\"text\": ...} from stdin to {\"ids\": "
                                      "[...]} (or --decode the other way)");
  cmd->add_option("--ranks", options->ranks_path, "ranks file in tiktoken format")->required();
  cmd->add_option("--meta", options->meta_path,
                  "tokenizer.json with pattern and special tokens (default: upstream's)");
  cmd->add_flag("--decode", options->decode, "read {\"ids\": [...]} and write {\"text\": ...}");
  cmd->callback([options]() {
    std::ios::sync_with_stdio(false);
    Status st = RunTokenize(*options, std::cin, std::cout);
    if (!st.ok()) {
      std::cerr << "xvctl tokenize: " << st.ToString() << "\n";
      std::exit(1);
    }
  });
}

}  // namespace xv::tok
