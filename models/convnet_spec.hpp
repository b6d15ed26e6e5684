// A convolutional network as a scenario describes it: the residual family (ResNet, He et al.
// 2016, in its v1.5 form: the stride of a down-sampling bottleneck sits on its 3 x 3
// convolution), channels last (NHWC). An empty `stage_blocks` means the model is not a
// convolutional network (a transformer).
#pragma once
#include <vector>

namespace exasim {

enum class ResidualBlock { basic, bottleneck };  // two 3 x 3 convolutions; 1 x 1, 3 x 3, 1 x 1 (4x wider out)
// The block's one name table: the scenario's "block" and the report's.
inline const char* to_string(ResidualBlock b) { return b == ResidualBlock::bottleneck ? "bottleneck" : "basic"; }

struct ConvNetSpec {
  std::vector<int> stage_blocks;  // blocks per stage (ResNet-50: 3, 4, 6, 3); stage i has width base_width 2^i
  ResidualBlock block = ResidualBlock::bottleneck;
  int base_width = 64;   // channels of the stem and of the first stage's 3 x 3 convolutions
  int image_size = 224;  // square input images, 3 channels
  int classes = 1000;
  bool empty() const { return stage_blocks.empty(); }
};

}  // namespace exasim
