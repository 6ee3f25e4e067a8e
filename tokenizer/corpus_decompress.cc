#include "tokenizer/corpus_decompress.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace xv::tok {
namespace {

Status ReadRaw(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return Status::NotFound(path + ": not found");
    return Status::IoError(path + ": cannot open: " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read error");
  *out = std::move(ss).str();
  return Status::Ok();
}

Status Gunzip(const std::string& path, const std::string& in, std::string* out) {
  out->clear();
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Status::Internal(path + ": inflateInit2 failed");
  const Bytef* base = reinterpret_cast<const Bytef*>(in.data());
  zs.next_in = const_cast<Bytef*>(base);
  zs.avail_in = 0;
  // zlib counts input in uInt: feed at most 1 GiB at a time.
  auto position = [&] { return static_cast<uint64_t>(zs.next_in - base); };
  auto refill = [&] {
    if (zs.avail_in == 0) {
      zs.avail_in = static_cast<uInt>(std::min<uint64_t>(in.size() - position(), 1u << 30));
    }
  };
  char buf[1 << 16];
  Status status;
  bool stream_ended = false;
  while (true) {
    refill();
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    const uint64_t offset = position();
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out->append(buf, sizeof(buf) - zs.avail_out);
    if (rc == Z_STREAM_END) {
      stream_ended = true;
      if (position() == in.size()) break;
      inflateReset(&zs);  // another gzip member follows
      stream_ended = false;
      continue;
    }
    const bool input_exhausted = zs.avail_in == 0 && position() == in.size();
    if (rc == Z_BUF_ERROR && input_exhausted) break;  // the data ends mid-stream
    if (rc != Z_OK) {
      status =
          Status::DataLoss(path + ": corrupt gzip data at compressed byte offset " +
                           std::to_string(offset) + ": " + (zs.msg ? zs.msg : "inflate error"));
      break;
    }
    if (input_exhausted && zs.avail_out != 0) break;
  }
  if (status.ok() && !stream_ended) {
    status = Status::DataLoss(path +
                              ": truncated gzip data: the stream ends at compressed byte offset " +
                              std::to_string(in.size()) + " before its end marker");
  }
  inflateEnd(&zs);
  return status;
}

Status Unzstd(const std::string& path, const std::string& in, std::string* out) {
  out->clear();
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  if (dctx == nullptr) return Status::Internal(path + ": ZSTD_createDCtx failed");
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  std::string buf(ZSTD_DStreamOutSize(), '\0');
  size_t last = 0;
  Status status;
  while (input.pos < input.size) {
    ZSTD_outBuffer output{buf.data(), buf.size(), 0};
    const size_t before = input.pos;
    last = ZSTD_decompressStream(dctx, &output, &input);
    if (ZSTD_isError(last)) {
      status = Status::DataLoss(path + ": corrupt zstd data at compressed byte offset " +
                                std::to_string(before) + ": " + ZSTD_getErrorName(last));
      break;
    }
    out->append(buf.data(), output.pos);
  }
  // Drain anything still buffered inside the decoder.
  while (status.ok() && last != 0) {
    ZSTD_outBuffer output{buf.data(), buf.size(), 0};
    last = ZSTD_decompressStream(dctx, &output, &input);
    if (ZSTD_isError(last)) {
      status =
          Status::DataLoss(path + ": corrupt zstd data: " + std::string(ZSTD_getErrorName(last)));
      break;
    }
    out->append(buf.data(), output.pos);
    if (output.pos == 0) break;
  }
  if (status.ok() && last != 0) {
    status =
        Status::DataLoss(path + ": truncated zstd data: the frame ends at compressed byte offset " +
                         std::to_string(in.size()) + " before it is complete");
  }
  ZSTD_freeDCtx(dctx);
  return status;
}

}  // namespace

Status ReadCorpusFileBytes(const CorpusFile& file, std::string* bytes) {
  if (file.format == CorpusFormat::kParquet) {
    return Status::FailedPrecondition(
        file.path +
        ": Parquet input needs Apache Arrow, which was not found when xv was built. Convert it to "
        "JSON "
        "lines with a \"text\" field and pass the .jsonl instead, e.g.: python3 -c 'import sys, "
        "json, "
        "pyarrow.parquet as pq; [print(json.dumps({\"text\": t})) for t in "
        "pq.read_table(sys.argv[1], columns=[\"text\"]).column(\"text\").to_pylist()]' " +
        file.path + " | zstd > " + file.path + ".jsonl.zst");
  }
  if (file.compression == CorpusCompression::kNone) return ReadRaw(file.path, bytes);
  std::string raw;
  XV_RETURN_IF_ERROR(ReadRaw(file.path, &raw));
  if (file.compression == CorpusCompression::kGzip) return Gunzip(file.path, raw, bytes);
  return Unzstd(file.path, raw, bytes);
}

}  // namespace xv::tok
