#include "tokenizer/prepare_manifest.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "tokenizer/token_shard_reader.h"

namespace xv::tok {
namespace {

Status FileSizeAndCrc(const std::string& path, uint64_t* size, uint32_t* crc) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": missing");
  std::vector<char> buf(1 << 20);
  uLong c = crc32(0L, Z_NULL, 0);
  *size = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    c = crc32(c, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(n));
    *size += static_cast<uint64_t>(n);
  }
  if (in.bad()) return Status::IoError(path + ": read error");
  *crc = static_cast<uint32_t>(c);
  return Status::Ok();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

nlohmann::json PrepareManifestInputs(const std::vector<CorpusFile>& files) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const CorpusFile& f : files) {
    inputs.push_back({{"path", f.path},
                      {"size", f.size},
                      {"mtime_ns", f.mtime_ns},
                      {"format", CorpusFormatName(f.format)},
                      {"compression", CorpusCompressionName(f.compression)}});
  }
  return inputs;
}

nlohmann::json PrepareManifestOptions(const PrepareOptions& o) {
  return {{"vocab_size", o.vocab_size},
          {"val_docs", o.val_docs},
          {"val_fraction", o.val_fraction},
          {"max_chars", o.max_chars},
          {"doc_cap", o.doc_cap},
          {"shard_tokens", o.shard_tokens},
          {"txt_separator", TextSeparatorName(o.txt_separator)},
          {"seed", o.seed}};
}

Status DescribePrepareOutput(const std::string& data_dir, const std::string& relative_path,
                             nlohmann::json* entry) {
  uint64_t size = 0;
  uint32_t crc = 0;
  XV_RETURN_IF_ERROR(FileSizeAndCrc(data_dir + "/" + relative_path, &size, &crc));
  *entry = {{"path", relative_path}, {"size", size}, {"crc32", crc}};
  return Status::Ok();
}

void CheckPrepareManifest(const std::string& data_dir, const nlohmann::json& inputs,
                          const nlohmann::json& options, bool* up_to_date, std::string* reason) {
  *up_to_date = false;
  const std::string path = data_dir + "/" + kPrepareManifestName;
  std::ifstream in(path);
  if (!in) {
    *reason = "no " + std::string(kPrepareManifestName);
    return;
  }
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object() ||
      manifest.value("format", "") != "xv-prepare" || !manifest.contains("outputs") ||
      !manifest["outputs"].is_array()) {
    *reason = path + " is not a valid manifest";
    return;
  }
  if (manifest.value("version", 0) != 1) {
    *reason = path + " has another manifest version";
    return;
  }
  if (manifest.value("inputs", nlohmann::json()) != inputs) {
    *reason = "inputs changed";
    return;
  }
  if (manifest.value("options", nlohmann::json()) != options) {
    *reason = "options changed";
    return;
  }
  for (const nlohmann::json& out : manifest["outputs"]) {
    if (!out.is_object() || !out.contains("path") || !out["path"].is_string()) {
      *reason = path + ": malformed output entry";
      return;
    }
    const std::string rel = out["path"].get<std::string>();
    nlohmann::json actual;
    Status st = DescribePrepareOutput(data_dir, rel, &actual);
    if (!st.ok()) {
      *reason = "output " + rel + " is missing";
      return;
    }
    if (actual != out) {
      *reason = "output " + rel + " changed (size or crc32)";
      return;
    }
    if (EndsWith(rel, ".xvt")) {
      std::unique_ptr<TokenShardReader> reader;
      st = TokenShardReader::Open(data_dir + "/" + rel, &reader, ShardVerify::kFull);
      if (!st.ok()) {
        *reason = "output " + rel + " does not verify: " + st.message();
        return;
      }
    }
  }
  // A shard that is not in the manifest would be read by the trainer: not up to date.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir + "/shards", ec)) {
    const std::string rel = "shards/" + entry.path().filename().string();
    bool listed = false;
    for (const nlohmann::json& out : manifest["outputs"]) listed = listed || out["path"] == rel;
    if (!listed) {
      *reason = "unexpected file " + rel;
      return;
    }
  }
  *up_to_date = true;
  reason->clear();
}

}  // namespace xv::tok
