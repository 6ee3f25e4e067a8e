// Bearer tokens of xvd (docs/operations.md § Authentication and TLS): how one is made, how it is
// stored, and where a client finds its own.
//
// A token is "xv_" + 64 lower-case hex characters (32 bytes from OpenSSL's RAND_bytes). xvd stores
// only its SHA-256 (Sha256Hex of the whole text); the text is shown once, when it is created.
// Clients (xvctl, xv-worker, `xvctl mcp`) read their token from a file or the environment, never
// from the command line (where `ps` would show it to every local user).
// Thread-safety: pure functions, except that ReadClientToken reads the environment and a file.
#pragma once

#include <string>

#include "common/status.h"

namespace xv {

// A new random token. Internal when the system's random source fails.
Status GenerateBearerToken(std::string* token);
// What the tokens table stores for `token`: its lower-case hex SHA-256.
std::string HashBearerToken(const std::string& token);

// The client's token: the first line of `token_file` when it is not empty (a --token-file flag),
// else of the file named by $XV_TOKEN_FILE, else $XV_TOKEN; "" when none is set (the call goes
// without a token). Whitespace around the token is dropped. IoError naming the file (and the flag
// or variable that named it) when it cannot be read, InvalidArgument when it is empty.
Status ReadClientToken(const std::string& token_file, std::string* token);

}  // namespace xv
