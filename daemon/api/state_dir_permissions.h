// Permissions of xvd's state directory (issue 11): the database holds every result, recipe and
// failure detail of every user of the box, so other local accounts must not read it. The state
// directory is kept at most 0750 and the database files (xv.db, xv.db-wal, xv.db-shm) at most 0640,
// whatever the process umask: bits beyond those are removed (never added). xvd also sets umask 027
// at start (main.cc), and the systemd unit says StateDirectoryMode=0750 and UMask=0027.
// Thread-safety: plain functions over the file system.
#pragma once

#include <string>

#include "common/status.h"

namespace xv::daemon {

// The state directory's mode at most 0750 (group write and every bit for others removed).
// IoError naming the path when it cannot be read or changed.
Status RestrictStateDirPermissions(const std::string& state_dir);

// `db_path` and its -wal and -shm files, those that exist, at most 0640. SQLite gives the -wal
// and -shm files it creates later the mode of the database file, so one call after opening is
// enough. IoError naming the file when one cannot be changed.
Status RestrictDatabaseFilePermissions(const std::string& db_path);

}  // namespace xv::daemon
