// The edit distance behind the CER (models/edit_distance.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "models/edit_distance.h"

using namespace ocrt;

TEST_CASE("edit distance", "[edit_distance]") {
  using V = std::vector<int64_t>;
  REQUIRE(nn::edit_distance(V{}, V{}) == 0);
  REQUIRE(nn::edit_distance(V{1, 2, 3}, V{1, 2, 3}) == 0);
  REQUIRE(nn::edit_distance(V{1, 2, 3}, V{1, 3}) == 1);
  REQUIRE(nn::edit_distance(V{}, V{4, 5}) == 2);
  REQUIRE(nn::edit_distance(V{1, 2}, V{2, 1}) == 2);
}
