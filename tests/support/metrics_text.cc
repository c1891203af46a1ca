#include "tests/support/metrics_text.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "exporter/http/exposition.h"

namespace pglock::testing {

std::string Serialize(const std::vector<std::shared_ptr<const TargetSnapshot>>& targets) {
  return ExpositionText(targets, {"test", "test"});
}

namespace {

// "\\", "\\n" and (in label values) "\\\"" back to the bytes they stand for.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      out += s[i] == 'n' ? '\n' : s[i];
    } else {
      out += s[i];
    }
  }
  return out;
}

double ParseValue(const std::string& v) {
  if (v == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (v == "+Inf") return std::numeric_limits<double>::infinity();
  if (v == "-Inf") return -std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') ADD_FAILURE() << "bad sample value \"" << v << "\"";
  return d;
}

prometheus::MetricType TypeOf(const std::string& name) {
  using prometheus::MetricType;
  if (name == "counter") return MetricType::Counter;
  if (name == "gauge") return MetricType::Gauge;
  if (name == "histogram") return MetricType::Histogram;
  if (name == "summary") return MetricType::Summary;
  if (name != "untyped") ADD_FAILURE() << "unknown type " << name;
  return MetricType::Untyped;
}

}  // namespace

std::vector<prometheus::MetricFamily> ParseFamilies(const std::string& text) {
  using prometheus::ClientMetric;
  using prometheus::MetricFamily;
  using prometheus::MetricType;
  std::vector<MetricFamily> out;
  std::string help;  // of the family the next TYPE line opens
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0) {
      const size_t space = line.find(' ', 7);
      help = space == std::string::npos ? "" : Unescape(std::string_view(line).substr(space + 1));
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const size_t space = line.find(' ', 7);
      MetricFamily f;
      f.name = line.substr(7, space - 7);
      f.help = std::move(help);
      help.clear();
      f.type = TypeOf(space == std::string::npos ? "" : line.substr(space + 1));
      out.push_back(std::move(f));
      continue;
    }
    if (line[0] == '#') continue;
    // name{labels} value, with quoted values that may hold spaces, braces and escapes.
    size_t i = line.find_first_of("{ ");
    const std::string name = line.substr(0, i);
    std::vector<prometheus::ClientMetric::Label> labels;
    if (i != std::string::npos && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find("=\"", i);
        if (eq == std::string::npos) break;
        size_t end = eq + 2;
        while (end < line.size() && line[end] != '"') end += line[end] == '\\' ? 2 : 1;
        labels.push_back({line.substr(i, eq - i),
                          Unescape(std::string_view(line).substr(eq + 2, end - eq - 2))});
        i = end + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;
    }
    if (out.empty() || i >= line.size() || line[i] != ' ') {
      ADD_FAILURE() << "unreadable sample line: " << line.substr(0, 200);
      continue;
    }
    const double value = ParseValue(line.substr(i + 1));
    MetricFamily& f = out.back();
    if (f.type != MetricType::Histogram) {
      if (name != f.name) ADD_FAILURE() << name << " under the family " << f.name;
      ClientMetric m;
      m.label = std::move(labels);
      m.counter.value = m.gauge.value = m.untyped.value = value;
      f.metric.push_back(std::move(m));
      continue;
    }
    // A histogram series starts at its _count line; _sum and _bucket lines follow it.
    if (name == f.name + "_count") {
      ClientMetric m;
      m.label = std::move(labels);
      m.histogram.sample_count = static_cast<std::uint64_t>(value);
      f.metric.push_back(std::move(m));
    } else if (name == f.name + "_sum" && !f.metric.empty()) {
      f.metric.back().histogram.sample_sum = value;
    } else if (name == f.name + "_bucket" && !f.metric.empty() && !labels.empty() &&
               labels.back().name == "le") {
      f.metric.back().histogram.bucket.push_back(
          {static_cast<std::uint64_t>(value), ParseValue(labels.back().value)});
    } else {
      ADD_FAILURE() << "unexpected histogram line: " << line.substr(0, 200);
    }
  }
  return out;
}

std::vector<Sample> ParseSamples(const std::string& text) {
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key, value;
        while (i < line.size() && line[i] != '=') key += line[i++];
        i += 2;  // ="
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            const char n = line[i + 1];
            value += n == 'n' ? '\n' : n;
            i += 2;
          } else {
            value += line[i++];
          }
        }
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
        s.labels[key] = value;
      }
      ++i;  // }
    }
    s.value = std::strtod(line.c_str() + i, nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> Select(const std::vector<Sample>& samples, const std::string& name,
                           const std::map<std::string, std::string>& match) {
  std::vector<Sample> out;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : match) {
      const auto it = s.labels.find(k);
      ok = ok && it != s.labels.end() && it->second == v;
    }
    if (ok) out.push_back(s);
  }
  return out;
}

std::optional<double> Value(const std::vector<Sample>& samples, const std::string& name,
                            const std::map<std::string, std::string>& match) {
  const auto found = Select(samples, name, match);
  if (found.empty()) return std::nullopt;
  return found.front().value;
}

double Sum(const std::vector<Sample>& samples, const std::string& name,
           const std::map<std::string, std::string>& match) {
  return SumPresent(samples, name, match).value_or(0);
}

std::optional<double> SumPresent(const std::vector<Sample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& match) {
  const auto found = Select(samples, name, match);
  if (found.empty()) return std::nullopt;
  double sum = 0;
  for (const Sample& s : found) sum += s.value;
  return sum;
}

namespace {

// An environment variable set to anything but "", "0" or "false".
bool EnvOn(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s = v;
  return !s.empty() && s != "0" && s != "false";
}

// Each run of decimal digits in `s` as one 0, appended to *out.
void CollapseDigits(std::string_view s, std::string* out) {
  bool digits = false;
  for (const char c : s) {
    const bool digit = c >= '0' && c <= '9';
    if (!digit) *out += c;
    if (digit && !digits) *out += '0';
    digits = digit;
  }
}

// Label values, each replaced by the order of its first appearance in a text.
using Ordinals = std::unordered_map<std::string_view, size_t>;

// A label value that promtool reads as it reads any other: printable ASCII without a quote or a
// backslash, so nothing in it is escaped and no byte of it can be invalid.
bool Plain(std::string_view value) {
  return std::all_of(value.begin(), value.end(),
                     [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
}

// A sample's value that promtool parses as it parses every other such value: a decimal number,
// with or without a fraction and an exponent ("0", "12.5", "1e-05", "-3"). NaN and the infinities
// are not, and stay as they are.
bool DecimalNumber(std::string_view v) {
  size_t i = v.empty() || (v[0] != '+' && v[0] != '-') ? 0 : 1;
  const auto digits = [&] {
    const size_t from = i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
    return i - from;
  };
  size_t mantissa = digits();
  if (i < v.size() && v[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == v.size();
}

// A series' name and labels with each plain label value replaced by its ordinal (the same value
// the same ordinal, so that two series stay two and one named twice stays so); the values of `le`
// and `quantile`, which promtool parses as numbers, and values with escapes or bytes beyond ASCII,
// whose escaping is what promtool checks, as they are.
std::string NumberLabels(std::string_view key, Ordinals* ordinals) {
  std::string out;
  out.reserve(key.size());
  size_t i = 0;
  while (i < key.size()) {
    const size_t quote = key.find("=\"", i);
    if (quote == std::string_view::npos) break;
    const size_t name_start = key.find_last_of("{,", quote) + 1;
    const std::string_view name = key.substr(name_start, quote - name_start);
    out.append(key.substr(i, quote + 2 - i));
    size_t j = quote + 2;  // the value's first byte; it ends at an unescaped quote
    while (j < key.size() && key[j] != '"') j += key[j] == '\\' ? 2 : 1;
    j = std::min(j, key.size());
    const std::string_view value = key.substr(quote + 2, j - quote - 2);
    if (name == "le" || name == "quantile" || !Plain(value)) {
      out.append(value);
    } else {
      const auto [it, added] = ordinals->try_emplace(value, ordinals->size());
      out += 'v';
      out += std::to_string(it->second);
    }
    i = j;
  }
  out.append(key.substr(std::min(i, key.size())));
  return out;
}

}  // namespace

// The text reduced to its form: each sample's value that is a decimal number as 0 ("12.5",
// "1e-05" -> "0"; "NaN" and "+Inf" kept, other values with each run of digits as one 0), and each
// plain label value (pids, ports, times, application names, versions) replaced by the order of
// its first appearance; names, help, types, the values of `le` and `quantile` and label values
// with escapes or bytes beyond ASCII as they are. Two texts of one form pass or fail promtool
// check metrics alike: what it checks (the syntax and escapes, the names, help and types, series
// named twice) never depends on a number's digits or on which plain characters a value has.
std::string PromtoolForm(const std::string& text) {
  Ordinals ordinals;
  std::string form;
  form.reserve(text.size());
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    const size_t space = line.rfind(' ');
    if (line.empty() || line[0] == '#' || space == std::string_view::npos) {
      form.append(line);
    } else {
      form.append(NumberLabels(line.substr(0, space + 1), &ordinals));
      const std::string_view value = line.substr(space + 1);
      if (DecimalNumber(value)) {
        form += '0';
      } else {
        CollapseDigits(value, &form);
      }
    }
    form += '\n';
    start = end + 1;
  }
  return form;
}

namespace {

// The directory of forms that passed in other test processes of this run ($PGLOCK_PROMTOOL_PASSED,
// set by scripts/test.sh for one run; "" when unset): a file per form, named by its hash and
// holding the form, so that a hash shared by two forms is never taken for a pass.
std::string SharedDir() {
  const char* dir = std::getenv("PGLOCK_PROMTOOL_PASSED");
  return dir != nullptr ? dir : "";
}

std::string SharedPath(const std::string& dir, const std::string& form) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (const unsigned char c : form) h = (h ^ c) * 1099511628211ULL;
  char name[17];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(h));
  return dir + "/" + name;
}

bool PassedElsewhere(const std::string& form) {
  const std::string dir = SharedDir();
  if (dir.empty()) return false;
  std::ifstream in(SharedPath(dir, form), std::ios::binary);
  if (!in) return false;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str() == form;
}

// Written under another name and renamed, so that a reader never sees half a form.
void RecordPass(const std::string& form) {
  const std::string dir = SharedDir();
  if (dir.empty()) return;
  const std::string path = SharedPath(dir, form);
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << form;
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace

bool PromtoolCheck(const std::string& text, std::string* output) {
  // promtool starts in 0.13 s of CPU and the integration tests check a text at every scrape, most
  // of them alike but for their values: a form that passed once, in this process or in another
  // of the same run, is not checked again.
  static std::mutex passed_mu;
  static std::unordered_set<std::string> passed;
  const std::string form = PromtoolForm(text);
  {
    const std::lock_guard<std::mutex> lock(passed_mu);
    if (passed.count(form) != 0) {
      *output = "the same form passed promtool check metrics before";
      return true;
    }
  }
  if (PassedElsewhere(form)) {
    const std::lock_guard<std::mutex> lock(passed_mu);
    passed.insert(form);
    *output = "the same form passed promtool check metrics in another test of this run";
    return true;
  }
  if (access("/usr/bin/promtool", X_OK) != 0) {
    if (EnvOn("PGLOCK_REQUIRE_PROMTOOL") || EnvOn("CI")) {
      *output =
          "promtool is not installed (/usr/bin/promtool) but required here "
          "(PGLOCK_REQUIRE_PROMTOOL or CI is set): the exposition text cannot be checked";
      return false;
    }
    static std::once_flag warned;
    std::call_once(warned, [] {
      std::cerr << "WARNING: promtool is not installed (/usr/bin/promtool): the exposition text "
                   "is NOT checked by promtool check metrics. Install it (package prometheus) or "
                   "set PGLOCK_REQUIRE_PROMTOOL=1 to make this a failure.\n";
    });
    *output = "promtool not installed: not checked";
    return true;
  }
  char path[] = "/tmp/pglock_metrics_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return false;
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    close(fd);
    return false;
  }
  close(fd);
  // One thread of the Go runtime: a fifth less CPU a start, and the check is single-threaded.
  const std::string cmd =
      std::string("GOMAXPROCS=1 /usr/bin/promtool check metrics < ") + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string result;
  char buf[4096];
  size_t n = 0;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) result.append(buf, n);
  const int status = p != nullptr ? pclose(p) : -1;
  unlink(path);
  *output = result;
  if (status != 0) return false;
  RecordPass(form);
  const std::lock_guard<std::mutex> lock(passed_mu);
  passed.insert(form);
  return true;
}

std::vector<Sample> CheckedSamples(std::shared_ptr<const TargetSnapshot> snapshot) {
  const std::string text = Serialize({std::move(snapshot)});
  std::string out;
  EXPECT_TRUE(PromtoolCheck(text, &out)) << out << "\n" << text;
  return ParseSamples(text);
}

std::vector<Sample> PollAndScrape(Poller& poller) {
  poller.PollOnceForTest();
  return CheckedSamples(poller.Latest());
}

}  // namespace pglock::testing
