#include "exporter/metrics/families.h"

#include <cstdint>
#include <limits>

#include "exporter/metrics/labels.h"

namespace pglock {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

void Families::Add(const MetricDesc& desc, const std::vector<std::string>& values, double value) {
  if (values.size() != desc.labels.size()) return;
  Labels labels;
  labels.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) labels.emplace_back(desc.labels[i], values[i]);
  AddLabelled(desc, labels, value);
}

void Families::AddLabelled(const MetricDesc& desc, const Labels& labels, double value) {
  ClientMetric* m = NewSeries(desc, labels);
  if (m == nullptr) return;
  switch (desc.type) {
    case MetricType::Counter:
      m->counter.value = value;
      break;
    case MetricType::Gauge:
      m->gauge.value = value;
      break;
    default:
      m->untyped.value = value;
      break;
  }
}

void Families::AddHistogram(const MetricDesc& desc, const std::vector<std::string>& values,
                            const std::vector<double>& bounds,
                            const std::vector<double>& cumulative, double sum, double count) {
  if (values.size() != desc.labels.size() || bounds.size() != cumulative.size()) return;
  Labels labels;
  for (size_t i = 0; i < values.size(); ++i) labels.emplace_back(desc.labels[i], values[i]);
  ClientMetric* m = NewSeries(desc, labels);
  if (m == nullptr) return;
  for (size_t i = 0; i < bounds.size(); ++i) {
    m->histogram.bucket.push_back({static_cast<std::uint64_t>(cumulative[i]), bounds[i]});
  }
  m->histogram.bucket.push_back(
      {static_cast<std::uint64_t>(count), std::numeric_limits<double>::infinity()});
  m->histogram.sample_count = static_cast<std::uint64_t>(count);
  m->histogram.sample_sum = sum;
}

ClientMetric* Families::NewSeries(const MetricDesc& desc, const Labels& labels) {
  auto it = index_.find(desc.name);
  if (it == index_.end()) {
    MetricFamily f;
    f.name = desc.name;
    f.help = desc.help;
    f.type = desc.type;
    families_.push_back(std::move(f));
    it = index_.emplace(desc.name, families_.size() - 1).first;
    seen_.emplace_back();
  }
  ClientMetric m;
  std::string identity;
  for (const auto& [k, v] : labels) {
    m.label.push_back({k, SanitizeLabelValue(v)});
    identity += m.label.back().value;
    identity += '\xff';  // never inside a sanitised (valid UTF-8) value
  }
  // Two rows can sanitise to the same labels (a lock held in both modes by one session,
  // different invalid bytes): a duplicate series would make Prometheus drop samples. Keep the
  // first, which is the most severe since detail rows are sorted.
  if (!seen_[it->second].insert(std::move(identity)).second) return nullptr;
  families_[it->second].metric.push_back(std::move(m));
  return &families_[it->second].metric.back();
}

}  // namespace pglock
