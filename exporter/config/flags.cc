#include <map>
#include <string_view>

#include "exporter/config/config.h"
#include "exporter/config/shard.h"

namespace pglock {
namespace {

enum class FlagKind { kValue, kSwitch };

const std::map<std::string, FlagKind, std::less<>>& KnownFlags() {
  static const std::map<std::string, FlagKind, std::less<>> kFlags = {
      {"config.file", FlagKind::kValue},        {"web.listen-address", FlagKind::kValue},
      {"web.telemetry-path", FlagKind::kValue}, {"postgres.dsn", FlagKind::kValue},
      {"poll.interval", FlagKind::kValue},      {"log.level", FlagKind::kValue},
      {"log.format", FlagKind::kValue},         {"storage.path", FlagKind::kValue},
      {"shard.ordinal", FlagKind::kValue},      {"shard.total", FlagKind::kValue},
      {"check-config", FlagKind::kSwitch},      {"check-targets", FlagKind::kSwitch},
      {"version", FlagKind::kSwitch},           {"help", FlagKind::kSwitch},
  };
  return kFlags;
}

// Sets the switch `name` (a FlagKind::kSwitch flag).
void SetSwitch(const std::string& name, Flags* flags) {
  if (name == "check-config") flags->check_config = true;
  if (name == "check-targets") flags->check_targets = true;
  if (name == "version") flags->version = true;
  if (name == "help") flags->help = true;
}

// Sets the value flag `name` (a FlagKind::kValue flag); an invalid value is an error.
void SetValue(const std::string& name, const std::string& value, Flags* flags,
              std::vector<ConfigError>* errors) {
  if (name == "config.file") {
    flags->config_file = value;
  } else if (name == "web.listen-address") {
    flags->listen_address = value;
  } else if (name == "web.telemetry-path") {
    flags->telemetry_path = value;
  } else if (name == "postgres.dsn") {
    flags->dsn = value;
  } else if (name == "poll.interval") {
    Duration interval{0};
    if (const Status s = ParseDuration(value, &interval); s.ok()) {
      flags->poll_interval = interval;
    } else {
      errors->push_back({"", 0, "--poll.interval", s.message()});
    }
  } else if (name == "log.level") {
    flags->log_level = value;
  } else if (name == "log.format") {
    flags->log_format = value;
  } else if (name == "storage.path") {
    flags->storage_path = value;
  } else if (name == "shard.ordinal") {
    flags->shard_ordinal = value;  // checked with the merged config: a number or "auto"
  } else if (name == "shard.total") {
    const bool digits = !value.empty() && value.size() <= 4 &&
                        value.find_first_not_of("0123456789") == std::string::npos;
    if (digits && std::stoi(value) >= 1 && std::stoi(value) <= kMaxShards) {
      flags->shard_total = std::stoi(value);
    } else {
      errors->push_back(
          {"", 0, "--shard.total", "must be a number from 1 to " + std::to_string(kMaxShards)});
    }
  }
}

}  // namespace

bool ParseFlags(const std::vector<std::string>& args, Flags* flags,
                std::vector<ConfigError>* errors) {
  const size_t before = errors->size();
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h") arg = "--help";
    if (arg.rfind("--", 0) != 0) {
      errors->push_back({"", 0, std::string(arg), "unexpected argument (flags start with --)"});
      continue;
    }
    arg.remove_prefix(2);
    std::string name(arg);
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const auto it = KnownFlags().find(name);
    if (it == KnownFlags().end()) {
      errors->push_back({"", 0, "--" + name, "unknown flag (see --help)"});
      continue;
    }
    if (it->second == FlagKind::kSwitch) {
      if (value && *value != "true") {
        errors->push_back({"", 0, "--" + name, "takes no value"});
        continue;
      }
      SetSwitch(name, flags);
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        errors->push_back({"", 0, "--" + name, "needs a value"});
        continue;
      }
      value = args[++i];
    }
    SetValue(name, *value, flags, errors);
  }
  return errors->size() == before;
}

std::string FlagsUsage() {
  return R"(Usage: pglock_exporter [flags]

Prometheus exporter for PostgreSQL advisory locks, idle-in-transaction lock holders,
timeouts that drop locks, and application lease tables.

Flags (they override the config file):
  --config.file=PATH            TOML config file (targets, locks, leases, poolers)
  --web.listen-address=ADDR     address to listen on (default ":9716")
  --web.telemetry-path=PATH     path of the metrics endpoint (default "/metrics")
  --postgres.dsn=CONNINFO       libpq DSN of the single target (else $PGLOCK_EXPORTER_DSN,
                                else libpq defaults: PGHOST, PGPORT, PGUSER, PGPASSFILE, ...)
  --poll.interval=DURATION      time between polls (default 5s)
  --log.level=LEVEL             trace, debug, info, warn, error, off (default info)
  --log.format=FORMAT           text or json (default text)
  --storage.path=DIR            keep each target's state here across restarts (default: none)
  --shard.ordinal=N|auto        poll only the targets of shard N (auto: N from the host name's
                                trailing -<n>, a StatefulSet pod's ordinal) (default 0)
  --shard.total=M               the number of shards sharing the config's targets (default 1)
  --check-config                validate the config and exit (0 valid, 2 invalid)
  --check-targets               validate the config, then connect once to every target, pooler
                                and lock table's database and print what the config resolves to
                                there: keys, holders, lock tables, privileges (0 all resolve,
                                1 a problem, 2 invalid config); never writes, takes no lock
  --version                     print the version and exit
  --help                        print this help and exit

Signals: SIGTERM/SIGINT stop, SIGHUP reloads the config file (the old one stays on error).
)";
}

}  // namespace pglock
