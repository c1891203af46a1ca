// Captures what the exporter logs (spdlog's default logger, message text only) for the lifetime
// of the object, to check what is logged and how often. Thread-compatible: read it while no other
// thread logs (tests that poll in their own thread).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace pglock::testing {

class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // How many logged lines contain `text`.
  int Count(const std::string& text) const;
  std::string Text() const;

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace pglock::testing
