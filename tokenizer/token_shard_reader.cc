#include "tokenizer/token_shard_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tokenizer/token_shard_format.h"

namespace xv::tok {
namespace {

uint32_t GetU32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t Crc(const unsigned char* p, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    uInt chunk = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}
std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

}  // namespace

TokenShardReader::~TokenShardReader() {
  if (data_ != nullptr && size_ > 0) {
    ::munmap(const_cast<unsigned char*>(data_), size_);
  }
}

Status TokenShardReader::Open(const std::string& path, std::unique_ptr<TokenShardReader>* reader,
                              ShardVerify verify) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::string why = std::strerror(errno);
    if (errno == ENOENT) return Status::NotFound(path + ": token shard not found");
    return Status::IoError(path + ": cannot open token shard: " + why);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Status::IoError(path + ": fstat: " + why);
  }
  std::unique_ptr<TokenShardReader> r(new TokenShardReader());
  r->path_ = path;
  r->size_ = static_cast<uint64_t>(st.st_size);
  if (r->size_ > 0) {
    void* m = ::mmap(nullptr, r->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      std::string why = std::strerror(errno);
      ::close(fd);
      r->size_ = 0;
      return Status::IoError(path + ": mmap: " + why);
    }
    r->data_ = static_cast<const unsigned char*>(m);
  }
  ::close(fd);
  XV_RETURN_IF_ERROR(r->Verify(verify));
  *reader = std::move(r);
  return Status::Ok();
}

Status TokenShardReader::Verify(ShardVerify verify) {
  const std::string& p = path_;
  auto at = [&p](uint64_t offset) { return p + ": offset " + std::to_string(offset) + ": "; };
  if (size_ < kShardHeaderSize) {
    return Status::DataLoss(at(size_) + "truncated: the file is " + std::to_string(size_) +
                            " bytes, shorter than the " + std::to_string(kShardHeaderSize) +
                            "-byte header");
  }
  if (std::memcmp(data_ + kShardOffMagic, kShardMagic, sizeof(kShardMagic)) != 0) {
    return Status::DataLoss(at(kShardOffMagic) +
                            "bad magic (expected \"XVTOKSH1\"): not an xv token "
                            "shard");
  }
  const uint32_t stored_header_crc = GetU32(data_ + kShardOffHeaderCrc);
  const uint32_t header_crc = Crc(data_, kShardOffHeaderCrc);
  if (stored_header_crc != header_crc) {
    return Status::DataLoss(at(kShardOffHeaderCrc) + "header checksum mismatch (stored " +
                            Hex(stored_header_crc) + ", computed " + Hex(header_crc) +
                            "): header bytes [0, " + std::to_string(kShardOffHeaderCrc) +
                            ") are corrupted");
  }
  const uint32_t version = GetU32(data_ + kShardOffVersion);
  if (version != kShardVersion) {
    return Status::DataLoss(at(kShardOffVersion) + "unsupported shard version " +
                            std::to_string(version) + " (this build reads version " +
                            std::to_string(kShardVersion) + ")");
  }
  vocab_size_ = GetU32(data_ + kShardOffVocabSize);
  token_width_ = GetU32(data_ + kShardOffTokenWidth);
  const uint32_t block_size = GetU32(data_ + kShardOffBlockSize);
  document_count_ = GetU64(data_ + kShardOffDocumentCount);
  token_count_ = GetU64(data_ + kShardOffTokenCount);
  const uint64_t offsets_offset = GetU64(data_ + kShardOffOffsets);
  const uint64_t checksums_offset = GetU64(data_ + kShardOffChecksums);
  if (token_width_ != 2 && token_width_ != 4) {
    return Status::DataLoss(at(kShardOffTokenWidth) + "token width " +
                            std::to_string(token_width_) + " is neither 2 (uint16) nor 4 (uint32)");
  }
  if (vocab_size_ == 0 || (token_width_ == 2 && vocab_size_ > 65536)) {
    return Status::DataLoss(at(kShardOffVocabSize) + "vocab size " + std::to_string(vocab_size_) +
                            " does not fit the token dtype " +
                            (token_width_ == 2 ? "uint16 (at most 65536 ids)" : "uint32"));
  }
  if (block_size == 0 || (block_size & (block_size - 1)) != 0) {
    return Status::DataLoss(at(kShardOffBlockSize) + "checksum block size " +
                            std::to_string(block_size) + " is not a power of two");
  }
  // Sizes from the header must be consistent before anything is addressed with them.
  const uint64_t max_count = size_ / 2;
  if (token_count_ > max_count || document_count_ > max_count ||
      offsets_offset != ShardOffsetsOffset(token_count_, token_width_) ||
      checksums_offset != offsets_offset + (document_count_ + 1) * 8) {
    return Status::DataLoss(
        at(kShardOffDocumentCount) + "inconsistent header: " + std::to_string(document_count_) +
        " documents, " + std::to_string(token_count_) + " tokens, offset table at " +
        std::to_string(offsets_offset) + ", checksums at " + std::to_string(checksums_offset));
  }
  const uint64_t block_count = (checksums_offset + block_size - 1) / block_size;
  const uint64_t expected_size = checksums_offset + block_count * 4 + kShardTrailerSize;
  if (size_ < expected_size) {
    return Status::DataLoss(at(size_) + "truncated: the file is " + std::to_string(size_) +
                            " bytes but its header describes " + std::to_string(expected_size) +
                            " bytes (" + std::to_string(document_count_) + " documents, " +
                            std::to_string(token_count_) + " tokens)");
  }
  if (size_ > expected_size) {
    return Status::DataLoss(at(expected_size) + std::to_string(size_ - expected_size) +
                            " unexpected bytes after the end of the shard");
  }
  const unsigned char* trailer = data_ + size_ - kShardTrailerSize;
  if (std::memcmp(trailer + 4, kShardTrailerMagic, sizeof(kShardTrailerMagic)) != 0) {
    return Status::DataLoss(at(size_ - 4) + "bad trailer magic (expected \"XVTE\")");
  }
  const unsigned char* checksums = data_ + checksums_offset;
  const uint32_t table_crc = Crc(checksums, block_count * 4);
  if (table_crc != GetU32(trailer)) {
    return Status::DataLoss(at(checksums_offset) + "checksum table corrupted (stored " +
                            Hex(GetU32(trailer)) + ", computed " + Hex(table_crc) + ")");
  }
  if (verify == ShardVerify::kFull) {
    for (uint64_t b = 0; b < block_count; ++b) {
      const uint64_t begin = b * block_size;
      const uint64_t end = std::min<uint64_t>(begin + block_size, checksums_offset);
      const uint32_t stored = GetU32(checksums + 4 * b);
      const uint32_t computed = Crc(data_ + begin, end - begin);
      if (stored != computed) {
        return Status::DataLoss(at(begin) + "checksum mismatch in block " + std::to_string(b) +
                                " (bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "), stored " + Hex(stored) + ", computed " + Hex(computed) +
                                "): the shard is corrupted");
      }
    }
  }
  tokens_ = data_ + kShardHeaderSize;
  offsets_ = reinterpret_cast<const uint64_t*>(data_ + offsets_offset);
  if (offsets_[0] != 0 || offsets_[document_count_] != token_count_) {
    return Status::DataLoss(at(offsets_offset) + "offset table must run from 0 to " +
                            std::to_string(token_count_) + ", found " +
                            std::to_string(offsets_[0]) + ".." +
                            std::to_string(offsets_[document_count_]));
  }
  for (uint64_t d = 0; d < document_count_; ++d) {
    if (offsets_[d + 1] < offsets_[d]) {
      return Status::DataLoss(at(offsets_offset + 8 * (d + 1)) +
                              "offset table decreases at document " + std::to_string(d));
    }
  }
  if (verify == ShardVerify::kFull) {
    for (uint64_t i = 0; i < token_count_; ++i) {
      const uint32_t id = token(i);
      if (id >= vocab_size_) {
        return Status::DataLoss(at(kShardHeaderSize + i * token_width_) + "token id " +
                                std::to_string(id) + " is not below the vocab size " +
                                std::to_string(vocab_size_));
      }
    }
  }
  return Status::Ok();
}

uint32_t TokenShardReader::token(uint64_t index) const {
  if (token_width_ == 2) {
    uint16_t v;
    std::memcpy(&v, tokens_ + 2 * index, 2);
    return v;
  }
  return GetU32(tokens_ + 4 * index);
}

void TokenShardReader::CopyTokens(uint64_t begin, uint64_t count, int32_t* out) const {
  if (token_width_ == 2) {
    const unsigned char* src = tokens_ + 2 * begin;
    for (uint64_t i = 0; i < count; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      out[i] = v;
    }
  } else {
    std::memcpy(out, tokens_ + 4 * begin, count * 4);
  }
}

void TokenShardReader::ReadDocument(uint64_t doc, std::vector<int32_t>* out) const {
  const uint64_t begin = offsets_[doc];
  const uint64_t n = offsets_[doc + 1] - begin;
  out->resize(n);
  CopyTokens(begin, n, out->data());
}

}  // namespace xv::tok
