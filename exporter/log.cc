#include "exporter/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "exporter/util/utf8.h"

namespace pglock {
namespace {

// Set by SetupLogging; read by LogStructured.
std::atomic<bool> g_json{false};
// The structured member of the record being logged on this thread (LogStructured): the logger is
// synchronous, so the formatter runs on the logging thread while it is set.
thread_local const std::string* t_extra_member = nullptr;

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto t = std::chrono::system_clock::to_time_t(msg.time);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[64];
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(ms));
    const auto level = spdlog::level::to_string_view(msg.level);
    const std::string line = std::string("{\"time\":\"") + ts + "\",\"level\":\"" +
                             std::string(level.data(), level.size()) + "\",\"msg\":\"" +
                             JsonEscape(std::string_view(msg.payload.data(), msg.payload.size())) +
                             "\"" + (t_extra_member != nullptr ? "," + *t_extra_member : "") +
                             "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::string JsonEscape(std::string_view raw) {
  std::string out;
  for (unsigned char c : ToValidUtf8(raw)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

void SetupLogging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_logger_mt("pglock_exporter");
  g_json.store(format == "json");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

void LogStructured(const std::string& msg, const std::string& text_fields, const std::string& key,
                   const std::string& json_value) {
  if (!g_json.load()) {
    spdlog::info("{} {}", msg, text_fields);
    return;
  }
  const std::string member = "\"" + JsonEscape(key) + "\":" + json_value;
  t_extra_member = &member;
  spdlog::info("{}", msg);
  t_extra_member = nullptr;
}

}  // namespace pglock
