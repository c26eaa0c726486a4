// search_streamed_rows (nn/cuda/streamed_rows_search.h): the order both persistent plans try
// streamed tilings in, and what each verdict does to it. Host code only: runs without a GPU.
#include "nn/cuda/streamed_rows_search.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace ds2 {
namespace {

using Tried = std::vector<std::pair<int, int>>;  // (register groups, streamed groups)

TEST(StreamedRowsSearch, MostInRegistersFirstThenFewestStreamed) {
  Tried tried;
  // 3 row groups, at most 2 in registers: (2,1), (1,1), (1,2), (0,1) ... until the judge takes one.
  const bool fits = search_streamed_rows(2, 3, 0, [&](int nrg, int sg) {
    tried.emplace_back(nrg, sg);
    return nrg == 0 && sg == 2 ? StreamedCandidate::kFits : StreamedCandidate::kMoreStreamed;
  });
  EXPECT_TRUE(fits);
  EXPECT_EQ(tried, (Tried{{2, 1}, {1, 1}, {1, 2}, {0, 1}, {0, 2}}));
}

TEST(StreamedRowsSearch, FewerInRegistersSkipsTheRestOfThatCount) {
  Tried tried;
  const bool fits = search_streamed_rows(2, 4, 0, [&](int nrg, int sg) {
    tried.emplace_back(nrg, sg);
    return nrg == 1 ? StreamedCandidate::kFewerInRegisters : StreamedCandidate::kMoreStreamed;
  });
  EXPECT_FALSE(fits);
  EXPECT_EQ(tried, (Tried{{2, 1}, {2, 2}, {1, 1}, {0, 1}, {0, 2}, {0, 3}, {0, 4}}));
}

TEST(StreamedRowsSearch, AtLeastTheStreamedGroupsAskedFor) {
  Tried tried;
  const bool fits = search_streamed_rows(3, 3, 2, [&](int nrg, int sg) {
    tried.emplace_back(nrg, sg);
    return StreamedCandidate::kMoreStreamed;
  });
  EXPECT_FALSE(fits);
  EXPECT_EQ(tried, (Tried{{1, 2}, {0, 2}, {0, 3}}));
}

}  // namespace
}  // namespace ds2
