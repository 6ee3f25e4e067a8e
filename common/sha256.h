// SHA-256 of a byte string (OpenSSL's libcrypto). Thread-safety: pure function.
#pragma once

#include <string>

namespace xv {

// Lower-case hex SHA-256 (64 characters) of `bytes`.
std::string Sha256Hex(const std::string& bytes);

}  // namespace xv
