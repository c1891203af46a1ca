// MetricDesc and Families: how a collector states the metrics it owns (name, type, help, label
// names, next to the code that fills them) and adds series to a scrape. Families writes each
// series straight into its family's exposition text (format 0.0.4): no per-series objects, so a
// render of a thousand series costs a few growing buffers, not thousands of small allocations
// that outlive it in the heap. It keeps each family once, in first-use order, sanitises every
// label value (any bytes from the database become valid UTF-8 of bounded length) and drops a
// series whose sanitised labels repeat. Thread-compatible: one Families per scrape.
#pragma once

#include <prometheus/metric_type.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pglock {

struct MetricDesc {
  const char* name;
  prometheus::MetricType type;
  const char* help;
  std::vector<const char*> labels;  // label names, in the order Add() takes their values
};

class Families {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  using Values = std::initializer_list<std::string_view>;

  Families();
  ~Families();
  Families(const Families&) = delete;
  Families& operator=(const Families&) = delete;

  // `values` in the order of desc.labels (a mismatch is a programming error: the series is
  // dropped rather than emitted with the wrong labels). The braced form takes views: nothing is
  // copied for a series but its text.
  void Add(const MetricDesc& desc, Values values, double value);
  void Add(const MetricDesc& desc, const std::vector<std::string>& values, double value);
  // For families whose label names come from the config (holder_labels).
  void AddLabelled(const MetricDesc& desc, const Labels& labels, double value);

  // A histogram series: `bounds` ascending (no +Inf), `cumulative` counts per bound.
  void AddHistogram(const MetricDesc& desc, Values values, const std::vector<double>& bounds,
                    const std::vector<double>& cumulative, double sum, double count);

  // The text of every family: `# HELP` (when there is help) and `# TYPE`, then its series.
  std::string Text() const;

 private:
  struct Family;

  Family& Get(const MetricDesc& desc);
  // Writes `name` and the label block of a new series of `family`; false (and nothing written)
  // when a series with the same sanitised labels is already there.
  template <typename Each>
  bool BeginSeries(Family& family, std::string_view suffix, size_t count, Each each);
  // A counter, gauge or untyped series: BeginSeries, then its value. `each(i, &name, &value)`
  // gives the i-th label.
  template <typename Each>
  void AddSeries(const MetricDesc& desc, size_t count, Each each, double value);

  std::vector<std::unique_ptr<Family>> families_;        // first-use order
  std::unordered_map<std::string_view, Family*> index_;  // by name (views of Family::name)
  std::string scratch_;                                  // one sanitised label value
};

// Label value helpers shared by the collectors: "" client address is a Unix socket ("local"),
// "" state is a session the exporter's role cannot see ("unknown").
inline std::string AddrLabel(const std::string& a) { return a.empty() ? "local" : a; }
inline std::string StateLabel(const std::string& s) { return s.empty() ? "unknown" : s; }

}  // namespace pglock
