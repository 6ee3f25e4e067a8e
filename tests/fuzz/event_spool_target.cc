// Fuzz target: recovery of the worker's on-disk event spool (worker/event_spool.h).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "fuzz_driver.h"
#include "fuzz_targets.h"
#include "worker/event_spool.h"

namespace xv::fuzz {

namespace {

namespace fs = std::filesystem;

constexpr size_t kMagicBytes = 8;   // "XVSPOOL1"
constexpr size_t kHeaderBytes = 9;  // u32 length, u32 crc32, u8 kind

// The spool directory of this process, removed at exit. Recovery fsyncs what it cuts back: on
// tmpfs (/dev/shm where there is one) that costs nothing, so more inputs run.
class ScratchSpoolDir {
 public:
  ScratchSpoolDir() {
    spdlog::set_level(spdlog::level::off);  // every dropped record is a warning
#if GOOGLE_PROTOBUF_VERSION < 4022000
    google::protobuf::SetLogHandler(nullptr);  // and so is every invalid UTF-8 string field
#endif
    std::error_code ec;
    const fs::path base =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    path_ = (base / ("xv-fuzz-spool-" + std::to_string(::getpid()))).string();
    fs::create_directories(path_);
  }
  ~ScratchSpoolDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::string& ScratchDir() {
  static const ScratchSpoolDir dir;
  return dir.path();
}

uint32_t GetU32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

void PutU32(std::string* s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*s)[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Gives every complete record a correct CRC, so that mutated payloads reach the parser.
void FixCrcs(std::string* file) {
  size_t offset = kMagicBytes;
  while (offset + kHeaderBytes <= file->size()) {
    const uint32_t len = GetU32(*file, offset);
    if (len > file->size() - offset - kHeaderBytes) break;
    uint32_t crc = worker::SpoolCrc32(file->data() + offset + 8, 1);
    crc = worker::SpoolCrc32(file->data() + offset + kHeaderBytes, len, crc);
    PutU32(file, offset + 4, crc);
    offset += kHeaderBytes + len;
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

Status RecoverOnce(const std::string& dir, std::vector<worker::SpooledAttempt>* attempts,
                   std::vector<std::string>* warnings) {
  std::unique_ptr<worker::EventSpool> spool;
  XV_RETURN_IF_ERROR(worker::EventSpool::Open(dir, &spool));
  return spool->Recover(attempts, warnings);
}

}  // namespace

int FuzzEventSpool(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string dir = ScratchDir();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename() != "lock") fs::remove(e.path(), ec);
  }
  std::string content(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) FixCrcs(&content);
  const std::string path = dir + "/exp-7-a1.spool";
  std::ofstream(path, std::ios::binary) << content;

  std::vector<worker::SpooledAttempt> first;
  std::vector<std::string> warnings;
  const Status st = RecoverOnce(dir, &first, &warnings);
  XV_FUZZ_CHECK(st.ok(), "Recover failed on a readable file: " + st.ToString());
  XV_FUZZ_CHECK(first.size() <= 1, "one file gave several attempts");
  if (first.empty()) {
    // Refused as a whole: torn at creation (deleted) or bad magic (renamed aside).
    XV_FUZZ_CHECK(!warnings.empty(), "a file was dropped without a warning");
    XV_FUZZ_CHECK(!fs::exists(path), "a dropped file is still in the spool");
    return 0;
  }
  const worker::SpooledAttempt& a = first[0];
  XV_FUZZ_CHECK(a.experiment_id == 7 && a.attempt == 1, "the attempt's key changed");
  for (const auto& m : a.messages) {
    XV_FUZZ_CHECK(m.has_event() || m.has_finished(), "a recovered message is neither kind");
    if (m.has_event()) {
      XV_FUZZ_CHECK(m.event().experiment_id() == 7 && m.event().attempt() == 1,
                    "an event of another attempt was recovered");
      XV_FUZZ_CHECK(m.event().seq() > a.acked_seq, "an acknowledged event was recovered");
    }
  }
  const std::string kept = ReadFile(path);
  XV_FUZZ_CHECK(kept.size() <= content.size() && content.compare(0, kept.size(), kept) == 0,
                "the recovered file is not a prefix of what was there");
  XV_FUZZ_CHECK(warnings.empty() == (kept.size() == content.size()),
                "a file was cut back without a warning, or warned about and left whole");

  // What recovery kept reads back whole: nothing more to drop, the same messages.
  std::vector<worker::SpooledAttempt> second;
  std::vector<std::string> warnings2;
  const Status st2 = RecoverOnce(dir, &second, &warnings2);
  XV_FUZZ_CHECK(st2.ok(), "the second Recover failed: " + st2.ToString());
  XV_FUZZ_CHECK(warnings2.empty(), "the second Recover dropped more: " +
                                       (warnings2.empty() ? std::string() : warnings2[0]));
  XV_FUZZ_CHECK(second.size() == 1 && second[0].messages.size() == a.messages.size() &&
                    second[0].finished == a.finished && second[0].acked_seq == a.acked_seq,
                "the second Recover found something else");
  return 0;
}

}  // namespace xv::fuzz
