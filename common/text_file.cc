#include "common/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace xv {
namespace {

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor when the read ends, whichever way.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

Status ReadRegularFile(const std::string& path, int64_t max_bytes, std::string* out) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status::InvalidArgument(std::string("cannot open (") + std::strerror(errno) + ")");
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(std::string(FileTypeName(st.st_mode)) + "; give a regular file");
  }
  if (st.st_size > max_bytes) {
    return Status::InvalidArgument(std::to_string(st.st_size) + " bytes, over the limit of " +
                                   std::to_string(max_bytes) + " bytes");
  }
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0)
      return Status::InvalidArgument(std::string("read failed (") + std::strerror(errno) + ")");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > static_cast<uint64_t>(max_bytes)) {  // it grew while being read
      return Status::InvalidArgument("over the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  *out = std::move(text);
  return Status::Ok();
}

Status WriteWholeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::IoError(path + ": cannot open for writing");
  f << text;
  f.close();
  if (!f) return Status::IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace xv
