#include "exporter/util/shared_text.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace pglock {
namespace {

TEST(SharedText, EqualTextsShareOneCopyUntilTheLastHolderLetsGo) {
  const size_t before = SharedText::Distinct();
  {
    const std::string made = "a text longer than fifteen characters";
    SharedText a(made);
    SharedText b("a text longer than fifteen characters");
    const SharedText c = a;
    EXPECT_EQ(SharedText::Distinct(), before + 1);
    EXPECT_EQ(a.data(), b.data());  // one copy of the characters
    EXPECT_EQ(a, b);
    EXPECT_EQ(c, made);
    EXPECT_EQ(a.str(), made);
    SharedText other("another");
    EXPECT_EQ(SharedText::Distinct(), before + 2);
    EXPECT_FALSE(a == other);
    EXPECT_LT(a, other);  // ordered as the texts are: "a text" before "another"
    other = a;
    EXPECT_EQ(SharedText::Distinct(), before + 1);  // "another" had no other holder
  }
  EXPECT_EQ(SharedText::Distinct(), before);
}

TEST(SharedText, TheEmptyTextIsNoEntry) {
  const size_t before = SharedText::Distinct();
  SharedText empty;
  SharedText also("");
  EXPECT_TRUE(empty.empty());
  EXPECT_TRUE(also.empty());
  EXPECT_EQ(empty, also);
  EXPECT_EQ(empty, "");
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_STREQ(empty.c_str(), "");
  EXPECT_EQ(SharedText::Distinct(), before);
}

TEST(SharedText, MovedFromIsEmptyAndSelfAssignmentKeepsTheText) {
  SharedText a("moved text");
  SharedText b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from text is empty
  EXPECT_EQ(b, "moved text");
  SharedText& same = b;
  b = same;
  EXPECT_EQ(b, "moved text");
  b = std::move(same);
  EXPECT_EQ(b, "moved text");
}

// Threads making, copying and dropping the same few texts at once: each value keeps its text
// whatever the others do (under AddressSanitizer, a text freed while held fails here).
TEST(SharedText, ThreadsMakingAndDroppingTheSameTextsKeepEachValueWhole) {
  const size_t before = SharedText::Distinct();
  const std::vector<std::string> words = {"billing-run-worker-1", "search-reindex-worker-2",
                                          "nightly-report-worker-3"};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&words, t] {
      for (int i = 0; i < 20000; ++i) {
        const std::string& w = words[(i + t) % words.size()];
        SharedText made(w);
        SharedText copy = made;
        made = SharedText();
        ASSERT_EQ(copy.str(), w);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(SharedText::Distinct(), before);
}

}  // namespace
}  // namespace pglock
