#include "exporter/metrics/families.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "exporter/metrics/labels.h"

namespace pglock {
namespace {

using prometheus::MetricType;

std::string_view TypeName(MetricType t) {
  switch (t) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
    case MetricType::Summary:
      return "summary";
    default:
      return "untyped";
  }
}

// A sample value as the format spells it: NaN, +Inf, -Inf, else the shortest of 16 significant
// digits (what prometheus-cpp's serializer wrote, so values read the same as before).
void AppendValue(double v, std::string* out) {
  if (std::isnan(v)) {
    *out += "NaN";
  } else if (std::isinf(v)) {
    *out += v < 0 ? "-Inf" : "+Inf";
  } else {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 16);
    out->append(buf, r.ptr);
  }
}

// A histogram's count: a whole number of observations, written as one; anything else (never
// expected) as a value rather than through an undefined conversion.
void AppendCount(double v, std::string* out) {
  if (!(v >= 0 && v < 1e19)) {
    AppendValue(v, out);
    return;
  }
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<uint64_t>(v));
  out->append(buf, r.ptr);
}

// Label values escape backslash, double quote and newline; help text backslash and newline.
void AppendEscaped(std::string_view s, bool quotes, std::string* out) {
  for (const char c : s) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '"' && quotes) {
      *out += "\\\"";
    } else {
      *out += c;
    }
  }
}

}  // namespace

// One family's text and the label blocks of its series, for finding a repeat without a node per
// series: an open-addressed table of series numbers (0 is empty), hashed by the label block's
// bytes in `body`.
struct Families::Family {
  struct Span {
    size_t begin = 0;
    size_t size = 0;
  };

  std::string name;
  std::string help;
  MetricType type = MetricType::Untyped;
  std::string body;
  std::vector<Span> series;     // each series' label block in body ("" without labels)
  std::vector<uint32_t> slots;  // series number + 1, or 0

  std::string_view Block(const Span& s) const {
    return std::string_view(body).substr(s.begin, s.size);
  }

  // Records the label block `s` (the last thing written to body) as a new series; false when an
  // earlier series has the same block.
  bool Insert(Span s) {
    if ((series.size() + 1) * 2 > slots.size()) Grow();
    const std::string_view block = Block(s);
    size_t i = std::hash<std::string_view>{}(block) & (slots.size() - 1);
    for (; slots[i] != 0; i = (i + 1) & (slots.size() - 1)) {
      if (Block(series[slots[i] - 1]) == block) return false;
    }
    series.push_back(s);
    slots[i] = static_cast<uint32_t>(series.size());
    return true;
  }

  void Grow() {
    slots.assign(slots.empty() ? 16 : slots.size() * 2, 0);
    for (size_t n = 0; n < series.size(); ++n) {
      size_t i = std::hash<std::string_view>{}(Block(series[n])) & (slots.size() - 1);
      while (slots[i] != 0) i = (i + 1) & (slots.size() - 1);
      slots[i] = static_cast<uint32_t>(n + 1);
    }
  }
};

Families::Families() = default;
Families::~Families() = default;

Families::Family& Families::Get(const MetricDesc& desc) {
  if (const auto it = index_.find(desc.name); it != index_.end()) return *it->second;
  auto f = std::make_unique<Family>();
  f->name = desc.name;
  f->help = desc.help;
  f->type = desc.type;
  Family& family = *f;
  families_.push_back(std::move(f));
  index_.emplace(family.name, &family);
  return family;
}

template <typename Each>
bool Families::BeginSeries(Family& family, std::string_view suffix, size_t count, Each each) {
  std::string& body = family.body;
  const size_t line = body.size();
  body += family.name;
  body += suffix;
  Family::Span block{body.size(), 0};
  if (count > 0) {
    body += '{';
    for (size_t i = 0; i < count; ++i) {
      std::string_view name;
      std::string_view value;
      each(i, &name, &value);
      if (i > 0) body += ',';
      body += name;
      body += "=\"";
      scratch_.clear();
      AppendSanitizedLabelValue(value, &scratch_);
      AppendEscaped(scratch_, true, &body);
      body += '"';
    }
    body += '}';
    block.size = body.size() - block.begin;
  }
  // Two rows can sanitise to the same labels (a lock held in both modes by one session,
  // different invalid bytes): a duplicate series would make Prometheus drop samples. Keep the
  // first, which is the most severe since detail rows are sorted.
  if (!family.Insert(block)) {
    body.resize(line);
    return false;
  }
  return true;
}

template <typename Each>
void Families::AddSeries(const MetricDesc& desc, size_t count, Each each, double value) {
  Family& family = Get(desc);
  if (!BeginSeries(family, "", count, each)) return;
  family.body += ' ';
  AppendValue(value, &family.body);
  family.body += '\n';
}

void Families::Add(const MetricDesc& desc, Values values, double value) {
  if (values.size() != desc.labels.size()) return;
  AddSeries(
      desc, values.size(),
      [&](size_t i, std::string_view* name, std::string_view* v) {
        *name = desc.labels[i];
        *v = values.begin()[i];
      },
      value);
}

void Families::Add(const MetricDesc& desc, const std::vector<std::string>& values, double value) {
  if (values.size() != desc.labels.size()) return;
  AddSeries(
      desc, values.size(),
      [&](size_t i, std::string_view* name, std::string_view* v) {
        *name = desc.labels[i];
        *v = values[i];
      },
      value);
}

void Families::AddLabelled(const MetricDesc& desc, const Labels& labels, double value) {
  AddSeries(
      desc, labels.size(),
      [&](size_t i, std::string_view* name, std::string_view* v) {
        *name = labels[i].first;
        *v = labels[i].second;
      },
      value);
}

void Families::AddHistogram(const MetricDesc& desc, Values values,
                            const std::vector<double>& bounds,
                            const std::vector<double>& cumulative, double sum, double count) {
  if (values.size() != desc.labels.size() || bounds.size() != cumulative.size()) return;
  Family& family = Get(desc);
  const auto each = [&](size_t i, std::string_view* name, std::string_view* v) {
    *name = desc.labels[i];
    *v = values.begin()[i];
  };
  if (!BeginSeries(family, "_count", values.size(), each)) return;
  std::string& body = family.body;
  const std::string labels(family.Block(family.series.back()));  // "{...}" or ""
  body += ' ';
  AppendCount(count, &body);
  body += '\n';
  body += family.name;
  body += "_sum";
  body += labels;
  body += ' ';
  AppendValue(sum, &body);
  body += '\n';
  // The bucket's labels: the series' own and `le`.
  const std::string_view open = labels.empty()
                                    ? std::string_view("{")
                                    : std::string_view(labels).substr(0, labels.size() - 1);
  const std::string_view comma = labels.empty() ? "" : ",";
  const auto bucket = [&](double bound, double n) {
    body += family.name;
    body += "_bucket";
    body += open;
    body += comma;
    body += "le=\"";
    AppendValue(bound, &body);
    body += "\"} ";
    AppendCount(n, &body);
    body += '\n';
  };
  for (size_t i = 0; i < bounds.size(); ++i) bucket(bounds[i], cumulative[i]);
  bucket(std::numeric_limits<double>::infinity(), count);
}

std::string Families::Text() const {
  size_t size = 0;
  for (const auto& f : families_) size += f->name.size() * 2 + f->help.size() + 32 + f->body.size();
  std::string out;
  out.reserve(size);
  for (const auto& f : families_) {
    if (!f->help.empty()) {
      out += "# HELP ";
      out += f->name;
      out += ' ';
      AppendEscaped(f->help, false, &out);
      out += '\n';
    }
    out += "# TYPE ";
    out += f->name;
    out += ' ';
    out += TypeName(f->type);
    out += '\n';
    out += f->body;
  }
  return out;
}

}  // namespace pglock
