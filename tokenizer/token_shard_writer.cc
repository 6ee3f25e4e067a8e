#include "tokenizer/token_shard_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "tokenizer/token_shard_format.h"

namespace xv::tok {
namespace {

constexpr size_t kWriteBufferBytes = 4 << 20;

std::string ErrnoText() { return std::strerror(errno); }

void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(dir + ": cannot open directory to fsync: " + ErrnoText());
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IoError(dir + ": fsync: " + ErrnoText());
  return Status::Ok();
}

}  // namespace

Status TokenShardWriter::Create(const std::string& path, uint64_t vocab_size,
                                std::unique_ptr<TokenShardWriter>* writer) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards are little-endian");
  if (vocab_size == 0 || vocab_size > 0xFFFFFFFFull) {
    return Status::InvalidArgument(path + ": vocab_size must be in [1, 2^32 - 1], got " +
                                   std::to_string(vocab_size));
  }
  std::string temp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return Status::IoError(path + ": cannot create temporary shard: " + ErrnoText());
  writer->reset(new TokenShardWriter(path, temp, vocab_size, fd));
  char header[kShardHeaderSize] = {};
  return (*writer)->WriteAll(header, sizeof(header));
}

TokenShardWriter::TokenShardWriter(std::string path, std::string temp_path, uint64_t vocab_size,
                                   int fd)
    : path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      vocab_size_(vocab_size),
      token_width_(ShardTokenWidthForVocab(vocab_size)),
      fd_(fd) {
  buffer_.reserve(kWriteBufferBytes);
}

TokenShardWriter::~TokenShardWriter() {
  if (!finished_) Abandon();
}

void TokenShardWriter::Abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  ::unlink(temp_path_.c_str());
  failed_ = true;
}

Status TokenShardWriter::WriteAll(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status st = Status::IoError(temp_path_ + ": write: " + ErrnoText());
      Abandon();
      return st;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status TokenShardWriter::FlushBuffer() {
  Status st = WriteAll(buffer_.data(), buffer_.size());
  buffer_.clear();
  return st;
}

Status TokenShardWriter::AddDocument(const int32_t* ids, size_t count) {
  if (failed_ || finished_) {
    return Status::FailedPrecondition(path_ + ": writer already failed or finished");
  }
  for (size_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= vocab_size_) {
      Status st = Status::InvalidArgument(path_ + ": document " + std::to_string(document_count()) +
                                          " position " + std::to_string(i) + ": token id " +
                                          std::to_string(ids[i]) + " outside [0, " +
                                          std::to_string(vocab_size_) + ")");
      Abandon();
      return st;
    }
  }
  size_t old = buffer_.size();
  buffer_.resize(old + count * token_width_);
  char* out = buffer_.data() + old;
  if (token_width_ == 2) {
    for (size_t i = 0; i < count; ++i) {
      uint16_t v = static_cast<uint16_t>(ids[i]);
      std::memcpy(out + 2 * i, &v, 2);
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      uint32_t v = static_cast<uint32_t>(ids[i]);
      std::memcpy(out + 4 * i, &v, 4);
    }
  }
  offsets_.push_back(offsets_.back() + count);
  if (buffer_.size() >= kWriteBufferBytes) return FlushBuffer();
  return Status::Ok();
}

Status TokenShardWriter::Finish() {
  if (failed_ || finished_) {
    return Status::FailedPrecondition(path_ + ": writer already failed or finished");
  }
  const uint64_t tokens_end = kShardHeaderSize + token_count() * token_width_;
  const uint64_t offsets_offset = ShardOffsetsOffset(token_count(), token_width_);
  buffer_.resize(buffer_.size() + (offsets_offset - tokens_end), 0);
  XV_RETURN_IF_ERROR(FlushBuffer());
  XV_RETURN_IF_ERROR(WriteAll(offsets_.data(), offsets_.size() * sizeof(uint64_t)));
  const uint64_t checksums_offset = offsets_offset + offsets_.size() * sizeof(uint64_t);

  char header[kShardHeaderSize] = {};
  std::memcpy(header + kShardOffMagic, kShardMagic, sizeof(kShardMagic));
  PutU32(header + kShardOffVersion, kShardVersion);
  PutU32(header + kShardOffVocabSize, static_cast<uint32_t>(vocab_size_));
  PutU32(header + kShardOffTokenWidth, token_width_);
  PutU32(header + kShardOffBlockSize, kShardBlockSize);
  PutU64(header + kShardOffDocumentCount, document_count());
  PutU64(header + kShardOffTokenCount, token_count());
  PutU64(header + kShardOffOffsets, offsets_offset);
  PutU64(header + kShardOffChecksums, checksums_offset);
  PutU32(header + kShardOffFlags, 0);
  PutU32(
      header + kShardOffHeaderCrc,
      static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(header), kShardOffHeaderCrc)));
  if (::pwrite(fd_, header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header))) {
    Status st = Status::IoError(temp_path_ + ": write header: " + ErrnoText());
    Abandon();
    return st;
  }

  // Block checksums over everything written so far (read back from the page cache).
  std::vector<uint32_t> checksums;
  std::vector<char> block(kShardBlockSize);
  for (uint64_t start = 0; start < checksums_offset; start += kShardBlockSize) {
    size_t want =
        static_cast<size_t>(std::min<uint64_t>(kShardBlockSize, checksums_offset - start));
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd_, block.data() + got, want - got, static_cast<off_t>(start + got));
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        Status st = Status::IoError(temp_path_ + ": read back for checksum: " + ErrnoText());
        Abandon();
        return st;
      }
      got += static_cast<size_t>(n);
    }
    checksums.push_back(static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(block.data()), static_cast<uInt>(want))));
  }
  XV_RETURN_IF_ERROR(WriteAll(checksums.data(), checksums.size() * sizeof(uint32_t)));
  char trailer[kShardTrailerSize];
  PutU32(trailer, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(checksums.data()),
                                              static_cast<uInt>(checksums.size() * 4))));
  std::memcpy(trailer + 4, kShardTrailerMagic, sizeof(kShardTrailerMagic));
  XV_RETURN_IF_ERROR(WriteAll(trailer, sizeof(trailer)));

  if (::fsync(fd_) != 0) {
    Status st = Status::IoError(temp_path_ + ": fsync: " + ErrnoText());
    Abandon();
    return st;
  }
  ::fchmod(fd_, 0644);
  ::close(fd_);
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    Status st = Status::IoError(path_ + ": rename from " + temp_path_ + ": " + ErrnoText());
    Abandon();
    return st;
  }
  finished_ = true;
  return SyncDirectory(DirectoryOf(path_));
}

Status WriteTokenShard(const std::string& path, uint64_t vocab_size,
                       const std::vector<std::vector<int32_t>>& documents) {
  std::unique_ptr<TokenShardWriter> writer;
  XV_RETURN_IF_ERROR(TokenShardWriter::Create(path, vocab_size, &writer));
  for (const auto& doc : documents) XV_RETURN_IF_ERROR(writer->AddDocument(doc));
  return writer->Finish();
}

}  // namespace xv::tok
