#include "exporter/storage/state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pglock {
namespace {

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// write(2) until all is written or it fails.
bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::atomic<bool> g_enabled{false};
std::atomic<double> g_errors{0};
std::atomic<double> g_last_write{0};

std::string FileStem(const std::string& dir, const std::string& target) {
  std::string name;
  for (unsigned char c : target) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '-') {
      name += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      name += buf;
    }
  }
  std::string path = dir;
  if (path.empty() || path.back() != '/') path += '/';
  return path + name;
}

}  // namespace

std::string StateFilePath(const std::string& dir, const std::string& target) {
  return FileStem(dir, target) + ".state.json";
}

std::string EventJournalPath(const std::string& dir, const std::string& target,
                             uint64_t generation) {
  return FileStem(dir, target) + ".events." + std::to_string(generation) + ".jsonl";
}

std::string TimelineJournalPath(const std::string& dir, const std::string& target,
                                uint64_t generation) {
  return FileStem(dir, target) + ".timeline." + std::to_string(generation) + ".jsonl";
}

std::string MarkerJournalPath(const std::string& dir, const std::string& target,
                              uint64_t generation) {
  return FileStem(dir, target) + ".markers." + std::to_string(generation) + ".jsonl";
}

Status AppendToFile(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoFailed(Errno("cannot open", path));
  const bool written = WriteAll(fd, bytes);
  const int write_errno = errno;
  const bool synced = written && ::fdatasync(fd) == 0;
  const int sync_errno = errno;
  ::close(fd);
  if (written && synced) return Status::Ok();
  errno = written ? sync_errno : write_errno;
  return Status::IoFailed(Errno(written ? "cannot sync" : "cannot append to", path));
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  return WriteFileAtomically(path, [&](const WritePart& write) { return write(bytes); });
}

Status WriteFileAtomically(const std::string& path,
                           const std::function<bool(const WritePart& write)>& body) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoFailed(Errno("cannot create", tmp));
  bool write_failed = false;
  int write_errno = 0;
  const bool produced = body([&](std::string_view part) {
    if (write_failed) return false;
    if (!WriteAll(fd, part)) {
      write_failed = true;
      write_errno = errno;
    }
    return !write_failed;
  });
  if (!produced && !write_failed) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::IoFailed("cannot write " + tmp + ": its contents could not be produced");
  }
  const bool written = !write_failed;
  const bool synced = written && ::fsync(fd) == 0;
  const int sync_errno = errno;
  ::close(fd);
  if (!written || !synced) {
    errno = written ? sync_errno : write_errno;
    Status s = Status::IoFailed(Errno(written ? "cannot sync" : "cannot write", tmp));
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Status::IoFailed(Errno("cannot rename to", path));
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename itself is durable once the directory is.
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status ReadWholeFile(const std::string& path, size_t max_bytes, std::string* out, bool* missing) {
  out->clear();
  *missing = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *missing = true;
      return Status::Ok();
    }
    return Status::IoFailed(Errno("cannot open", path));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IoFailed(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Status::InvalidData(path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                               std::to_string(max_bytes) + " it may hold");
  }
  // Its size at once: grown by doubling, a journal of 6 MB would pass through 4 and 8 MB buffers
  // side by side, the exporter's peak resident size at a restart.
  out->reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::IoFailed(Errno("cannot read", path));
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max_bytes) {  // it grew while being read
      ::close(fd);
      out->clear();
      return Status::InvalidData(path + ": more than " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  return Status::Ok();
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::IoFailed(Errno("cannot remove", path));
  }
  return Status::Ok();
}

void CountStateWrite(bool ok, double wall_now) {
  if (ok) {
    g_last_write.store(wall_now);
  } else {
    double e = g_errors.load();
    while (!g_errors.compare_exchange_weak(e, e + 1)) {
    }
  }
}

StateWriteFigures StateWrites() { return {g_enabled.load(), g_errors.load(), g_last_write.load()}; }

void EnableStateWrites() { g_enabled.store(true); }

}  // namespace pglock
