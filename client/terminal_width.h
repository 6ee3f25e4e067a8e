// The width xvctl's tables fit: $COLUMNS when it holds a positive number, else the width of the
// terminal on stdout, else 80 (a pipe or a file). Thread-safety: reads the environment only.
#pragma once

#include <cstddef>

namespace xv::client {

constexpr size_t kDefaultTableWidth = 80;

// The width for tables printed to stdout (see the top of this file).
size_t TerminalColumns();

}  // namespace xv::client
