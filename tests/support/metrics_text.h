// Test helpers around the exposition text: serialise snapshots as /metrics would, parse samples
// back, look them up by labels, and run `promtool check metrics`.
#pragma once

#include <prometheus/metric_family.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/poll/poller.h"
#include "exporter/snapshot/snapshot.h"

namespace pglock::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::string Serialize(const std::vector<std::shared_ptr<const TargetSnapshot>>& targets);
std::vector<Sample> ParseSamples(const std::string& text);

// The families of an exposition text, as a scraper reads them: help and type from the comments,
// every sample under its family (a histogram's _count, _sum and _bucket lines as one series).
// For tests that look at a family's series and labels; ADD_FAILURE on a line it cannot read.
std::vector<prometheus::MetricFamily> ParseFamilies(const std::string& text);

// Samples of `name` whose labels include every pair of `match`.
std::vector<Sample> Select(const std::vector<Sample>& samples, const std::string& name,
                           const std::map<std::string, std::string>& match = {});
std::optional<double> Value(const std::vector<Sample>& samples, const std::string& name,
                            const std::map<std::string, std::string>& match = {});
// Sum over the matching samples, 0 if none: only for counts that may not exist yet (a baseline
// taken before the first event, a condition polled until it holds). A missing series is not a
// zero: assert a count with SumPresent.
double Sum(const std::vector<Sample>& samples, const std::string& name,
           const std::map<std::string, std::string>& match = {});
// Sum over the matching samples, nullopt when none matches, so that
// EXPECT_EQ(SumPresent(...), 0) fails when the series is gone rather than passing.
std::optional<double> SumPresent(const std::vector<Sample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& match = {});

// Serialises one snapshot, checks the text with promtool (a test failure if it does not pass) and
// parses it.
std::vector<Sample> CheckedSamples(std::shared_ptr<const TargetSnapshot> snapshot);

// Polls once on the calling thread and returns the samples of the new snapshot, checked by
// promtool.
std::vector<Sample> PollAndScrape(Poller& poller);

// What promtool check metrics judges of a text, to check each form once a run: two texts of one
// form pass or fail alike (numbers' digits and plain label values aside).
std::string PromtoolForm(const std::string& text);

// Runs promtool check metrics on the text; true when it passes. *output gets promtool's messages.
// Without promtool: false when it is required (PGLOCK_REQUIRE_PROMTOOL or CI set to anything but
// "", "0" or "false", as in CI); otherwise true, after a warning on stderr (once per process)
// that the text goes unchecked.
bool PromtoolCheck(const std::string& text, std::string* output);

}  // namespace pglock::testing
