// A client of the test server in a process of its own (psql, a node script), so that a test can
// end it the ways a real client ends: SIGKILL, its own exit, a clean close. Its standard input is a
// pipe the test writes to (or closes), its output goes to a file. The destructor kills and reaps
// it, so no client outlives its test. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pglock::testing {

class ClientProcess {
 public:
  // Starts argv[0] (looked up in PATH) with `env` added to this process's environment ("K=V").
  // ok() is false when it could not be started.
  ClientProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
  ~ClientProcess();
  ClientProcess(const ClientProcess&) = delete;
  ClientProcess& operator=(const ClientProcess&) = delete;

  bool ok() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Writes `text` to its standard input; false when it is closed or the write failed.
  bool Write(const std::string& text);
  // Closes its standard input: psql then ends its session cleanly and exits.
  void CloseInput();
  // Sends `signal` and waits for it to exit.
  void Kill(int signal);
  // Waits up to `seconds` for it to exit; its exit status, or -1 if it still runs.
  int Wait(double seconds);
  // What it wrote to stdout and stderr so far.
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  std::string output_path_;
  int status_ = -1;
};

}  // namespace pglock::testing
