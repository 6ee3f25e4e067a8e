// On-disk layout of an xv token shard (`*.xvt`), shared by TokenShardWriter and TokenShardReader.
// docs/data.md describes the format for people; this header is the single source of its numbers.
// All integers are little-endian. Layout:
//
//   [0, 64)            header (see the offsets below)
//   [64, ...)          tokens: token_count ids of token_width bytes (uint16 or uint32), zero padded
//   to 8 offsets_offset     uint64[document_count + 1]: document i is tokens [off[i], off[i+1])
//   checksums_offset   uint32[ceil(checksums_offset / block_size)]: zlib crc32 of each
//   block_size-byte
//                      block of the file before the checksum table (the last block may be short)
//   end - 8            uint32 crc32 of the checksum table, then the 4 bytes "XVTE"
#pragma once

#include <cstdint>

namespace xv::tok {

inline constexpr char kShardMagic[8] = {'X', 'V', 'T', 'O', 'K', 'S', 'H', '1'};
inline constexpr char kShardTrailerMagic[4] = {'X', 'V', 'T', 'E'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint32_t kShardHeaderSize = 64;
inline constexpr uint32_t kShardTrailerSize = 8;
inline constexpr uint32_t kShardBlockSize = 1 << 16;

// Byte offsets of the header fields.
inline constexpr uint32_t kShardOffMagic = 0;           // char[8]
inline constexpr uint32_t kShardOffVersion = 8;         // uint32
inline constexpr uint32_t kShardOffVocabSize = 12;      // uint32
inline constexpr uint32_t kShardOffTokenWidth = 16;     // uint32: 2 or 4
inline constexpr uint32_t kShardOffBlockSize = 20;      // uint32
inline constexpr uint32_t kShardOffDocumentCount = 24;  // uint64
inline constexpr uint32_t kShardOffTokenCount = 32;     // uint64
inline constexpr uint32_t kShardOffOffsets = 40;        // uint64: offsets_offset
inline constexpr uint32_t kShardOffChecksums = 48;      // uint64: checksums_offset
inline constexpr uint32_t kShardOffFlags = 56;          // uint32: 0
inline constexpr uint32_t kShardOffHeaderCrc = 60;      // uint32: crc32 of bytes [0, 60)

// The token width a vocabulary needs: 2 bytes when every id fits uint16 (vocab_size <= 65536),
// else 4.
inline constexpr uint32_t ShardTokenWidthForVocab(uint64_t vocab_size) {
  return vocab_size <= 65536 ? 2 : 4;
}

// Where the offset table starts for `token_count` tokens of `token_width` bytes (8-byte aligned).
inline constexpr uint64_t ShardOffsetsOffset(uint64_t token_count, uint32_t token_width) {
  return (kShardHeaderSize + token_count * token_width + 7) / 8 * 8;
}

}  // namespace xv::tok
