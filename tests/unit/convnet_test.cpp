// The convolutional family (models/convnet.hpp): hand-counted parameters and multiply-adds of
// ResNet-50 and ResNet-18 (torchvision's counts: 25,557,032 and 11,689,512 parameters; about
// 4.1 G multiply-adds per 224 x 224 image for ResNet-50 v1.5), the step graph's FLOPs against
// the hand count, distributed batch norm and weight-update sharding ops, refused plans.
#include <doctest/doctest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/convnet.hpp"
#include "tests/unit/approx.hpp"

using namespace exasim;

namespace {

ConvNetSpec resnet50() {
  ConvNetSpec s;
  s.stage_blocks = {3, 4, 6, 3};
  return s;
}

ParallelPlan data_parallel(int replicas, int global_batch) {
  ParallelPlan p;
  p.data = replicas;
  p.global_batch = global_batch;
  p.micro_batch = global_batch / replicas;
  return p;
}

// Collectives of the program by label.
std::map<std::string, int> collectives(const Workload& w) {
  std::map<std::string, int> n;
  const StepGraph& g = w.programs[0];
  for (auto v : boost::make_iterator_range(boost::vertices(g)))
    if (std::holds_alternative<CollectiveWork>(g[v].work)) n[g[v].label]++;
  return n;
}

}  // namespace

TEST_CASE("ResNet-50 v1.5: 25,557,032 parameters and 4.09 G multiply-adds per 224 x 224 image") {
  const auto layers = convnet_layers(resnet50());
  CHECK(convnet_parameters(layers) == 25557032);
  // stem 118.0 M; the four stages and their projections; fc 2.048 M
  CHECK(convnet_forward_macs_per_image(layers) == 4089184256.0);
  int convs = 0, bns = 0;
  for (const CnnLayer& l : layers) {
    convs += l.op == CnnOp::conv;
    bns += l.op == CnnOp::batch_norm;
  }
  CHECK(convs == 53);  // 1 stem + 16 x 3 + 4 projections
  CHECK(bns == 53);
  CHECK(layers.back().op == CnnOp::fully_connected);
  CHECK(layers.back().in_channels == 2048);
  const CnnLayer& pool = layers[layers.size() - 2];
  CHECK(pool.op == CnnOp::avg_pool);
  CHECK(pool.in_size == 7);
  CHECK(pool.kernel == 7);
}

TEST_CASE("ResNet-18 (basic blocks): 11,689,512 parameters and 1.81 G multiply-adds") {
  ConvNetSpec s;
  s.stage_blocks = {2, 2, 2, 2};
  s.block = ResidualBlock::basic;
  const auto layers = convnet_layers(s);
  CHECK(convnet_parameters(layers) == 11689512);
  CHECK(convnet_forward_macs_per_image(layers) == 1814073344.0);
}

TEST_CASE("ResNet-50 step: model FLOPs are three forward passes less the stem's data gradient") {
  const ParallelPlan plan = data_parallel(4, 256);
  const ConvNetWorkload w = build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{2});
  const double macs = 4089184256.0;
  const double stem_dgrad = 112.0 * 112 * 64 * 147;  // multiply-adds per image
  CHECK(w.model_flops == test::rel(256 * 2 * (3 * macs - stem_dgrad), 1e-12));
  CHECK(w.images_per_step == 256);
  CHECK(w.parameters == 25557032);
  CHECK(w.workload.rank_count == 4);
  // GEMMs split over the device's two cores: one core's 32 images, two products
  const StepGraph& g = w.workload.programs[0];
  bool seen = false;
  for (auto v : boost::make_iterator_range(boost::vertices(g)))
    if (g[v].name == "s1b0.conv2.fwd.gemm") {
      const auto& c = std::get<ComputeWork>(g[v].work);
      CHECK(c.shape.dims[0] == 32 * 56 * 56);
      CHECK(c.shape.dims[1] == 64);
      CHECK(c.shape.dims[2] == 64 * 9);
      CHECK(c.shape.batch == 2);
      CHECK(c.precision == Precision::fp16);
      seen = true;
    }
  CHECK(seen);
  const auto n = collectives(w.workload);
  CHECK(n.at("grad_all_reduce") == 1);
  CHECK(n.count("batch_norm_allreduce") == 0);
  // parameters, gradients and momentum in fp32
  CHECK(w.memory.parameters_bytes + w.memory.gradients_bytes + w.memory.optimizer_state_bytes ==
        test::rel(12.0 * 25557032));
}

TEST_CASE("distributed batch norm and weight-update sharding add their collectives") {
  ParallelPlan plan = data_parallel(8, 512);
  plan.batch_norm_group = 4;
  plan.zero_stage = 1;
  const ConvNetWorkload w = build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{1});
  const auto n = collectives(w.workload);
  CHECK(n.at("batch_norm_allreduce") == 2 * 53);  // forward statistics and backward sums of each batch norm
  CHECK(n.at("grad_reduce_scatter") == 1);
  CHECK(n.at("param_all_gather") == 1);
  CHECK(n.count("grad_all_reduce") == 0);
  const GroupTable& bn = w.workload.groups.at("bn");
  CHECK(bn.members.size() == 2);
  CHECK(bn.members[1] == std::vector<int>{4, 5, 6, 7});
  CHECK(w.memory.optimizer_state_bytes == test::rel(4.0 * 25557032 / 8));
}

TEST_CASE("per-tensor gradients (CrossShardOptimizer): ResNet-50's 161 tensors, each its own all-reduce") {
  const std::vector<CnnLayer> layers = convnet_layers(resnet50());
  const std::vector<double> t = convnet_gradient_tensors(layers);
  CHECK(t.size() == 53 + 2 * 53 + 2);  // 53 convolutions, 53 batch norms' scale and shift, the classifier's two
  double sum = 0;
  for (double x : t) sum += x;
  CHECK(sum == 25557032);
  CHECK(t.front() == 1000);         // the backward's first: the classifier's bias
  CHECK(t.back() == 7 * 7 * 3 * 64);  // its last: the stem's weights
  const ParallelPlan plan = data_parallel(8, 512);
  const auto n = collectives(
      build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{1}, GradSync::per_tensor).workload);
  CHECK(n.at("grad_all_reduce") == 161);
  ParallelPlan sharded = plan;
  sharded.zero_stage = 1;
  CHECK_THROWS_AS(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, sharded, ConvNetDevice{1}, GradSync::per_tensor),
                  std::invalid_argument);
}

TEST_CASE("batch-norm tiles: MLPerf's 2 x 2 chips in ring order, tiles along the rows first") {
  ParallelPlan plan = data_parallel(32, 512);  // an 8 x 4 torus, rows of 8 chips
  plan.batch_norm_group = 4;
  plan.batch_norm_tile_x = 2;
  plan.batch_norm_tile_y = 2;
  plan.batch_norm_row_devices = 8;
  GroupTable bn = batch_norm_groups(plan);
  REQUIRE(bn.members.size() == 8);
  // tile 0: chips (0,0) (1,0) along row 0, back (1,1) (0,1) along row 1: every successor one hop away
  CHECK(bn.members[0] == std::vector<int>{0, 1, 9, 8});
  CHECK(bn.members[1] == std::vector<int>{2, 3, 11, 10});
  CHECK(bn.members[4] == std::vector<int>{16, 17, 25, 24});  // the second row of tiles
  CHECK(bn.group_of_rank[25] == 4);
  CHECK(bn.index_in_group[25] == 2);
  // 2 wide, 4 high: rows in pairs, along and back
  plan.batch_norm_group = 8;
  plan.batch_norm_tile_y = 4;
  bn = batch_norm_groups(plan);
  CHECK(bn.members[1] == std::vector<int>{2, 3, 11, 10, 18, 19, 27, 26});
  // an odd number of rows: linear_2d goes column by column
  plan = data_parallel(24, 480);
  plan.batch_norm_group = 6;
  plan.batch_norm_tile_x = 2;
  plan.batch_norm_tile_y = 3;
  plan.batch_norm_row_devices = 8;
  bn = batch_norm_groups(plan);
  CHECK(bn.members[0] == std::vector<int>{0, 8, 16, 1, 9, 17});
  // without a tile: consecutive ranks
  plan.batch_norm_tile_x = plan.batch_norm_tile_y = plan.batch_norm_row_devices = 0;
  CHECK(batch_norm_groups(plan).members[1] == std::vector<int>{6, 7, 8, 9, 10, 11});
}

TEST_CASE("convolutional plans the model cannot take are refused") {
  ParallelPlan p = data_parallel(4, 256);
  p.tensor = 2;
  CHECK_THROWS_AS(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, p, ConvNetDevice{1}), std::invalid_argument);
  p = data_parallel(4, 256);
  p.batch_norm_group = 3;
  CHECK_THROWS_AS(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, p, ConvNetDevice{1}), std::invalid_argument);
  // batch-norm tiles: chips other than the group's, a width that does not divide the rows, a
  // height that leaves a partial row of tiles
  p = data_parallel(32, 512);
  p.batch_norm_group = 4;
  p.batch_norm_row_devices = 8;
  p.batch_norm_tile_x = 4;
  p.batch_norm_tile_y = 2;
  CHECK_THROWS_AS(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, p, ConvNetDevice{1}), std::invalid_argument);
  p.batch_norm_group = 8;
  p.batch_norm_tile_x = 8;
  p.batch_norm_tile_y = 1;
  CHECK_NOTHROW(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, p, ConvNetDevice{1}));
  p.batch_norm_row_devices = 12;
  CHECK_THROWS_AS(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, p, ConvNetDevice{1}), std::invalid_argument);
  p = data_parallel(20, 320);  // 2 x 2 tiles in rows of 8: 20 chips fill two rows and half a third
  p.batch_norm_group = 4;
  p.batch_norm_row_devices = 8;
  p.batch_norm_tile_x = 2;
  p.batch_norm_tile_y = 2;
  CHECK_THROWS_AS(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, p, ConvNetDevice{1}), std::invalid_argument);
  p = data_parallel(4, 12);  // 3 images per device over 2 cores
  CHECK_THROWS_AS(build_convnet_workload(resnet50(), PrecisionPolicy::fp16, p, ConvNetDevice{2}), std::invalid_argument);
  ConvNetSpec tiny = resnet50();
  tiny.image_size = 16;  // 16 / 4 / 2 / 2 / 2 < 1
  CHECK_THROWS_AS(convnet_layers(tiny), std::invalid_argument);
}

TEST_CASE("an implicit-GEMM convolution has no im2col or col2im ops, the same GEMMs") {
  const ParallelPlan plan = data_parallel(4, 256);
  const ConvNetWorkload a = build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{2, false});
  const ConvNetWorkload b = build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{2, true});
  auto count = [](const StepGraph& g, Kernel k) {
    int n = 0;
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
      if (const auto* c = std::get_if<ComputeWork>(&g[v].work)) n += c->kernel == k;
    return n;
  };
  // ResNet-50's windowed convolutions: the stem, 16 3 x 3 ones and 3 strided 1 x 1 projections;
  // forward im2col, backward col2im and im2col (the stem has no col2im)
  CHECK(count(a.workload.programs[0], Kernel::im2col) == 20 + 2 * 20 - 1);
  CHECK(count(b.workload.programs[0], Kernel::im2col) == 0);
  CHECK(count(a.workload.programs[0], Kernel::gemm) == count(b.workload.programs[0], Kernel::gemm));
  CHECK(a.model_flops == b.model_flops);
}

TEST_CASE("tiled feature maps: channels padded to the lanes and the batch to the sublanes, whichever pads less") {
  const ConvNetDevice untiled{2, true};
  const ConvNetDevice tpu{2, true, 8, 128};
  CHECK(tiled_maps(32, 64, untiled).images == 32);
  CHECK(tiled_maps(32, 64, untiled).channels == 64);
  // 32 images of 64 channels: channels to 128 (32 x 128) beats the batch to 128 (128 x 64)
  CHECK(tiled_maps(32, 64, tpu).images == 32);
  CHECK(tiled_maps(32, 64, tpu).channels == 128);
  // 8 images of 256 channels fill their tiles; 5 images of 256: the batch to 8
  CHECK(tiled_maps(8, 256, tpu).channels == 256);
  CHECK(tiled_maps(5, 256, tpu).images == 8);
  // 256 images of 3 channels: the batch on the lanes (256 x 8) beats 3 to 128 (256 x 128)
  CHECK(tiled_maps(256, 3, tpu).images == 256);
  CHECK(tiled_maps(256, 3, tpu).channels == 8);
}

TEST_CASE("on a tiled device the 64-channel maps' memory-bound passes move twice their bytes") {
  const ParallelPlan plan = data_parallel(4, 256);  // 64 images per device, 32 per core
  const ConvNetWorkload a = build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{2, true});
  const ConvNetWorkload b =
      build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{2, true, 8, 128});
  auto bytes = [](const StepGraph& g, const std::string& name) {
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
      if (g[v].name == name) return std::get<ComputeWork>(g[v].work).bytes;
    return -1.0;
  };
  const StepGraph &ga = a.workload.programs[0], &gb = b.workload.programs[0];
  // stem batch norm's statistics read X: 64 images x 112 x 112 x 64 channels x 2 bytes, then 128 channels
  CHECK(bytes(ga, "stem.bn.fwd.statistics") == 64.0 * 112 * 112 * 64 * 2);
  CHECK(bytes(gb, "stem.bn.fwd.statistics") == 64.0 * 112 * 112 * 128 * 2);
  CHECK(bytes(gb, "s1b0.bn2.bwd.apply") == test::rel(2 * bytes(ga, "s1b0.bn2.bwd.apply"), 1e-3));
  // 256-channel maps are not padded: the residual add and the 256-channel batch norm keep their bytes
  CHECK(bytes(gb, "s1b0.add.fwd") == bytes(ga, "s1b0.add.fwd"));
  CHECK(bytes(gb, "s1b0.bn3.fwd.normalise") == bytes(ga, "s1b0.bn3.fwd.normalise"));
  CHECK(a.model_flops == b.model_flops);
}

TEST_CASE("window-tap convolutions: a GEMM per tap over C_in, the stem on space-to-depth images") {
  const ParallelPlan plan = data_parallel(4, 256);  // 64 images per device, 32 per core
  ConvNetDevice taps{2, true};
  taps.window_taps = true;
  const ConvNetWorkload a = build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, ConvNetDevice{2, true});
  const ConvNetWorkload b = build_convnet_workload(resnet50(), PrecisionPolicy::fp16, plan, taps);
  auto shape = [](const StepGraph& g, const std::string& name) {
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
      if (g[v].name == name) return std::get<ComputeWork>(g[v].work).shape;
    return KernelShape{};
  };
  const StepGraph& g = b.workload.programs[0];
  // a 3 x 3 convolution 64 -> 64: nine [pixels x 64 x 64] GEMMs per core
  const KernelShape c2 = shape(g, "s1b0.conv2.fwd.gemm");
  CHECK(c2.dims[0] == 32 * 56 * 56);
  CHECK(c2.dims[1] == 64);
  CHECK(c2.dims[2] == 64);
  CHECK(c2.batch == 2 * 9);
  const KernelShape c2w = shape(g, "s1b0.conv2.bwd.wgrad");
  CHECK(c2w.dims[0] == 64);
  CHECK(c2w.dims[2] == 32 * 56 * 56);
  // 1 x 1 convolutions are one tap: the same GEMM as before
  CHECK(shape(g, "s1b0.conv1.fwd.gemm").dims == shape(a.workload.programs[0], "s1b0.conv1.fwd.gemm").dims);
  // the stem: 224 x 224 x 3 images as 112 x 112 x 12, the 7 x 7 / 2 window as 4 x 4 / 1: 16 taps of 12
  const KernelShape stem = shape(g, "stem.conv.fwd.gemm");
  CHECK(stem.dims[0] == 32 * 112 * 112);
  CHECK(stem.dims[1] == 64);
  CHECK(stem.dims[2] == 12);
  CHECK(stem.batch == 2 * 16);
  // model FLOPs unchanged; executed FLOPs gain the stem's zero taps, forward and weight gradient:
  // 2 flops x 256 images x 112 x 112 pixels x 64 x (16 x 12 - 49 x 3) per pass
  CHECK(b.model_flops == test::rel(a.model_flops, 1e-12));
  CHECK(b.executed_flops - a.executed_flops == test::rel(2 * 2.0 * 256 * 112 * 112 * 64 * (192 - 147)));
}
