#include "worker/event_spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace xv::worker {
namespace {

constexpr char kMagic[] = "XVSPOOL1";
constexpr size_t kMagicBytes = 8;
constexpr size_t kRecordHeaderBytes = 9;  // u32 length, u32 crc32, u8 kind

constexpr char kQuarantineMagic[] = "XVQUAR01";

enum RecordKind : uint8_t {
  kEventRecord = 1,
  kFinishedRecord = 2,
  kAckRecord = 3,
  kReasonRecord = 4  // quarantine files only
};

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string EncodeRecord(RecordKind kind, const std::string& payload) {
  std::string rec;
  rec.reserve(kRecordHeaderBytes + payload.size());
  PutU32(&rec, static_cast<uint32_t>(payload.size()));
  const char k = static_cast<char>(kind);
  uint32_t crc = SpoolCrc32(&k, 1);
  crc = SpoolCrc32(payload.data(), payload.size(), crc);
  PutU32(&rec, crc);
  rec.push_back(k);
  rec += payload;
  return rec;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(Errno(path + ": write"));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(Errno(dir + ": open for fsync"));
  int r = ::fsync(fd);
  ::close(fd);
  if (r != 0) return Status::IoError(Errno(dir + ": fsync"));
  return Status::Ok();
}

bool KeyOfMessage(const v1::WorkerMessage& msg, int64_t* exp, int32_t* att) {
  if (msg.has_event()) {
    *exp = msg.event().experiment_id();
    *att = msg.event().attempt();
    return true;
  }
  if (msg.has_finished()) {
    *exp = msg.finished().experiment_id();
    *att = msg.finished().attempt();
    return true;
  }
  return false;
}

void Warn(const std::string& text, std::vector<std::string>* warnings) {
  spdlog::warn("{}", text);
  warnings->push_back(text);
}

// The spool files of `dir` as (experiment, attempt) and path, ordered by key. Deletes the temp
// files of a compaction that did not reach its rename (the original is intact) and skips names
// whose numbers are out of range (not a file this worker wrote).
Status ListSpoolFiles(const std::string& dir, std::vector<std::string>* warnings,
                      std::vector<std::pair<std::pair<int64_t, int32_t>, std::string>>* found) {
  const std::regex name_re(R"(exp-(\d+)-a(\d+)\.spool)");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      std::error_code remove_ec;  // a temp file left behind is harmless
      std::filesystem::remove(entry.path(), remove_ec);
      continue;
    }
    if (!std::regex_match(name, m, name_re)) continue;
    // Numbers beyond what an experiment id or attempt can be (std::stoll would throw out of
    // Recover): not a file this worker wrote; leave it alone.
    errno = 0;
    const long long experiment = std::strtoll(m[1].str().c_str(), nullptr, 10);
    const long long attempt = std::strtoll(m[2].str().c_str(), nullptr, 10);
    if (errno == ERANGE || attempt > INT32_MAX) {
      Warn(
          "spool " + entry.path().string() + ": experiment or attempt number out of range; ignored",
          warnings);
      continue;
    }
    found->push_back({{experiment, static_cast<int32_t>(attempt)}, entry.path().string()});
  }
  if (ec) return Status::IoError(dir + ": cannot list the spool directory: " + ec.message());
  std::sort(found->begin(), found->end());
  return Status::Ok();
}

Status ReadWholeFile(const std::string& path, std::string* data) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(Errno(path + ": cannot open"));
  std::stringstream buf;
  buf << in.rdbuf();
  *data = buf.str();
  return Status::Ok();
}

// False (with a warning) for a file without the spool magic: one torn at creation is deleted, any
// other renamed to <file>.unreadable.
bool StartsWithSpoolMagic(const std::string& path, const std::string& data,
                          std::vector<std::string>* warnings) {
  if (data.size() >= kMagicBytes && data.compare(0, kMagicBytes, kMagic, kMagicBytes) == 0) {
    return true;
  }
  std::error_code ec;  // the warning says what was meant; a failure leaves the file to be skipped
  if (data.size() < kMagicBytes && data.compare(0, data.size(), kMagic, data.size()) == 0) {
    Warn(
        "spool " + path + ": torn at creation (" + std::to_string(data.size()) + " bytes); deleted",
        warnings);
    std::filesystem::remove(path, ec);
  } else {
    Warn("spool " + path + ": not a spool file (bad magic); renamed to " + path +
             ".unreadable and ignored",
         warnings);
    std::filesystem::rename(path, path + ".unreadable", ec);
  }
  return false;
}

// Applies one record of `kind` to *sa (events past the acked seq kept, the Finished kept, an ack
// dropping the events it covers). False when the payload does not parse or belongs elsewhere.
bool ApplyRecord(uint8_t kind, const char* payload, uint32_t len,
                 const std::pair<int64_t, int32_t>& key, SpooledAttempt* sa) {
  if (kind == kEventRecord || kind == kFinishedRecord) {
    v1::WorkerMessage msg;
    int64_t exp = 0;
    int32_t att = 0;
    const bool parsed = msg.ParseFromArray(payload, static_cast<int>(len)) &&
                        KeyOfMessage(msg, &exp, &att) && exp == key.first && att == key.second &&
                        (kind == kEventRecord) == msg.has_event();
    if (parsed && msg.has_event()) {
      sa->last_seq = std::max(sa->last_seq, msg.event().seq());
      if (msg.event().seq() > sa->acked_seq) sa->messages.push_back(std::move(msg));
    } else if (parsed) {
      sa->last_seq = std::max(sa->last_seq, msg.finished().last_seq());
      sa->finished = true;
      sa->messages.push_back(std::move(msg));
    }
    return parsed;
  }
  if (kind != kAckRecord) return false;
  v1::EventAck ack;
  if (!ack.ParseFromArray(payload, static_cast<int>(len))) return false;
  if (ack.seq() > sa->acked_seq) {
    sa->acked_seq = ack.seq();
    sa->messages.erase(std::remove_if(sa->messages.begin(), sa->messages.end(),
                                      [&](const v1::WorkerMessage& m) {
                                        return m.has_event() && m.event().seq() <= ack.seq();
                                      }),
                       sa->messages.end());
  }
  return true;
}

}  // namespace

// What ReadRecords made of one spool file.
struct EventSpool::RecoveredFile {
  SpooledAttempt attempt;
  size_t records = 0;    // whole records read
  size_t end = 0;        // offset of the first record dropped (or the file size)
  std::string problem;   // empty: the file ends cleanly
  bool corrupt = false;  // a CRC, length or parse failure (not a torn tail)
};

EventSpool::RecoveredFile EventSpool::ReadRecords(const Key& key, const std::string& path,
                                                  const std::string& data) {
  RecoveredFile r;
  r.attempt.experiment_id = key.first;
  r.attempt.attempt = key.second;
  r.attempt.path = path;
  size_t offset = kMagicBytes;
  while (offset < data.size()) {
    const size_t left = data.size() - offset;
    if (left < kRecordHeaderBytes) {
      r.problem = "torn record";
      break;
    }
    const uint32_t len = GetU32(data.data() + offset);
    const uint32_t crc = GetU32(data.data() + offset + 4);
    const uint8_t kind = static_cast<uint8_t>(data[offset + 8]);
    if (len > kMaxRecordBytes) {
      r.problem = "record with an implausible length " + std::to_string(len);
      r.corrupt = true;
      break;
    }
    if (left < kRecordHeaderBytes + len) {
      r.problem = "torn record";
      break;
    }
    const char* payload = data.data() + offset + kRecordHeaderBytes;
    uint32_t want = SpoolCrc32(data.data() + offset + 8, 1);
    want = SpoolCrc32(payload, len, want);
    if (want != crc) {
      r.problem = "record failing its CRC32 check";
      r.corrupt = true;
      break;
    }
    if (!ApplyRecord(kind, payload, len, key, &r.attempt)) {
      r.problem = "record that does not parse (kind " + std::to_string(kind) + ")";
      r.corrupt = true;
      break;
    }
    offset += kRecordHeaderBytes + len;
    ++r.records;
  }
  r.end = offset;
  return r;
}

Status EventSpool::CutAtProblem(const std::string& path, size_t size, const RecoveredFile& r,
                                std::vector<std::string>* warnings) {
  if (r.problem.empty()) return Status::Ok();
  std::string text = "spool " + path + ": " + r.problem + " at offset " + std::to_string(r.end) +
                     "; dropped it and the " + std::to_string(size - r.end) +
                     " bytes to the end of the file";
  if (r.corrupt) {
    std::error_code ec;  // a failed copy loses only the copy for inspection
    std::filesystem::copy_file(path, path + ".corrupt",
                               std::filesystem::copy_options::overwrite_existing, ec);
    text += " (the file as found is kept in " + path + ".corrupt)";
  }
  Warn(text, warnings);
  if (::truncate(path.c_str(), static_cast<off_t>(r.end)) != 0) {
    return Status::IoError(Errno(path + ": truncate to " + std::to_string(r.end)));
  }
  return Status::Ok();
}

uint32_t SpoolCrc32(const void* data, size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// One attempt's file, open for appending. Shared with SyncDirty so that a rewrite or a removal
// never closes a descriptor that is being synced.
struct EventSpool::File {
  std::string path;
  int fd = -1;
  size_t records = 0;     // records in the file (events, finished, acks)
  int64_t acked_seq = 0;  // the highest ack recorded
  bool dirty = false;     // appended to since the last sync; guarded by EventSpool::mu_
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

Status EventSpool::Open(const std::string& dir, std::unique_ptr<EventSpool>* out) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create the spool directory: " + ec.message());
  if (::access(dir.c_str(), W_OK) != 0) {
    return Status::IoError(Errno(dir + ": the spool directory is not writable"));
  }
  const std::string lock_path = dir + "/lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return Status::IoError(Errno(lock_path + ": open"));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {0};
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    ::close(fd);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK) {
      return Status::FailedPrecondition(dir + ": another xv-worker (pid " + holder +
                                        ") uses this spool directory; give each worker its own "
                                        "--work-dir");
    }
    errno = err;
    return Status::IoError(Errno(lock_path + ": flock"));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    spdlog::warn("{}: cannot record this worker's pid", lock_path);
  }
  out->reset(new EventSpool(dir, fd));
  return Status::Ok();
}

EventSpool::~EventSpool() {
  (void)SyncDirty();
  files_.clear();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string EventSpool::PathOf(int64_t experiment_id, int32_t attempt) const {
  return dir_ + "/exp-" + std::to_string(experiment_id) + "-a" + std::to_string(attempt) + ".spool";
}

std::string EventSpool::QuarantinePathOf(int64_t experiment_id, int32_t attempt) const {
  return dir_ + "/exp-" + std::to_string(experiment_id) + "-a" + std::to_string(attempt) +
         ".quarantine";
}

size_t EventSpool::open_files() const {
  MutexLock lock(&mu_);
  return files_.size();
}

Status EventSpool::Recover(std::vector<SpooledAttempt>* attempts,
                           std::vector<std::string>* warnings) {
  attempts->clear();
  MutexLock lock(&mu_);
  std::vector<std::pair<Key, std::string>> found;
  XV_RETURN_IF_ERROR(ListSpoolFiles(dir_, warnings, &found));
  for (const auto& [key, path] : found) {
    std::string data;
    XV_RETURN_IF_ERROR(ReadWholeFile(path, &data));
    if (!StartsWithSpoolMagic(path, data, warnings)) continue;
    RecoveredFile recovered = ReadRecords(key, path, data);
    XV_RETURN_IF_ERROR(CutAtProblem(path, data.size(), recovered, warnings));
    XV_RETURN_IF_ERROR(ReopenRecoveredLocked(key, path, recovered));
    attempts->push_back(std::move(recovered.attempt));
  }
  return Status::Ok();
}

Status EventSpool::ReopenRecoveredLocked(const Key& key, const std::string& path,
                                         const RecoveredFile& recovered) {
  auto file = std::make_shared<File>();
  file->path = path;
  file->fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (file->fd < 0) return Status::IoError(Errno(path + ": open for appending"));
  if (!recovered.problem.empty() && ::fdatasync(file->fd) != 0) {
    return Status::IoError(Errno(path + ": fdatasync"));
  }
  file->records = recovered.records;
  file->acked_seq = recovered.attempt.acked_seq;
  files_[key] = file;
  return Status::Ok();
}

Status EventSpool::OpenForAppendLocked(const Key& key, std::shared_ptr<File>* out) {
  auto it = files_.find(key);
  if (it != files_.end()) {
    *out = it->second;
    return Status::Ok();
  }
  auto file = std::make_shared<File>();
  file->path = PathOf(key.first, key.second);
  file->fd = ::open(file->path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (file->fd < 0) return Status::IoError(Errno(file->path + ": create"));
  struct stat st {};
  if (::fstat(file->fd, &st) != 0) return Status::IoError(Errno(file->path + ": fstat"));
  if (st.st_size == 0) {
    XV_RETURN_IF_ERROR(WriteAll(file->fd, std::string(kMagic, kMagicBytes), file->path));
    if (::fdatasync(file->fd) != 0) return Status::IoError(Errno(file->path + ": fdatasync"));
    XV_RETURN_IF_ERROR(SyncDirectory(dir_));
  }
  files_[key] = file;
  *out = file;
  return Status::Ok();
}

Status EventSpool::Append(const v1::WorkerMessage& msg) {
  Key key;
  if (!KeyOfMessage(msg, &key.first, &key.second)) {
    return Status::InvalidArgument("spool: only events and Finished messages are spooled");
  }
  const RecordKind kind = msg.has_event() ? kEventRecord : kFinishedRecord;
  const std::string rec = EncodeRecord(kind, msg.SerializeAsString());
  MutexLock lock(&mu_);
  std::shared_ptr<File> file;
  XV_RETURN_IF_ERROR(OpenForAppendLocked(key, &file));
  XV_RETURN_IF_ERROR(WriteAll(file->fd, rec, file->path));
  ++file->records;
  if (kind == kFinishedRecord) {
    if (::fdatasync(file->fd) != 0) return Status::IoError(Errno(file->path + ": fdatasync"));
    file->dirty = false;
  } else {
    file->dirty = true;
  }
  return Status::Ok();
}

Status EventSpool::Acknowledge(int64_t experiment_id, int32_t attempt, int64_t seq,
                               const std::vector<v1::WorkerMessage>& still_held) {
  const Key key{experiment_id, attempt};
  MutexLock lock(&mu_);
  auto it = files_.find(key);
  if (it == files_.end() || seq <= it->second->acked_seq) return Status::Ok();
  std::shared_ptr<File> file = it->second;
  v1::EventAck ack;
  ack.set_experiment_id(experiment_id);
  ack.set_attempt(attempt);
  ack.set_seq(seq);
  XV_RETURN_IF_ERROR(
      WriteAll(file->fd, EncodeRecord(kAckRecord, ack.SerializeAsString()), file->path));
  ++file->records;
  file->acked_seq = seq;
  const size_t dead = file->records > still_held.size() ? file->records - still_held.size() : 0;
  if (dead >= kCompactMinAcked && dead > still_held.size()) {
    return RewriteLocked(key, still_held);
  }
  return Status::Ok();
}

Status EventSpool::RewriteLocked(const Key& key, const std::vector<v1::WorkerMessage>& keep) {
  std::shared_ptr<File> old = files_[key];
  const std::string tmp = old->path + ".tmp";
  std::string data(kMagic, kMagicBytes);
  if (old->acked_seq > 0) {
    v1::EventAck ack;
    ack.set_experiment_id(key.first);
    ack.set_attempt(key.second);
    ack.set_seq(old->acked_seq);
    data += EncodeRecord(kAckRecord, ack.SerializeAsString());
  }
  for (const auto& m : keep) {
    data += EncodeRecord(m.has_event() ? kEventRecord : kFinishedRecord, m.SerializeAsString());
  }
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return Status::IoError(Errno(tmp + ": create"));
  Status st = WriteAll(fd, data, tmp);
  if (st.ok() && ::fdatasync(fd) != 0) st = Status::IoError(Errno(tmp + ": fdatasync"));
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), old->path.c_str()) != 0) {
    st = Status::IoError(Errno(tmp + ": rename to " + old->path));
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;  // the old file stays in use, complete
  }
  XV_RETURN_IF_ERROR(SyncDirectory(dir_));
  auto fresh = std::make_shared<File>();
  fresh->path = old->path;
  fresh->fd = ::open(fresh->path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fresh->fd < 0) return Status::IoError(Errno(fresh->path + ": reopen after compaction"));
  fresh->records = keep.size() + (old->acked_seq > 0 ? 1 : 0);
  fresh->acked_seq = old->acked_seq;
  files_[key] = fresh;
  spdlog::debug("spool {}: compacted to {} records", fresh->path, fresh->records);
  return Status::Ok();
}

Status EventSpool::Quarantine(const v1::WorkerMessage& original, const std::string& reason,
                              const std::vector<v1::WorkerMessage>& still_held) {
  Key key;
  if (!KeyOfMessage(original, &key.first, &key.second)) {
    return Status::InvalidArgument("spool: only events and Finished messages are quarantined");
  }
  const std::string path = QuarantinePathOf(key.first, key.second);
  MutexLock lock(&mu_);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return Status::IoError(Errno(path + ": create"));
  struct stat st {};
  Status result = Status::Ok();
  if (::fstat(fd, &st) != 0) result = Status::IoError(Errno(path + ": fstat"));
  std::string data;
  if (result.ok() && st.st_size == 0) data.assign(kQuarantineMagic, kMagicBytes);
  data += EncodeRecord(kReasonRecord, reason);
  data += EncodeRecord(original.has_event() ? kEventRecord : kFinishedRecord,
                       original.SerializeAsString());
  if (result.ok()) result = WriteAll(fd, data, path);
  if (result.ok() && ::fdatasync(fd) != 0) result = Status::IoError(Errno(path + ": fdatasync"));
  ::close(fd);
  if (result.ok() && st.st_size == 0) result = SyncDirectory(dir_);
  XV_RETURN_IF_ERROR(result);
  if (files_.count(key) == 0) return Status::Ok();  // nothing of it spooled
  return RewriteLocked(key, still_held);
}

Status EventSpool::Remove(int64_t experiment_id, int32_t attempt) {
  MutexLock lock(&mu_);
  files_.erase({experiment_id, attempt});
  const std::string path = PathOf(experiment_id, attempt);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::IoError(Errno(path + ": delete"));
  }
  return Status::Ok();
}

Status EventSpool::SyncDirty() {
  std::vector<std::shared_ptr<File>> dirty;
  {
    MutexLock lock(&mu_);
    for (auto& [key, f] : files_) {
      if (!f->dirty) continue;
      f->dirty = false;
      dirty.push_back(f);
    }
  }
  Status result = Status::Ok();
  for (const auto& f : dirty) {
    if (::fdatasync(f->fd) != 0 && result.ok()) {
      result = Status::IoError(Errno(f->path + ": fdatasync"));
    }
  }
  return result;
}

}  // namespace xv::worker
