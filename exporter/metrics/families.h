// MetricDesc and Families: how a collector states the metrics it owns (name, type, help, label
// names, next to the code that fills them) and adds series to a scrape. Families keeps each
// family once, in first-use order, sanitises every label value (any bytes from the database
// become valid UTF-8 of bounded length) and drops a series whose sanitised labels repeat.
// Thread-compatible: one Families per scrape.
#pragma once

#include <prometheus/metric_family.h>

#include <map>
#include <set>
#include <string>
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

  // `values` in the order of desc.labels (a mismatch is a programming error: the series is
  // dropped rather than emitted with the wrong labels).
  void Add(const MetricDesc& desc, const std::vector<std::string>& values, double value);
  // For families whose label names come from the config (holder_labels).
  void AddLabelled(const MetricDesc& desc, const Labels& labels, double value);

  // A histogram series: `bounds` ascending (no +Inf), `cumulative` counts per bound.
  void AddHistogram(const MetricDesc& desc, const std::vector<std::string>& values,
                    const std::vector<double>& bounds, const std::vector<double>& cumulative,
                    double sum, double count);

  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  // The new series of `desc` with `labels` (sanitised), or null when it repeats one.
  prometheus::ClientMetric* NewSeries(const MetricDesc& desc, const Labels& labels);

  std::vector<prometheus::MetricFamily> families_;
  std::map<std::string, size_t> index_;
  std::vector<std::set<std::string>> seen_;  // per family: label values already emitted
};

// Label value helpers shared by the collectors: "" client address is a Unix socket ("local"),
// "" state is a session the exporter's role cannot see ("unknown").
inline std::string AddrLabel(const std::string& a) { return a.empty() ? "local" : a; }
inline std::string StateLabel(const std::string& s) { return s.empty() ? "unknown" : s; }

}  // namespace pglock
