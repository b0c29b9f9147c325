// The three-token worked example through an installed attnlab::core: prints t3's weights.
#include <cstdio>

#include "attnlab/core/attention.hpp"

int main() {
  attnlab::AttentionInput input;
  input.queries_from = input.keys_from = attnlab::Matrix{{1, 0}, {0, 1}, {1, 1}};
  const attnlab::HeadTrace head =
      attnlab::attend_head(input, {"worked example", {{1, 0}, {1, 1}}, {{1, 1}, {0, 1}}, {{0, 1}, {1, 0}}});
  std::printf("%.2f %.2f %.2f -> %.2f %.2f\n", head.weights(2, 0), head.weights(2, 1), head.weights(2, 2),
              head.output(2, 0), head.output(2, 1));
}
