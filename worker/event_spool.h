// EventSpool: the worker's durable copy of the messages it owes the daemon (trainer events and
// Finished), so that neither a daemon outage nor a worker restart loses one.
//
// Layout: one append-only file per attempt, DIR/exp-<experiment>-a<attempt>.spool:
//   8 bytes "XVSPOOL1", then records  [u32 length][u32 crc32][u8 kind][payload: length bytes]
// (integers little-endian; crc32 is IEEE CRC-32, as zlib's crc32(), over kind and payload).
// Kinds: 1 event and 2 finished (payload: a serialized v1::WorkerMessage), 3 ack (payload: a
// serialized v1::EventAck: the daemon stored every event of the attempt with seq <= ack.seq).
//
// Recovery reads each file up to the first record that is incomplete (a write torn by a crash) or
// fails its CRC or does not parse; that record and everything after it are dropped with a warning
// naming the file and the offset, and the file is truncated there (after a CRC or parse failure
// the whole file is first copied to <file>.corrupt for inspection).
//
// Durability: a new file and its directory entry are fsynced when the file is created; a Finished
// record is fdatasync'ed before Append returns (before it can be sent); event records are written
// at once (a killed worker loses none: they are in the page cache) and fdatasync'ed by SyncDirty,
// which the owner calls every 200 ms, so only a power loss can cost the last 200 ms of events. Ack
// records are never synced on their own: losing one only makes a restart replay events the daemon
// already has, which it de-duplicates. When an attempt has at least 1024 acknowledged records and
// they outnumber the ones still held, the file is rewritten with only the held ones (temp file,
// fsync, rename, fsync of the directory). The file is deleted once the owner is done with the
// attempt (its Finished acknowledged).
//
// Quarantine: a message the daemon never acknowledged after the outbox's bounded resends
// (worker/event_outbox.h) is set aside in DIR/exp-<experiment>-a<attempt>.quarantine, which
// Recover never reads: 8 bytes "XVQUAR01", then for each message set aside a reason record
// (kind 4, payload: UTF-8 text saying why) followed by the message's own record (kind 1 or 2, as
// in the spool), in the same record layout, fdatasync'ed. The attempt's spool file is then
// rewritten (as in compaction) with what the owner still holds, the stand-in in the original's
// place, so a restart does not replay the original. The quarantine file stays until an operator
// removes it.
//
// Ownership: one live EventSpool per directory in the whole machine: Open takes an exclusive flock
// on DIR/lock (holding the owner's pid), which the kernel drops when the process dies.
//
// Thread-safety: every method is safe to call from any thread (guarded by mu_); SyncDirty does its
// fdatasync calls outside mu_, so appends are not blocked by a slow disk.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "xv/v1/workers.pb.h"

namespace xv::worker {

// IEEE CRC-32 (the polynomial of zlib, PNG and Ethernet), continuing from `crc` (0 to start).
uint32_t SpoolCrc32(const void* data, size_t size, uint32_t crc = 0);

// What recovery found of one attempt.
struct SpooledAttempt {
  int64_t experiment_id = 0;
  int32_t attempt = 0;
  std::string path;
  // The events not yet acknowledged, in the order written, then the Finished if one was written.
  std::vector<v1::WorkerMessage> messages;
  bool finished = false;  // a Finished record is there
  int64_t acked_seq = 0;  // the highest acknowledged seq recorded in the file
  int64_t last_seq = 0;   // the highest seq written (events, or Finished.last_seq)
};

class EventSpool {
 public:
  static constexpr int kSyncIntervalMs = 200;
  static constexpr size_t kCompactMinAcked = 1024;
  static constexpr uint32_t kMaxRecordBytes = 64u << 20;

  // Opens the spool directory `dir`, creating it when missing, and locks it. FailedPrecondition
  // naming the pid when another live process holds the lock.
  static Status Open(const std::string& dir, std::unique_ptr<EventSpool>* out);
  ~EventSpool();

  // Reads every spool file of the directory; call once, before the first Append. Every dropped
  // record is logged (warn) and described in *warnings. A file that does not start with the magic
  // is renamed to <file>.unreadable and left alone; one whose name holds an experiment or attempt
  // number out of range (not a file this worker wrote) is ignored with a warning. Attempts come out
  // ordered by (experiment, attempt); files that hold nothing but acknowledged events are deleted.
  Status Recover(std::vector<SpooledAttempt>* attempts, std::vector<std::string>* warnings);

  // Appends an event or Finished message (other kinds: InvalidArgument) to its attempt's file,
  // creating the file on first use. A Finished is on disk (fdatasync) when this returns.
  Status Append(const v1::WorkerMessage& msg);

  // Records that the daemon stored every event of the attempt with seq <= `seq`. `still_held` is
  // what the owner still holds of the attempt (for compaction). No-op when no file is open for it.
  Status Acknowledge(int64_t experiment_id, int32_t attempt, int64_t seq,
                     const std::vector<v1::WorkerMessage>& still_held);

  // Sets `original` aside with `reason` in the attempt's quarantine file (fdatasync'ed), then
  // rewrites the attempt's spool file with `still_held` (what the owner still holds of the
  // attempt, the stand-in included). See the file comment.
  Status Quarantine(const v1::WorkerMessage& original, const std::string& reason,
                    const std::vector<v1::WorkerMessage>& still_held);

  // Deletes the attempt's file (nothing of it is owed any more).
  Status Remove(int64_t experiment_id, int32_t attempt);

  // fdatasync of every file appended to since its last sync.
  Status SyncDirty();

  const std::string& dir() const { return dir_; }
  std::string PathOf(int64_t experiment_id, int32_t attempt) const;
  std::string QuarantinePathOf(int64_t experiment_id, int32_t attempt) const;
  // Files open for appending now (for tests and logs).
  size_t open_files() const;

 private:
  struct File;
  struct RecoveredFile;
  using Key = std::pair<int64_t, int32_t>;
  EventSpool(std::string dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  // Reads the records of one spool file up to the first torn, corrupt or unparsable one.
  static RecoveredFile ReadRecords(const Key& key, const std::string& path,
                                   const std::string& data);
  // Truncates the file where ReadRecords stopped (copying a corrupt one to <file>.corrupt first)
  // and warns; Ok and nothing done when the file ended cleanly.
  static Status CutAtProblem(const std::string& path, size_t size, const RecoveredFile& recovered,
                             std::vector<std::string>* warnings);
  // Opens a recovered file for appending and records it in files_.
  Status ReopenRecoveredLocked(const Key& key, const std::string& path,
                               const RecoveredFile& recovered) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status OpenForAppendLocked(const Key& key, std::shared_ptr<File>* out)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status RewriteLocked(const Key& key, const std::vector<v1::WorkerMessage>& keep)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const int lock_fd_;  // holds the flock on DIR/lock
  mutable Mutex mu_;
  // A File's `dirty` flag is also read and written only with mu_ held.
  std::map<Key, std::shared_ptr<File>> files_ GUARDED_BY(mu_);
};

}  // namespace xv::worker
