#include "tokenizer/corpus_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

namespace xv::tok {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Classifies `name`; returns false when the name is not a corpus file (directory rules).
bool Classify(const std::string& path, CorpusFile* file) {
  std::string name = BaseName(path);
  file->compression = CorpusCompression::kNone;
  if (EndsWith(name, ".gz")) {
    file->compression = CorpusCompression::kGzip;
    name.resize(name.size() - 3);
  } else if (EndsWith(name, ".zst")) {
    file->compression = CorpusCompression::kZstd;
    name.resize(name.size() - 4);
  }
  const size_t dot = name.rfind('.');
  const std::string ext = (dot == std::string::npos || dot == 0) ? "" : name.substr(dot);
  if (ext == ".jsonl") {
    file->format = CorpusFormat::kJsonl;
  } else if (ext == ".parquet") {
    file->format = CorpusFormat::kParquet;
  } else if (ext.empty() || ext == ".txt" || ext == ".text" || ext == ".u8") {
    file->format = CorpusFormat::kText;
  } else {
    file->format = CorpusFormat::kText;
    return false;
  }
  return true;
}

struct Walker {
  std::vector<CorpusFile>* files;
  std::vector<std::string>* skipped;
  std::set<std::pair<dev_t, ino_t>> seen_files;
  std::set<std::pair<dev_t, ino_t>> seen_dirs;

  void Skip(const std::string& path) {
    if (skipped != nullptr) skipped->push_back(path);
  }

  void AddFile(const std::string& path, const struct stat& st, const CorpusFile& kind) {
    if (!seen_files.insert({st.st_dev, st.st_ino}).second) {
      Skip(path);  // the same file again, e.g. through a symlink
      return;
    }
    CorpusFile f = kind;
    f.path = path;
    f.size = static_cast<uint64_t>(st.st_size);
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    files->push_back(std::move(f));
  }

  Status WalkDirectory(const std::string& dir, const struct stat& dir_st) {
    if (!seen_dirs.insert({dir_st.st_dev, dir_st.st_ino}).second) {
      Skip(dir);  // a directory reached again through a symlink
      return Status::Ok();
    }
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      return Status::IoError(dir + ": cannot read directory: " + std::strerror(errno));
    }
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;  // hidden, "." and ".."
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string path = dir + "/" + name;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) {
        Skip(path);  // dangling symlink or vanished entry
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        XV_RETURN_IF_ERROR(WalkDirectory(path, st));
      } else if (S_ISREG(st.st_mode)) {
        CorpusFile kind;
        if (Classify(path, &kind)) {
          AddFile(path, st, kind);
        } else {
          Skip(path);
        }
      } else {
        Skip(path);
      }
    }
    return Status::Ok();
  }
};

}  // namespace

Status ListCorpusFiles(const std::vector<std::string>& inputs, std::vector<CorpusFile>* files,
                       std::vector<std::string>* skipped) {
  files->clear();
  if (skipped != nullptr) skipped->clear();
  Walker walker{files, skipped, {}, {}};
  for (std::string input : inputs) {
    while (input.size() > 1 && input.back() == '/') input.pop_back();
    struct stat st;
    if (::stat(input.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::NotFound(input + ": input not found");
      return Status::IoError(input + ": " + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
      XV_RETURN_IF_ERROR(walker.WalkDirectory(input, st));
    } else if (S_ISREG(st.st_mode)) {
      CorpusFile kind;
      Classify(input, &kind);  // explicit files are read even with an unknown extension
      walker.AddFile(input, st, kind);
    } else {
      return Status::InvalidArgument(input + ": not a regular file or directory");
    }
  }
  if (files->empty()) {
    return Status::InvalidArgument("no input files found in the given --input paths");
  }
  return Status::Ok();
}

const char* CorpusFormatName(CorpusFormat format) {
  switch (format) {
    case CorpusFormat::kText:
      return "text";
    case CorpusFormat::kJsonl:
      return "jsonl";
    case CorpusFormat::kParquet:
      return "parquet";
  }
  return "?";
}

const char* CorpusCompressionName(CorpusCompression compression) {
  switch (compression) {
    case CorpusCompression::kNone:
      return "none";
    case CorpusCompression::kGzip:
      return "gzip";
    case CorpusCompression::kZstd:
      return "zstd";
  }
  return "?";
}

}  // namespace xv::tok
