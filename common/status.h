// Status: the error type returned across module boundaries (leveldb style). A Status is ok or
// carries a code and a message; messages name the field or the cause and, where it helps, what to
// do. Thread-safety: plain value.
#pragma once

#include <string>
#include <utility>

namespace xv {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,
    kNotFound,
    kAlreadyExists,
    kFailedPrecondition,
    kIoError,
    kDataLoss,
    kUnavailable,
    kInternal,
    kCancelled,
    kDeadlineExceeded,
    kResourceExhausted
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return Status(Code::kInvalidArgument, std::move(m));
  }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status AlreadyExists(std::string m) { return Status(Code::kAlreadyExists, std::move(m)); }
  static Status FailedPrecondition(std::string m) {
    return Status(Code::kFailedPrecondition, std::move(m));
  }
  static Status IoError(std::string m) { return Status(Code::kIoError, std::move(m)); }
  static Status DataLoss(std::string m) { return Status(Code::kDataLoss, std::move(m)); }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
  static Status Cancelled(std::string m) { return Status(Code::kCancelled, std::move(m)); }
  static Status DeadlineExceeded(std::string m) {
    return Status(Code::kDeadlineExceeded, std::move(m));
  }
  static Status ResourceExhausted(std::string m) {
    return Status(Code::kResourceExhausted, std::move(m));
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: matrix_lr: must be > 0, got -1"
  std::string ToString() const;
  // Prefixes the message with context: "recipes/x.yaml: " + message.
  Status WithContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + message_);
  }

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

const char* StatusCodeName(Status::Code code);

// Returns early from the enclosing function when `expr` is not ok.
#define XV_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::xv::Status _xv_status = (expr);        \
    if (!_xv_status.ok()) return _xv_status; \
  } while (0)

}  // namespace xv
