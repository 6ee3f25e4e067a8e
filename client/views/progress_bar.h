// Progress bars for xvctl status/wait: "[##########----------]  50%".
// Thread-safety: pure function.
#pragma once

#include <string>

namespace xv::client {

// `fraction` is clamped to [0, 1]; `width` is the number of cells between the brackets.
std::string RenderProgressBar(double fraction, int width = 20);

}  // namespace xv::client
