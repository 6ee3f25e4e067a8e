// Reading a corpus file's bytes, decompressing `.gz` (zlib, gzip or zlib framing, concatenated
// members allowed) and `.zst` (zstd, concatenated frames allowed) on the way. Thread-safety: free
// function, no shared state; safe to call from several threads.
#pragma once

#include <string>

#include "common/status.h"
#include "tokenizer/corpus_files.h"

namespace xv::tok {

// Replaces `bytes` with the (decompressed) content of `file`. Errors name the file and the
// compressed byte offset: corrupt or truncated compressed data (DATA_LOSS), unreadable file
// (IO_ERROR / NOT_FOUND), a Parquet file (FAILED_PRECONDITION with how to convert it to JSON lines:
// this build has no Arrow).
Status ReadCorpusFileBytes(const CorpusFile& file, std::string* bytes);

}  // namespace xv::tok
