#include "exporter/config/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <toml.hpp>

#include "exporter/config/config_internal.h"
#include "exporter/config/shard.h"
#include "exporter/pg/conninfo.h"
#include "exporter/util/utf8.h"

namespace pglock {
namespace {

constexpr int kMaxTopN = 10'000;

bool IsBcryptHash(const std::string& h) {
  return h.size() == 60 &&
         (h.rfind("$2a$", 0) == 0 || h.rfind("$2b$", 0) == 0 || h.rfind("$2y$", 0) == 0);
}

bool ValidListenAddress(const std::string& addr) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 >= addr.size()) return false;
  const std::string port = addr.substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  return port.size() <= 5 && std::stoi(port) <= 65535;
}

// Dotted key -> line in the file, for the checks that run after flags are applied.
using KeyLines = std::map<std::string, int>;

// Parses the document into *config; errors accumulate. Defaults stay for absent keys.
// The [web] table (two of its keys feed PollConfig: the on-call view's data is the pollers').
void ParseWeb(const toml::value& web, const std::string& file, Config* config,
              std::vector<ConfigError>* errors, KeyLines* lines) {
  TableReader r(web, "web", file, errors);
  r.String("listen_address", &config->web.listen_address);
  r.String("telemetry_path", &config->web.telemetry_path);
  for (const char* k : {"listen_address", "telemetry_path"}) (*lines)[r.Dotted(k)] = r.LineOf(k);
  r.String("tls_cert_file", &config->web.tls_cert_file);
  r.String("tls_key_file", &config->web.tls_key_file);
  r.Int("max_connections", 1, 1024, &config->web.max_connections);
  r.DurationValue("request_timeout", &config->web.request_timeout);
  // The on-call view's data is gathered by the pollers, so these two live in PollConfig.
  r.Int("event_log_size", 0, 1'000'000, &config->poll.event_log_size);
  r.Bool("show_query_text", &config->poll.query_text);
  if (const toml::value* users = r.Table("basic_auth_users")) {
    TableReader ur(*users, "web.basic_auth_users", file, errors);
    for (const auto& [user, hash] : users->as_table()) {
      ur.Get(user);
      if (!hash.is_string() || !IsBcryptHash(hash.as_string().str)) {
        ur.Error(hash, user, "must be a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters)");
        continue;
      }
      config->web.basic_auth_users[user] = hash.as_string().str;
    }
  }
  if (config->web.tls_cert_file.empty() != config->web.tls_key_file.empty()) {
    r.TableError("tls_cert_file", "set both tls_cert_file and tls_key_file, or neither");
  }
  for (const std::string* f : {&config->web.tls_cert_file, &config->web.tls_key_file}) {
    if (!f->empty() && access(f->c_str(), R_OK) != 0) {
      r.TableError(f == &config->web.tls_cert_file ? "tls_cert_file" : "tls_key_file",
                   "cannot read " + *f);
    }
  }
  r.RejectUnknown();
}

// [shard]: ordinal (a number or "auto") and total.
void ParseShard(const toml::value& shard, const std::string& file, Config* config,
                std::vector<ConfigError>* errors, KeyLines* lines) {
  TableReader r(shard, "shard", file, errors);
  if (const toml::value* v = r.Get("ordinal")) {
    if (v->is_string() && v->as_string().str == "auto") {
      config->shard.ordinal_auto = true;
    } else if (v->is_integer() && v->as_integer() >= 0 && v->as_integer() < kMaxShards) {
      config->shard.ordinal = static_cast<int>(v->as_integer());
    } else {
      r.Error(*v, "ordinal",
              "must be a number from 0 to " + std::to_string(kMaxShards - 1) + " or \"auto\"");
    }
  }
  r.Int("total", 1, kMaxShards, &config->shard.total);
  for (const char* k : {"ordinal", "total"}) (*lines)[r.Dotted(k)] = r.LineOf(k);
  r.RejectUnknown();
}

// A shard's ordinal: "auto" reads it from the host name; it must be below the total.
void ValidateShard(ShardConfig* shard,
                   const std::function<void(const std::string&, const std::string&)>& err) {
  if (shard->ordinal_auto) {
    shard->host_name = HostName();
    std::string why;
    const std::optional<int> n = OrdinalFromHostName(shard->host_name, &why);
    if (!n) {
      err("shard.ordinal", "auto: " + why);
      return;
    }
    shard->ordinal = *n;
  }
  if (shard->ordinal >= shard->total) {
    err("shard.ordinal", std::to_string(shard->ordinal) +
                             (shard->ordinal_auto ? " (from host name \"" + shard->host_name + "\")"
                                                  : std::string()) +
                             " must be below shard.total (" + std::to_string(shard->total) +
                             "): ordinals count from 0");
  }
}

void ParseDocument(const toml::value& doc, const std::string& file, Config* config,
                   std::vector<ConfigError>* errors, bool* timeout_set, KeyLines* lines) {
  TableReader root(doc, "", file, errors);
  if (const toml::value* web = root.Table("web")) ParseWeb(*web, file, config, errors, lines);
  if (const toml::value* poll = root.Table("poll")) {
    TableReader r(*poll, "poll", file, errors);
    r.DurationValue("interval", &config->poll.interval);
    *timeout_set = r.DurationValue("timeout", &config->poll.timeout);
    r.DurationValue("inventory_interval", &config->poll.inventory_interval);
    r.Int("top_n", 1, kMaxTopN, &config->poll.top_n);
    r.Int("max_leases", 1, 1'000'000, &config->poll.max_leases);
    for (const char* k : {"interval", "timeout", "inventory_interval"}) {
      (*lines)[r.Dotted(k)] = r.LineOf(k);
    }
    r.RejectUnknown();
  }
  if (const toml::value* events = root.Table("events")) {
    TableReader r(*events, "events", file, errors);
    r.DurationValue("takeover_window", &config->poll.takeover_window);
    (*lines)[r.Dotted("takeover_window")] = r.LineOf("takeover_window");
    r.RejectUnknown();
  }
  if (const toml::value* storage = root.Table("storage")) {
    TableReader r(*storage, "storage", file, errors);
    r.String("path", &config->poll.storage_path);
    (*lines)[r.Dotted("path")] = r.LineOf("path");
    r.RejectUnknown();
  }
  if (const toml::value* shard = root.Table("shard"))
    ParseShard(*shard, file, config, errors, lines);
  if (const toml::value* log = root.Table("log")) {
    TableReader r(*log, "log", file, errors);
    r.String("level", &config->log.level);
    r.String("format", &config->log.format);
    for (const char* k : {"level", "format"}) (*lines)[r.Dotted(k)] = r.LineOf(k);
    r.RejectUnknown();
  }
  std::set<std::string> names;
  for (const toml::value* t : root.Tables("targets")) {
    TableReader r(*t, "targets", file, errors);
    TargetConfig target;
    target.origin.file = file;
    target.origin.lines = KeyLinesOf(*t);
    ParseTarget(r, file, errors, &target, &config->world_readable_secret);
    if (!target.name.empty() && !names.insert(target.name).second) {
      r.TableError("name", "duplicate target name \"" + target.name + "\"");
    }
    config->targets.push_back(std::move(target));
  }
  root.RejectUnknown();
}

// `lines` holds the file's line of each key whose value still comes from the file (0 or absent
// when a flag or the default set it).
void ValidateMerged(Config* config, bool timeout_set, const KeyLines& lines,
                    std::vector<ConfigError>* errors) {
  const std::string& f = config->file;
  auto err = [&](const std::string& key, const std::string& msg) {
    const auto it = lines.find(key);
    errors->push_back({f, it == lines.end() ? 0 : it->second, key, msg});
  };
  if (!ValidListenAddress(config->web.listen_address)) {
    err("web.listen_address", "\"" + config->web.listen_address + "\" is not HOST:PORT or :PORT");
  }
  if (config->web.telemetry_path.empty() || config->web.telemetry_path[0] != '/' ||
      config->web.telemetry_path == "/" || config->web.telemetry_path.rfind("/-/", 0) == 0) {
    err("web.telemetry_path",
        "\"" + config->web.telemetry_path + "\" must start with / and must not be / or under /-/");
  }
  if (config->poll.interval < Duration(100)) err("poll.interval", "must be at least 100ms");
  if (!timeout_set) config->poll.timeout = std::min(config->poll.timeout, config->poll.interval);
  if (config->poll.timeout < Duration(50)) err("poll.timeout", "must be at least 50ms");
  if (config->poll.timeout > config->poll.interval) {
    err("poll.timeout", "(" + FormatDuration(config->poll.timeout) +
                            ") must not exceed poll.interval (" +
                            FormatDuration(config->poll.interval) + ")");
  }
  if (config->poll.takeover_window <= Duration(0)) {
    err("events.takeover_window", "must be greater than 0s");
  }
  if (config->poll.inventory_interval != Duration(0) &&
      config->poll.inventory_interval < config->poll.interval) {
    err("poll.inventory_interval", "must be 0s (every poll) or at least poll.interval");
  }
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error", "off"};
  if (kLevels.count(config->log.level) == 0) {
    err("log.level",
        "\"" + config->log.level + "\" is not one of trace, debug, info, warn, error, off");
  }
  if (const std::string& dir = config->poll.storage_path; !dir.empty()) {
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      err("storage.path",
          "\"" + dir + "\" is not a directory (create it, writable by the exporter)");
    } else if (access(dir.c_str(), W_OK | X_OK) != 0) {
      err("storage.path", "\"" + dir + "\" is not writable by the exporter");
    }
  }
  if (config->log.format != "text" && config->log.format != "json") {
    err("log.format", "\"" + config->log.format + "\" is not text or json");
  }
  ValidateShard(&config->shard, err);
}

void ParseText(const std::string& text, const std::string& file, Config* config,
               std::vector<ConfigError>* errors, bool* timeout_set, KeyLines* lines) {
  // TOML is UTF-8 by definition, and toml11 3.7 reads past its buffer on some invalid sequences
  // (found by tests/fuzz/config_fuzz): refuse them before parsing.
  if (const size_t bad = FirstInvalidUtf8(text); bad != std::string::npos) {
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + bad, '\n'));
    errors->push_back({file, line, "", "not valid UTF-8 (byte " + std::to_string(bad) + ")"});
    return;
  }
  try {
    std::istringstream in(text);
    const toml::value doc = toml::parse(in, file);
    ParseDocument(doc, file, config, errors, timeout_set, lines);
  } catch (const toml::exception& e) {
    std::string msg = e.what();
    // toml11 formats a multi-line message with the source excerpt; keep its first line.
    const auto nl = msg.find('\n');
    if (nl != std::string::npos) msg.resize(nl);
    const std::string prefix = "[error] ";
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    errors->push_back({file, static_cast<int>(e.location().line()), "", "TOML syntax: " + msg});
  } catch (const std::exception& e) {
    errors->push_back({file, 0, "", std::string("cannot parse: ") + e.what()});
  }
}

// --shard.ordinal: a number or "auto".
void ApplyShardFlags(const Flags& flags, Config* config, KeyLines* lines,
                     std::vector<ConfigError>* errors) {
  if (flags.shard_total) {
    config->shard.total = *flags.shard_total;
    lines->erase("shard.total");
  }
  if (!flags.shard_ordinal) return;
  lines->erase("shard.ordinal");
  const std::string& v = *flags.shard_ordinal;
  config->shard.ordinal_auto = v == "auto";
  if (config->shard.ordinal_auto) return;
  if (!v.empty() && v.size() <= 4 && v.find_first_not_of("0123456789") == std::string::npos) {
    config->shard.ordinal = std::stoi(v);
    return;
  }
  errors->push_back({"", 0, "--shard.ordinal", "\"" + v + "\" is not a number or auto"});
}

// The flags that override the config file. A value set by a flag has no line in the file.
void ApplyFlags(const Flags& flags, Config* config, KeyLines* lines) {
  if (flags.listen_address) {
    config->web.listen_address = *flags.listen_address;
    lines->erase("web.listen_address");
  }
  if (flags.telemetry_path) {
    config->web.telemetry_path = *flags.telemetry_path;
    lines->erase("web.telemetry_path");
  }
  if (flags.poll_interval) {
    config->poll.interval = *flags.poll_interval;
    lines->erase("poll.interval");
  }
  if (flags.log_level) {
    config->log.level = *flags.log_level;
    lines->erase("log.level");
  }
  if (flags.log_format) {
    config->log.format = *flags.log_format;
    lines->erase("log.format");
  }
  if (flags.storage_path) {
    config->poll.storage_path = *flags.storage_path;
    lines->erase("storage.path");
  }
}

// Without [[targets]], one target "default" with --postgres.dsn, else $PGLOCK_EXPORTER_DSN, else
// libpq's defaults; --postgres.dsn overrides the DSN of a single configured target.
void ApplyDsn(const Flags& flags, const std::optional<std::string>& env_dsn, Config* config,
              std::vector<ConfigError>* errors) {
  if (config->targets.empty()) {
    TargetConfig target;
    target.name = "default";
    if (flags.dsn) {
      target.dsn = *flags.dsn;
    } else if (env_dsn) {
      target.dsn = *env_dsn;
    }
    std::string why;
    if (!target.dsn.empty() && !ValidateConninfo(target.dsn, &why)) {
      errors->push_back({"", 0, flags.dsn ? "--postgres.dsn" : "PGLOCK_EXPORTER_DSN", why});
    }
    config->targets.push_back(std::move(target));
  } else if (flags.dsn) {
    if (config->targets.size() > 1) {
      errors->push_back({config->file, 0, "--postgres.dsn",
                         "cannot override the DSN of a config with several targets"});
    } else {
      config->targets[0].dsn = *flags.dsn;
    }
  }
}

}  // namespace

std::map<std::string, int> KeyLinesOf(const toml::value& table) {
  std::map<std::string, int> lines{{"", static_cast<int>(table.location().line())}};
  for (const auto& [key, value] : table.as_table()) {
    lines[key] = static_cast<int>(value.location().line());
  }
  return lines;
}

bool WorldReadable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0;
}

bool ParseConfigText(const std::string& text, const std::string& file, Config* config,
                     std::vector<ConfigError>* errors) {
  const size_t before = errors->size();
  bool timeout_set = false;
  KeyLines lines;
  config->file = file;
  ParseText(text, file, config, errors, &timeout_set, &lines);
  ValidateMerged(config, timeout_set, lines, errors);
  return errors->size() == before;
}

bool LoadConfig(const Flags& flags, const std::optional<std::string>& env_dsn, Config* config,
                std::vector<ConfigError>* errors) {
  *config = Config{};
  const size_t before = errors->size();
  bool timeout_set = false;
  KeyLines lines;
  if (flags.config_file) {
    config->file = *flags.config_file;
    std::ifstream in(*flags.config_file, std::ios::binary);
    if (!in) {
      errors->push_back({*flags.config_file, 0, "", "cannot open the config file"});
      return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    ParseText(ss.str(), *flags.config_file, config, errors, &timeout_set, &lines);
    if (config->world_readable_secret && !WorldReadable(*flags.config_file)) {
      config->world_readable_secret = false;
    }
  }
  ApplyFlags(flags, config, &lines);
  ApplyShardFlags(flags, config, &lines, errors);
  ApplyDsn(flags, env_dsn, config, errors);
  ValidateMerged(config, timeout_set, lines, errors);
  return errors->size() == before;
}

namespace {

std::string ProblemAt(const std::string& file, const std::map<std::string, int>& lines,
                      const std::string& prefix, const std::string& key,
                      const std::string& message) {
  auto it = lines.find(key);
  if (it == lines.end()) it = lines.find("");
  return ConfigError{file, it == lines.end() ? 0 : it->second, prefix + key, message}.ToString();
}

}  // namespace

std::string LockNameConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.locks.", key, message);
}

std::string TargetConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.", key, message);
}

std::string ServerLogConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.server_log.", key, message);
}

std::string PoolerConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.poolers.", key, message);
}

std::string LeaseTableConfig::Problem(const std::string& key, const std::string& message) const {
  return ProblemAt(origin.file, origin.lines, "targets.leases.", key, message);
}

std::string ConfigError::ToString() const {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) out += ":" + std::to_string(line);
    out += ": ";
  }
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

}  // namespace pglock
