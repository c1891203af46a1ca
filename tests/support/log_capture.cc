#include "tests/support/log_capture.h"

#include <spdlog/sinks/ostream_sink.h>

namespace pglock::testing {

LogCapture::LogCapture()
    : previous_(spdlog::default_logger()),
      logger_(std::make_shared<spdlog::logger>(
          "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_))) {
  logger_->set_pattern("%v");
  spdlog::set_default_logger(logger_);
}

LogCapture::~LogCapture() { spdlog::set_default_logger(previous_); }

int LogCapture::Count(const std::string& text) const {
  std::istringstream lines(Text());
  int n = 0;
  for (std::string line; std::getline(lines, line);) n += line.find(text) != std::string::npos;
  return n;
}

std::string LogCapture::Text() const {
  logger_->flush();
  return out_.str();
}

}  // namespace pglock::testing
