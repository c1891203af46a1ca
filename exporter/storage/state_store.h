// The state directory ([storage] path): one file per target, written whole and atomically
// (a temporary file beside it, fsync, rename, fsync of the directory), read at start. Plain
// functions over files, plus the process-wide figures /metrics shows
// (pglock_storage_write_errors_total, pglock_storage_last_write_timestamp_seconds).
// Thread-safe: each target writes only its own file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "exporter/util/status.h"

namespace pglock {

// "<dir>/<target>.state.json", the target's name with every byte outside [A-Za-z0-9_-] as %XX.
std::string StateFilePath(const std::string& dir, const std::string& target);

// "<dir>/<target>.events.<generation>.jsonl": the target's events journal (saved_state.h), named
// as StateFilePath names the state file ('.' is escaped in a target's name, so no target's files
// are another's).
std::string EventJournalPath(const std::string& dir, const std::string& target,
                             uint64_t generation);
// "<dir>/<target>.timeline.<generation>.jsonl": its timeline's closed intervals.
std::string TimelineJournalPath(const std::string& dir, const std::string& target,
                                uint64_t generation);
// "<dir>/<target>.markers.<generation>.jsonl": its timeline's markers.
std::string MarkerJournalPath(const std::string& dir, const std::string& target,
                              uint64_t generation);

// Replaces `path` with `bytes`, all or nothing: a crash leaves the old file or the new one.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);
// The same for a file written in parts: `body` calls its argument with each part in turn (false
// back: the write failed, stop) and returns false to give up. A large journal never sits whole in
// memory (a 6 MB string, grown by doubling, was the exporter's peak resident size at its bound).
using WritePart = std::function<bool(std::string_view part)>;
Status WriteFileAtomically(const std::string& path,
                           const std::function<bool(const WritePart& write)>& body);

// Appends `bytes` to `path` (created when missing) and syncs it. On an error the file may end in
// part of `bytes`: the caller rewrites it before relying on what follows.
Status AppendToFile(const std::string& path, std::string_view bytes);

// The whole of `path` when it holds at most `max_bytes`; *missing is set (and the status is ok)
// when there is no such file.
Status ReadWholeFile(const std::string& path, size_t max_bytes, std::string* out, bool* missing);

// Removes `path` (a target gone from the config); a missing file is fine.
Status RemoveFile(const std::string& path);

// Process-wide figures of the writes. `ok` false: one more failed write.
void CountStateWrite(bool ok, double wall_now);
struct StateWriteFigures {
  bool enabled = false;  // some target keeps state (a [storage] path is set)
  double errors = 0;
  double last_write = 0;  // epoch seconds of the last write that succeeded; 0 none yet
};
StateWriteFigures StateWrites();
void EnableStateWrites();

}  // namespace pglock
