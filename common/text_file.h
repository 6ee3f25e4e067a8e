// Reading a whole small file that a person or an agent names (a recipe, a policy): a regular file
// only, bounded in size, and never blocking on a FIFO without a writer. Writing a whole file.
// Thread-safety: pure functions (each reads one file).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace xv {

// Reads the regular file at `path` (at most `max_bytes`) into *out. Anything else and any failure
// is InvalidArgument with a message that says why but neither names the path (the caller names it
// with the field or flag it came from) nor holds the file's bytes:
//   "cannot open (<strerror>)", "a directory; give a regular file" (also a FIFO, a character
//   device, a block device, a socket, not a regular file), "<n> bytes, over the limit of <max>
//   bytes", "over the limit of <max> bytes" (it grew while read), "read failed (<strerror>)".
// *out is unchanged on error.
Status ReadRegularFile(const std::string& path, int64_t max_bytes, std::string* out);

// Creates or truncates the file at `path` and writes `text` to it. IoError naming the path when
// it cannot be opened or the write fails.
Status WriteWholeFile(const std::string& path, const std::string& text);

}  // namespace xv
