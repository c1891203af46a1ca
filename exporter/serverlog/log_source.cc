// The file source: one log file, or the candidate files of a directory. It keeps the file it read
// last open, so that file can be finished after it was renamed or removed (tail -F does the same).
#include "exporter/serverlog/log_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace pglock {

bool IsLogFileName(std::string_view name, LogFormat format) {
  const std::string_view suffix = format == LogFormat::kJsonlog ? ".json" : ".csv";
  return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

namespace {

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Close(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

uint64_t IdentityOf(const struct stat& st) {
  const uint64_t mixed =
      static_cast<uint64_t>(st.st_dev) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(st.st_ino);
  return mixed == 0 ? 1 : mixed;
}

double ModifiedOf(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

// "cannot <what> <path>: <strerror>", with what to do when it is a permission problem.
Status FileError(const char* what, const std::string& path, int err) {
  std::string message =
      std::string("server log: cannot ") + what + " " + path + ": " + std::strerror(err);
  if (err == EACCES || err == EPERM) {
    message +=
        " (the exporter's user needs read access to the log directory and its files: set "
        "log_file_mode = 0640 and add the user to the files' group, e.g. on Debian the adm group)";
  }
  return Status::StatementFailed(std::move(message));
}

class FileLogSource : public LogSource {
 public:
  FileLogSource(std::string path, LogFormat format) : path_(std::move(path)), format_(format) {}

  // Lists into the entries *out already has, their names' storage kept: the same files listed
  // again, several times a second, cost no allocation.
  Status List(std::vector<LogFileInfo>* out) override {
    size_t listed = 0;
    const auto put = [&](std::string_view name, const struct stat& st) {
      if (listed == out->size()) out->emplace_back();
      LogFileInfo& f = (*out)[listed++];
      f.name.assign(name);
      f.size = static_cast<uint64_t>(st.st_size);
      f.modified = ModifiedOf(st);
      f.identity = IdentityOf(st);
    };
    struct stat st;
    if (::stat(path_.c_str(), &st) != 0) {
      out->clear();
      return FileError("stat", path_, errno);
    }
    is_directory_ = S_ISDIR(st.st_mode);
    if (is_directory_) {
      if (Status s = ListDirectory(put, st); !s.ok()) {
        out->clear();
        return s;
      }
    } else {
      dir_.reset();
      const size_t slash = path_.rfind('/');
      put(std::string_view(path_).substr(slash == std::string::npos ? 0 : slash + 1), st);
    }
    out->resize(listed);
    return Status::Ok();
  }

  Status Read(const LogFileInfo& file, uint64_t offset, size_t max_bytes,
              std::string* out) override {
    out->clear();
    const bool same = open_.valid() && (file.identity != 0 ? file.identity == open_identity_
                                                           : file.name == open_name_);
    if (!same) {
      if (Status s = Open(file); !s.ok()) return s;
    }
    // Sized to what the file holds now rather than to max_bytes: filling a 256 KiB buffer with
    // zeros at every read of a log that grew by nothing was a fifth of an idle exporter's
    // instructions. Bytes appended after the fstat are read next time, as any appended after the
    // pread would be.
    struct stat st {};
    if (::fstat(open_.get(), &st) == 0 && S_ISREG(st.st_mode)) {
      const uint64_t size = static_cast<uint64_t>(st.st_size);
      max_bytes =
          size > offset ? static_cast<size_t>(std::min<uint64_t>(max_bytes, size - offset)) : 0;
    }
    out->resize(max_bytes);
    size_t got = 0;
    while (got < max_bytes) {
      const ssize_t n = ::pread(open_.get(), out->data() + got, max_bytes - got,
                                static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        out->clear();
        return FileError("read", PathOf(file.name), err);
      }
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    out->resize(got);
    return Status::Ok();
  }

  std::string Describe() const override {
    if (!is_directory_) return "file " + path_;
    return "directory " + path_ + (format_ == LogFormat::kJsonlog ? " (*.json)" : " (*.csv)");
  }

 private:
  std::string PathOf(const std::string& name) const {
    return is_directory_ ? path_ + "/" + name : path_;
  }

  // The directory stays open from read to read (rewound each time): opendir allocates a 32 KiB
  // buffer, and that one allocation, several times a second on a heap fragmented by hours of
  // history, was 6% of the exporter's CPU. Reopened when the path names another directory.
  template <typename Put>
  Status ListDirectory(const Put& put, const struct stat& named) {
    struct stat open_st;
    if (dir_ != nullptr && (::fstat(::dirfd(dir_.get()), &open_st) != 0 ||
                            open_st.st_ino != named.st_ino || open_st.st_dev != named.st_dev)) {
      dir_.reset();
    }
    if (dir_ == nullptr) {
      dir_.reset(::opendir(path_.c_str()));
      if (dir_ == nullptr) return FileError("open directory", path_, errno);
    } else {
      ::rewinddir(dir_.get());
    }
    DIR* dir = dir_.get();
    errno = 0;
    while (const dirent* entry = ::readdir(dir)) {
      if (!IsLogFileName(entry->d_name, format_)) continue;
      struct stat st;
      // A file removed since readdir, or not a regular file, is no candidate.
      if (::fstatat(::dirfd(dir), entry->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) {
        continue;
      }
      put(entry->d_name, st);
    }
    if (errno != 0) {
      const int err = errno;
      dir_.reset();  // opened afresh by the next read
      return FileError("list directory", path_, err);
    }
    return Status::Ok();
  }

  // Opens `file` as open_, checking that the name still leads to the file of its identity.
  Status Open(const LogFileInfo& file) {
    const std::string path = PathOf(file.name);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return FileError("open", path, errno);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return FileError("stat", path, errno);
    if (file.identity != 0 && IdentityOf(st) != file.identity) {
      return Status::StatementFailed("server log: " + path +
                                     " is no longer the file that was listed (replaced)");
    }
    open_ = std::move(fd);
    open_identity_ = IdentityOf(st);
    open_name_ = file.name;
    return Status::Ok();
  }

  const std::string path_;
  const LogFormat format_;
  bool is_directory_ = false;  // as of the last List()
  struct CloseDir {
    void operator()(DIR* d) const { ::closedir(d); }
  };
  std::unique_ptr<DIR, CloseDir> dir_;  // the directory listed last
  UniqueFd open_;                       // the file read last
  uint64_t open_identity_ = 0;
  std::string open_name_;
};

}  // namespace

std::unique_ptr<LogSource> MakeFileLogSource(std::string path, LogFormat format) {
  return std::make_unique<FileLogSource>(std::move(path), format);
}

}  // namespace pglock
