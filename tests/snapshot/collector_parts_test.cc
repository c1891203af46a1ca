#include "exporter/snapshot/collector_parts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pglock {
namespace {

struct RowsOfA {
  std::vector<int> rows;
};
struct RowsOfB {
  std::string text;
};

TEST(CollectorPartsTest, EachTypeHasItsOwnPart) {
  CollectorParts parts;
  EXPECT_EQ(parts.Find<RowsOfA>(), nullptr);
  parts.Mutable<RowsOfA>()->rows.push_back(1);
  parts.Mutable<RowsOfB>()->text = "b";
  parts.Mutable<RowsOfA>()->rows.push_back(2);
  ASSERT_NE(parts.Find<RowsOfA>(), nullptr);
  EXPECT_EQ(parts.Find<RowsOfA>()->rows, (std::vector<int>{1, 2}));
  EXPECT_EQ(parts.Find<RowsOfB>()->text, "b");
}

TEST(CollectorPartsTest, WritingACopyLeavesTheOriginalAsItWas) {
  CollectorParts original;
  original.Mutable<RowsOfA>()->rows = {1};
  CollectorParts copy = original;
  EXPECT_EQ(copy.Find<RowsOfA>(), original.Find<RowsOfA>()) << "copies share until written";
  copy.Mutable<RowsOfA>()->rows.push_back(2);
  EXPECT_EQ(original.Find<RowsOfA>()->rows, (std::vector<int>{1}));
  EXPECT_EQ(copy.Find<RowsOfA>()->rows, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace pglock
