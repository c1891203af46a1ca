// What config.cc and config_targets.cc share while parsing a config file: the TableReader that
// walks one TOML table and reports each problem with its file, line and dotted key, and the
// parser of one [[targets]] table. Internal to exporter/config/; not thread-safe (one parse at a
// time per reader).
#pragma once

#include <map>
#include <set>
#include <string>
#include <toml.hpp>
#include <utility>
#include <vector>

#include "exporter/config/config.h"

namespace pglock {

// Walks one TOML table, remembering which keys were read so the rest can be reported as unknown.
// All errors go to the shared list with the file, line and dotted key.
class TableReader {
 public:
  TableReader(const toml::value& table, std::string prefix, const std::string& file,
              std::vector<ConfigError>* errors)
      : table_(table), prefix_(std::move(prefix)), file_(file), errors_(errors) {}

  ~TableReader() = default;
  TableReader(const TableReader&) = delete;
  TableReader& operator=(const TableReader&) = delete;

  bool Has(const std::string& key) const { return table_.as_table().count(key) != 0; }

  const toml::value* Get(const std::string& key) {
    seen_.insert(key);
    const auto& t = table_.as_table();
    const auto it = t.find(key);
    return it == t.end() ? nullptr : &it->second;
  }

  void String(const std::string& key, std::string* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) {
      Error(*v, key, "must be a string");
      return;
    }
    *out = v->as_string().str;
  }

  void Integer(const std::string& key, int64_t min, int64_t max, int64_t* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_integer()) {
      Error(*v, key, "must be an integer");
      return;
    }
    const int64_t n = v->as_integer();
    if (n < min || n > max) {
      Error(*v, key,
            "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                std::to_string(n));
      return;
    }
    *out = n;
  }

  void Bool(const std::string& key, bool* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) {
      Error(*v, key, "must be true or false");
      return;
    }
    *out = v->as_boolean();
  }

  void Int(const std::string& key, int min, int max, int* out) {
    int64_t n = *out;
    Integer(key, min, max, &n);
    *out = static_cast<int>(n);
  }

  // Returns true when the key was present (valid or not: an invalid one is recorded as an error).
  bool DurationValue(const std::string& key, Duration* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return false;
    if (!v->is_string()) {
      Error(*v, key, "must be a duration string such as \"5s\"");
      return true;
    }
    if (const Status s = ParseDuration(v->as_string().str, out); !s.ok()) {
      Error(*v, key, s.message());
    }
    return true;
  }

  void StringArray(const std::string& key, std::vector<std::string>* out) {
    const toml::value* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_array()) {
      Error(*v, key, "must be an array of strings");
      return;
    }
    for (const auto& item : v->as_array()) {
      if (!item.is_string()) {
        Error(item, key, "must be an array of strings");
        return;
      }
      out->push_back(item.as_string().str);
    }
  }

  // Array of tables ([[x]]); returns the element values, or empty after an error.
  std::vector<const toml::value*> Tables(const std::string& key) {
    std::vector<const toml::value*> out;
    const toml::value* v = Get(key);
    if (v == nullptr) return out;
    if (!v->is_array()) {
      Error(*v, key, "must be an array of tables ([[" + Dotted(key) + "]])");
      return out;
    }
    for (const auto& item : v->as_array()) {
      if (!item.is_table()) {
        Error(item, key, "must be an array of tables ([[" + Dotted(key) + "]])");
        return {};
      }
      out.push_back(&item);
    }
    return out;
  }

  // A sub-table ([x]); nullptr when absent or after an error.
  const toml::value* Table(const std::string& key) {
    const toml::value* v = Get(key);
    if (v == nullptr) return nullptr;
    if (!v->is_table()) {
      Error(*v, key, "must be a table ([" + Dotted(key) + "])");
      return nullptr;
    }
    return v;
  }

  // Reports every key of this table that no accessor asked for.
  void RejectUnknown() {
    for (const auto& [key, value] : table_.as_table()) {
      if (seen_.count(key) == 0) Error(value, key, "unknown key");
    }
  }

  void Error(const toml::value& at, const std::string& key, const std::string& message) {
    errors_->push_back({file_, static_cast<int>(at.location().line()), Dotted(key), message});
  }

  // An error about `key` found by a check on the table (a conflict between keys, a duplicate):
  // at the key's line, or at the table's line when the key is absent (a missing key).
  void TableError(const std::string& key, const std::string& message) {
    const int line = LineOf(key);
    errors_->push_back({file_, line > 0 ? line : Line(), Dotted(key), message});
  }

  std::string Dotted(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }

  int Line() const { return static_cast<int>(table_.location().line()); }

  // The line of `key`'s value, 0 when absent.
  int LineOf(const std::string& key) const {
    const auto& t = table_.as_table();
    const auto it = t.find(key);
    return it == t.end() ? 0 : static_cast<int>(it->second.location().line());
  }

 private:
  const toml::value& table_;
  const std::string prefix_;
  const std::string& file_;
  std::vector<ConfigError>* errors_;
  std::set<std::string> seen_;
};

// Records the line of every key of the table, and the table's own line under "".
std::map<std::string, int> KeyLinesOf(const toml::value& table);

// True when others than the owner may read the file at `path`.
bool WorldReadable(const std::string& path);

// One [[targets]] table: its connection, locks, leases, poolers and server_log. *secret when a
// password sits in the config itself or in a file others can read.
void ParseTarget(TableReader& r, const std::string& file, std::vector<ConfigError>* errors,
                 TargetConfig* target, bool* secret);

}  // namespace pglock
