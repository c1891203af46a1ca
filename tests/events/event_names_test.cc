// The one table of event words (exporter/events/event_names.h) against docs/api.md, the schema
// that API users read: every kind, cause, outcome and evidence the exporter writes is documented,
// and the documented list of kinds names no kind the exporter does not write.
#include "exporter/events/event_names.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/build_paths.h"

namespace pglock {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(testing::SourceDir() + "/" + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool HasWord(const std::string& text, const std::string& word) {
  return std::regex_search(text, std::regex("(^|[^a-z_])" + word + "([^a-z_]|$)"));
}

// The "kind" entry of the Event schema: from its line to the next entry of the same indent.
std::string KindBlock(const std::string& api) {
  const size_t from = api.find("\n  kind ");
  if (from == std::string::npos) return "";
  const size_t to = api.find("\n  lock_wait ", from);
  return api.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

TEST(EventNames, EveryKindCauseAndOutcomeIsInTheApiSchema) {
  const std::string api = Read("docs/api.md");
  const std::string readme = Read("README.md");
  ASSERT_FALSE(api.empty()) << "docs/api.md not found under " << testing::SourceDir();
  const std::string kinds = KindBlock(api);
  ASSERT_FALSE(kinds.empty()) << "no \"kind\" entry in docs/api.md's Event schema";
  std::set<std::string> names;
  for (const EventKindInfo& k : EventKinds()) {
    names.insert(k.name);
    EXPECT_TRUE(HasWord(api, k.name)) << k.name << " is not in docs/api.md";
    EXPECT_EQ(EventKindNamed(k.name), k.kind);
  }
  // What the documented list of kinds names is a kind the exporter writes.
  const std::regex kind_word("\\b((lock|lease|pooled|blocking)_[a-z_]+|deadlock)\\b");
  for (auto it = std::sregex_iterator(kinds.begin(), kinds.end(), kind_word);
       it != std::sregex_iterator(); ++it) {
    const std::string word = (*it)[1];
    if (word.ends_with("_seconds") || word == "blocking_episode_total") continue;
    EXPECT_EQ(names.count(word), 1u) << "docs/api.md documents a kind the exporter lacks: " << word;
  }
  for (const EventOutcome o : EventOutcomes()) {
    EXPECT_TRUE(HasWord(api, EventOutcomeName(o))) << EventOutcomeName(o);
  }
  for (const EndEvidence e : kEndEvidences) {
    const std::string quoted = std::string("\"") + EndEvidenceLabel(e) + "\"";
    EXPECT_NE(api.find(quoted), std::string::npos)
        << EndEvidenceLabel(e) << " is not in docs/api.md";
  }
  for (const EventCause c : EventCauses()) {
    if (c == CauseOf(HoldEnd::kStillConnected)) continue;  // an unlock makes no event
    const std::string name = EventCauseName(c);
    EXPECT_TRUE(HasWord(api, name) || HasWord(readme, name)) << name << " is documented nowhere";
  }
}

TEST(EventNames, OneNameEachAndTheLogFormsAreTheSame) {
  std::set<std::string> seen;
  for (const EventKindInfo& k : EventKinds()) EXPECT_TRUE(seen.insert(k.name).second) << k.name;
  for (const EventCause c : EventCauses())
    EXPECT_TRUE(seen.insert(EventCauseName(c)).second || c == EventCause::kLockTimeout)
        << EventCauseName(c);
  EXPECT_FALSE(EventKindNamed("lock_lots").has_value());
}

TEST(EventNames, ASessionEndIsACauseByItsOwnLabel) {
  for (const HoldEnd end : kHoldEnds) {
    EXPECT_EQ(HoldEndOf(CauseOf(end)), end);
    EXPECT_STREQ(EventCauseName(CauseOf(end)), HoldEndLabel(end));
  }
  for (const EventCause c : {EventCause::kLockTimeout, EventCause::kNowaitFailed,
                             EventCause::kLockNotAvailable, EventCause::kNone}) {
    EXPECT_FALSE(HoldEndOf(c).has_value()) << EventCauseName(c);
  }
  EXPECT_STREQ(EventCauseName(EventCause::kNone), "");
}

TEST(EventNames, ALeaseTransitionsEventIsNamedLeaseAndItsLabel) {
  std::set<EventKind> of_transitions;
  for (const LeaseTransition t : kLeaseTransitions) {
    const std::optional<EventKind> kind = EventOf(t);
    if (t == LeaseTransition::kRenewed) {
      EXPECT_FALSE(kind.has_value()) << "a renewal is routine: no event";
      continue;
    }
    ASSERT_TRUE(kind.has_value()) << LeaseTransitionLabel(t);
    EXPECT_EQ(std::string("lease_") + LeaseTransitionLabel(t), EventKindName(*kind));
    of_transitions.insert(*kind);
  }
  for (const EventKindInfo& k : EventKinds()) {
    EXPECT_EQ(IsLeaseEvent(k.kind), of_transitions.count(k.kind) == 1) << k.name;
  }
}

}  // namespace
}  // namespace pglock
