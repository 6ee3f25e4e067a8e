// prepare.json: the manifest `xvctl prepare` writes last (it marks a complete output) and reads to
// decide whether the output is up to date. Shape (docs/data.md):
//   {"format": "xv-prepare", "version": 1,
//    "inputs":  [{"path", "size", "mtime_ns", "format", "compression"}, ...],   every file read
//    "options": {"vocab_size", "val_docs", "val_fraction", "max_chars", "doc_cap", "shard_tokens",
//                "txt_separator", "seed"},                     everything that changes the output
//    "outputs": [{"path" (relative to the data dir), "size", "crc32"}, ...],
//    "stats":   {documents, tokens, timings, ...}}                           informational
// The output is up to date when inputs and options are equal and every output has its size and
// crc32. Thread-safety: free functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tokenizer/corpus_files.h"
#include "tokenizer/prepare_options.h"

namespace xv::tok {

inline constexpr char kPrepareManifestName[] = "prepare.json";

nlohmann::json PrepareManifestInputs(const std::vector<CorpusFile>& files);
nlohmann::json PrepareManifestOptions(const PrepareOptions& options);
// {"path": relative_path, "size", "crc32"} of data_dir/relative_path.
Status DescribePrepareOutput(const std::string& data_dir, const std::string& relative_path,
                             nlohmann::json* entry);

// Sets *up_to_date and, when false, *reason ("no prepare.json", "inputs changed", "options
// changed", "output tokenizer/ranks.tiktoken is missing", ...). An unreadable or malformed
// prepare.json is not an error: it reads as not up to date.
void CheckPrepareManifest(const std::string& data_dir, const nlohmann::json& inputs,
                          const nlohmann::json& options, bool* up_to_date, std::string* reason);

}  // namespace xv::tok
