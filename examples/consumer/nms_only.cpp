// NMS without the engine (scenelab::nms): three boxes, the middle one overlapping the best.
#include <cstdio>
#include <vector>

#include <scenelab/nms.h>

int main() {
  using namespace scenelab::nms;
  const std::vector<Detection> d = {{{0, 0, 10, 10}, 0.9f}, {{1, 1, 11, 11}, 0.8f}, {{20, 20, 30, 30}, 0.7f}};
  Options o;
  o.threshold = 0.5f;
  const std::vector<int> keep = greedy_nms(d, o);
  std::printf("kept:");
  for (int i : keep) std::printf(" %d", i);
  std::printf("\n");
  return keep == std::vector<int>{0, 2} ? 0 : 1;
}
