// Corpus input discovery for `xvctl prepare`: turns the --input paths (files and directories) into
// the ordered list of files to read, with their format and compression.
//
// Rules (docs/data.md, "Inputs"):
//  - A directory is walked recursively in byte-wise sorted order of entry names; hidden entries
//    (names starting with '.') are skipped. Symbolic links are followed; a file reached twice (the
//    same device and inode, e.g. fortune's `art.u8 -> art`) is read once, at its first position,
//    and a directory loop is walked once.
//  - Format by name, after removing a `.gz` (zlib/gzip) or `.zst` (zstd) suffix: `.jsonl` is JSON
//  lines
//    with a "text" field; `.parquet` is Parquet; `.txt`, `.text`, `.u8` and names without an
//    extension are text. Inside directories, any other name (fortune's `.dat` index files, `.md`,
//    ...) is skipped and listed in `skipped`. A file named explicitly on the command line with an
//    unknown extension is read as text.
//  - Inputs are kept in command-line order; a missing input is NOT_FOUND naming it.
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace xv::tok {

enum class CorpusFormat { kText, kJsonl, kParquet };
enum class CorpusCompression { kNone, kGzip, kZstd };

struct CorpusFile {
  std::string path;  // as reached from the input (not resolved through symlinks)
  CorpusFormat format = CorpusFormat::kText;
  CorpusCompression compression = CorpusCompression::kNone;
  uint64_t size = 0;     // bytes on disk (compressed size for .gz/.zst)
  int64_t mtime_ns = 0;  // modification time, nanoseconds since the epoch
};

// Lists the files to read for `inputs`. `skipped` (may be null) receives paths left out by the
// directory rules above. Errors: an input that does not exist (NOT_FOUND), an unreadable directory
// (IO_ERROR), no file at all (INVALID_ARGUMENT: "no input files").
Status ListCorpusFiles(const std::vector<std::string>& inputs, std::vector<CorpusFile>* files,
                       std::vector<std::string>* skipped);

const char* CorpusFormatName(CorpusFormat format);
const char* CorpusCompressionName(CorpusCompression compression);

}  // namespace xv::tok
