// What the two files of --check-targets share (check_targets.h): the report and one target's
// check, and the check of a target's server log (check_targets_log.cc). Not thread-safe, like
// CheckTargets itself.
#pragma once

#include <algorithm>
#include <ostream>
#include <string>

#include "exporter/config/config.h"
#include "exporter/pg/batch.h"
#include "exporter/pg/connection.h"

namespace pglock {

// The report: a heading per target, indented facts, and problems (counted), each on one line.
class Report {
 public:
  explicit Report(std::ostream& out) : out_(out) {}

  void Section(const std::string& text) { out_ << text << "\n"; }
  void Fact(const std::string& text) { out_ << "  " << text << "\n"; }
  // `where_and_what` is "file:line: key: message"; `fix` says what to do.
  void Problem(const std::string& where_and_what, const std::string& fix) {
    ++problems_;
    Line("PROBLEM", where_and_what, fix);
  }
  // A server setting that makes the exporter see less, without anything failing (the server's
  // log without log_lock_waits): said like a problem, not counted in the exit status.
  void Advice(const std::string& where_and_what, const std::string& fix) {
    ++advice_;
    Line("ADVICE", where_and_what, fix);
  }
  int problems() const { return problems_; }
  int advice() const { return advice_; }

 private:
  void Line(const char* kind, std::string where_and_what, const std::string& fix) {
    // One line each, whatever the server's message holds.
    std::replace(where_and_what.begin(), where_and_what.end(), '\n', ' ');
    out_ << "  " << kind << " " << where_and_what << " -> " << fix << "\n";
  }

  std::ostream& out_;
  int problems_ = 0;
  int advice_ = 0;
};

// One target's check: its config, the exporter's role on its server, the report.
struct TargetCheck {
  const TargetConfig* target = nullptr;
  const PollConfig* poll = nullptr;
  QueryTimeouts timeouts;
  std::string role;  // quoted as an identifier where needed, for the GRANTs to suggest
  Report* report = nullptr;

  // Each step (a connect, a statement) gets the poll's timeout, at least 5 s.
  SteadyClock::time_point Deadline() const {
    return SteadyClock::now() + std::max(poll->timeout, Duration(5000));
  }
};

// The log of a target with [targets.server_log]: readable or not, the format found, and the
// server settings that make it useful. `conn` is null when the target is unreachable: the files
// of via = "file" are still checked.
void CheckServerLog(PgConnection* conn, const TargetCheck& tc);

}  // namespace pglock
