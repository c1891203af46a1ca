// The runbooks of alerts/runbooks/*.md, embedded at build time (cmake/embed_runbooks.cmake) and
// served at /runbooks/<name>, so that every alert can link to the exporter that raised it.
// Immutable; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pglock {

struct Runbook {
  const char* name;      // file name without ".md": the alert name, or "README"
  const char* markdown;  // the file's text
};

// Every runbook, sorted by name (generated).
const std::vector<Runbook>& Runbooks();

// The runbook called exactly `name`, or nullptr. Only embedded names match: no path is ever
// looked up, so "../x" or "a/b" simply do not exist.
const Runbook* FindRunbook(std::string_view name);

// The runbook as a readable HTML page.
std::string RunbookPage(const Runbook& runbook);

}  // namespace pglock
