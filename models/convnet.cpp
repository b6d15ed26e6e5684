#include "models/convnet.hpp"
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "models/graph_builder.hpp"
#include "models/plan_rules.hpp"

namespace exasim {

const char* to_string(CnnOp op) {
  switch (op) {
    case CnnOp::conv: return "conv";
    case CnnOp::batch_norm: return "batch_norm";
    case CnnOp::max_pool: return "max_pool";
    case CnnOp::avg_pool: return "avg_pool";
    case CnnOp::fully_connected: return "fully_connected";
    case CnnOp::residual_add: return "residual_add";
  }
  return "?";
}

double CnnLayer::macs_per_image() const {
  if (op == CnnOp::conv) return out_pixels() * out_channels * double(in_channels) * kernel * kernel;
  if (op == CnnOp::fully_connected) return double(in_channels) * out_channels;
  return 0;
}

double CnnLayer::parameters() const {
  if (op == CnnOp::conv) return double(kernel) * kernel * in_channels * out_channels;
  if (op == CnnOp::fully_connected) return double(in_channels) * out_channels + out_channels;
  if (op == CnnOp::batch_norm) return 2.0 * out_channels;
  return 0;
}

namespace {

// Builds the layer list; `size` and `channels` follow the main path.
class LayerList {
 public:
  explicit LayerList(int image_size) : size_(image_size) {}
  // "same" padding: the output is ceil(size / stride) pixels a side
  void conv(const std::string& name, int out, int k, int stride) {
    window(CnnOp::conv, name, out, k, stride);
  }
  void pool(CnnOp op, const std::string& name, int k, int stride) { window(op, name, channels_, k, stride); }
  void bn(const std::string& name, bool relu) {
    layers_.push_back({CnnOp::batch_norm, name, channels_, channels_, size_, size_, 1, 1, relu});
  }
  void add(const std::string& name) {
    layers_.push_back({CnnOp::residual_add, name, channels_, channels_, size_, size_, 1, 1, true});
  }
  void fc(const std::string& name, int out) {
    layers_.push_back({CnnOp::fully_connected, name, channels_, out, 1, 1, 1, 1, false});
    channels_ = out;
  }
  // A projection shortcut: a 1 x 1 convolution of stride `stride` and its batch norm, from the
  // block's input (the current maps) to the block's output shape; the main path is unchanged.
  void projection(const std::string& name, int out, int stride) {
    const int out_size = (size_ + stride - 1) / stride;
    layers_.push_back({CnnOp::conv, name + ".conv", channels_, out, size_, out_size, 1, stride, false});
    layers_.push_back({CnnOp::batch_norm, name + ".bn", out, out, out_size, out_size, 1, 1, false});
  }
  int size() const { return size_; }
  int channels() const { return channels_; }
  std::vector<CnnLayer> take() { return std::move(layers_); }

 private:
  void window(CnnOp op, const std::string& name, int out, int k, int stride) {
    const int out_size = (size_ + stride - 1) / stride;
    layers_.push_back({op, name, channels_, out, size_, out_size, k, stride, false, layers_.empty()});
    channels_ = out;
    size_ = out_size;
  }
  int size_;
  int channels_ = 3;
  std::vector<CnnLayer> layers_;
};

}  // namespace

std::vector<CnnLayer> convnet_layers(const ConvNetSpec& spec) {
  if (spec.empty()) throw std::invalid_argument("a convolutional network needs at least one stage");
  if (spec.image_size < (4 << (spec.stage_blocks.size() - 1)))
    throw std::invalid_argument("image_size " + std::to_string(spec.image_size) + ": the stem and the " +
                                std::to_string(spec.stage_blocks.size() - 1) + " down-sampling stages halve it to less than one pixel");
  LayerList l(spec.image_size);
  l.conv("stem.conv", spec.base_width, 7, 2);
  l.bn("stem.bn", true);
  l.pool(CnnOp::max_pool, "stem.pool", 3, 2);
  const bool bottleneck = spec.block == ResidualBlock::bottleneck;
  for (size_t s = 0; s < spec.stage_blocks.size(); ++s) {
    const int width = spec.base_width << s, out = bottleneck ? 4 * width : width;
    for (int b = 0; b < spec.stage_blocks[s]; ++b) {
      const std::string p = "s" + std::to_string(s + 1) + "b" + std::to_string(b) + ".";
      const int stride = (b == 0 && s > 0) ? 2 : 1;
      if (b == 0 && (stride != 1 || l.channels() != out)) l.projection(p + "shortcut", out, stride);
      if (bottleneck) {
        l.conv(p + "conv1", width, 1, 1);
        l.bn(p + "bn1", true);
        l.conv(p + "conv2", width, 3, stride);  // v1.5: the stride on the 3 x 3
        l.bn(p + "bn2", true);
        l.conv(p + "conv3", out, 1, 1);
        l.bn(p + "bn3", false);
      } else {
        l.conv(p + "conv1", width, 3, stride);
        l.bn(p + "bn1", true);
        l.conv(p + "conv2", width, 3, 1);
        l.bn(p + "bn2", false);
      }
      l.add(p + "add");
    }
  }
  l.pool(CnnOp::avg_pool, "head.pool", l.size(), l.size());
  l.fc("head.fc", spec.classes);
  return l.take();
}

double convnet_parameters(const std::vector<CnnLayer>& layers) {
  double p = 0;
  for (const CnnLayer& l : layers) p += l.parameters();
  return p;
}

double convnet_forward_macs_per_image(const std::vector<CnnLayer>& layers) {
  double m = 0;
  for (const CnnLayer& l : layers) m += l.macs_per_image();
  return m;
}

namespace {
double whole(double x, int tile) { return tile * std::ceil(x / tile); }
}  // namespace

TiledMaps tiled_maps(double images_per_core, int channels, const ConvNetDevice& device) {
  const double b = images_per_core, c = channels;
  if (device.tile_sublanes <= 0 || device.tile_lanes <= 0) return {b, c};
  const TiledMaps channels_on_lanes{whole(b, device.tile_sublanes), whole(c, device.tile_lanes)};
  const TiledMaps images_on_lanes{whole(b, device.tile_lanes), whole(c, device.tile_sublanes)};
  return images_on_lanes.images * images_on_lanes.channels < channels_on_lanes.images * channels_on_lanes.channels
             ? images_on_lanes
             : channels_on_lanes;
}

namespace {

// Emits the ops of one data-parallel replica, one serial stream (forward, backward, update).
class ConvNetGraph {
 public:
  ConvNetGraph(StepGraph& g, double images, ConvNetDevice device, Precision p, bool distributed_bn)
      : b_(g), images_(images), cores_(device.cores), im2col_(!device.implicit_gemm_convolution), device_(device),
        p_(p), dbn_(distributed_bn) {}

  void forward(const CnnLayer& l) {
    const std::string n = l.name + ".fwd";
    switch (l.op) {
      case CnnOp::conv:
        if (patches(l)) last_ = window(n + ".im2col", "im2col", Phase::forward, Kernel::im2col, l);
        last_ = conv_pass(n + ".gemm", "conv", Phase::forward, conv_gemm(l), l);
        break;
      case CnnOp::batch_norm:  // statistics, their all-reduce over the group, normalise and ReLU
        last_ = bn_pass(n + ".statistics", "batch_norm", Phase::forward, BatchNormPass::statistics, l);
        if (dbn_) last_ = bn_statistics(n + ".allreduce", Phase::forward, l);
        last_ = bn_pass(n + ".normalise", "batch_norm", Phase::forward, BatchNormPass::normalise, l);
        break;
      case CnnOp::max_pool:
      case CnnOp::avg_pool: last_ = window(n, "pool", Phase::forward, Kernel::pool, l); break;
      case CnnOp::residual_add:
        last_ = memory(n, "residual_add", Phase::forward, Kernel::residual_add, out_maps(l));
        break;
      case CnnOp::fully_connected:
        last_ = b_.gemm(n, "fc", Phase::forward, p_, p_, gemm_shape(images_ / cores_, l.out_channels, l.in_channels, cores_),
                        last_);
        break;
    }
  }

  void loss(int classes) {
    last_ = memory("loss.fwd", "softmax", Phase::forward, Kernel::softmax, rows_cols(images_, classes));
  }

  void backward(const CnnLayer& l, bool first_layer) {
    const std::string n = l.name + ".bwd";
    switch (l.op) {
      case CnnOp::conv: {
        const KernelShape f = conv_gemm(l);
        const bool im2col = patches(l);
        if (!first_layer) {  // the image needs no gradient
          last_ = conv_pass(n + ".dgrad", "conv.dgrad", Phase::backward, gemm_shape(f.dims[0], f.dims[2], f.dims[1], f.batch),
                            l);
          if (im2col) last_ = window(n + ".col2im", "col2im", Phase::backward, Kernel::im2col, l);
        }
        if (im2col) last_ = window(n + ".im2col", "im2col", Phase::backward, Kernel::im2col, l);
        last_ = conv_pass(n + ".wgrad", "conv.wgrad", Phase::backward, gemm_shape(f.dims[2], f.dims[1], f.dims[0], f.batch),
                          l);
        break;
      }
      case CnnOp::batch_norm:
        last_ = bn_pass(n + ".reduce", "batch_norm.bwd", Phase::backward, BatchNormPass::grad_reduce, l);
        if (dbn_) last_ = bn_statistics(n + ".allreduce", Phase::backward, l);
        last_ = bn_pass(n + ".apply", "batch_norm.bwd", Phase::backward, BatchNormPass::grad_apply, l);
        break;
      case CnnOp::max_pool:
      case CnnOp::avg_pool: last_ = window(n, "pool.bwd", Phase::backward, Kernel::pool, l); break;
      case CnnOp::residual_add:  // the gradient of the block's input: the main path's plus the shortcut's
        last_ = memory(n, "residual_add.bwd", Phase::backward, Kernel::residual_add, out_maps(l));
        break;
      case CnnOp::fully_connected:
        last_ = b_.gemm_backward(n, "fc", p_, p_, gemm_shape(images_ / cores_, l.out_channels, l.in_channels, cores_),
                                 last_);
        break;
    }
  }

  // Gradients (fp32) reduced over "dp" (with `tensors`, each tensor on its own, one after another),
  // the update, and with sharding the weights' all-gather. Without sharding every core of the device
  // is a replica that updates its own copy of the weights (TPUEstimator's CrossShardOptimizer: the
  // wrapped optimizer's apply_gradients on each shard, a shard a TensorCore), `cores` updates.
  void update(double parameters, int replicas, bool sharded, const std::vector<double>* tensors = nullptr) {
    const double bytes = 4 * parameters;
    double shard = sharded ? parameters : parameters * cores_;
    if (replicas > 1 && tensors && !sharded) {
      for (std::size_t i = 0; i < tensors->size(); ++i)
        last_ = b_.collective(fmt::format("grad.tensor{}.all_reduce", i), "grad_all_reduce", Phase::backward,
                              CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "dp", 4 * (*tensors)[i], {last_});
    } else if (replicas > 1) {
      last_ = b_.collective(sharded ? "grad.reduce_scatter" : "grad.all_reduce",
                            sharded ? "grad_reduce_scatter" : "grad_all_reduce", Phase::backward,
                            sharded ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                            CollectiveAlgorithm::ring, "dp", bytes, {last_});
      if (sharded) shard = parameters / replicas;
    }
    last_ = b_.optimizer_update("opt.update", "weight_update", shard, {last_});
    if (replicas > 1 && sharded)
      last_ = b_.collective("opt.param_all_gather", "param_all_gather", Phase::optimizer, CollectiveKind::all_gather,
                            CollectiveAlgorithm::ring, "dp", bytes, {last_});
  }

  double executed_flops() const { return b_.executed_flops(); }
  double model_flops() const { return b_.model_flops() - padding_flops_; }

 private:
  // Whether the convolution gathers its windows into a patch matrix: an im2col convolution whose
  // window is not a single stride-1 pixel.
  bool patches(const CnnLayer& l) const { return im2col_ && (l.kernel > 1 || l.stride > 1); }
  // One core's im2col GEMM: its images' output pixels x C_out x k^2 C_in, `cores` of them. Per
  // window tap (ConvNetDevice::window_taps): pixels x C_out x C_in, k^2 taps per core; a
  // space-to-depth convolution: pixels x C_out x s^2 C_in, ceil(k / s)^2 taps per core.
  KernelShape conv_gemm(const CnnLayer& l) const {
    const double pixels = images_ / cores_ * l.out_pixels(), window = double(l.kernel) * l.kernel;
    if (!device_.window_taps) return gemm_shape(pixels, l.out_channels, l.in_channels * window, cores_);
    if (!space_to_depth(l)) return gemm_shape(pixels, l.out_channels, l.in_channels, cores_ * window);
    const double side = std::ceil(double(l.kernel) / l.stride), block = double(l.stride) * l.stride;
    return gemm_shape(pixels, l.out_channels, l.in_channels * block, cores_ * side * side);
  }
  // The first stride-2 convolution on the images, on a window-tap device.
  bool space_to_depth(const CnnLayer& l) const { return device_.window_taps && l.reads_images && l.stride == 2; }
  // One of a convolution's GEMMs; a space-to-depth one's zero taps are executed, not model FLOPs.
  long conv_pass(const std::string& name, const std::string& label, Phase ph, const KernelShape& s, const CnnLayer& l) {
    if (space_to_depth(l))
      padding_flops_ += nominal_work(Kernel::gemm, s, p_).flops - 2.0 * images_ * l.macs_per_image();
    return b_.gemm(name, label, ph, p_, p_, s, last_);
  }
  long memory(const std::string& name, const std::string& label, Phase ph, Kernel k, KernelShape s) {
    const NominalWork w = nominal_work(k, s, p_);
    return b_.memory(name, label, ph, k, p_, s, w.flops, w.bytes, last_);
  }
  // The batch's feature maps of `channels` at `pixels` per image as laid out in the device's
  // memory (tiled_maps): rows (images x pixels, the images padded) by the padded channels.
  KernelShape maps(double pixels, int channels, double third = 0) const {
    const TiledMaps t = tiled_maps(images_ / cores_, channels, device_);
    return rows_cols(cores_ * t.images * pixels, t.channels, third);
  }
  // The layer's output maps as laid out, as a flat element count (the residual add's shape).
  KernelShape out_maps(const CnnLayer& l) const {
    const KernelShape s = maps(l.out_pixels(), l.out_channels);
    return elements(double(s.dims[0]) * double(s.dims[1]));
  }
  // One pass of batch norm over the batch's pixels x C as laid out (kernels/kernel_id.hpp batch_norm_pass_work).
  long bn_pass(const std::string& name, const std::string& label, Phase ph, BatchNormPass pass, const CnnLayer& l) {
    const KernelShape s = maps(l.out_pixels(), l.out_channels);
    const NominalWork w = batch_norm_pass_work(pass, s, p_);
    return b_.memory(name, label, ph, Kernel::batch_norm, p_, s, w.flops, w.bytes, last_);
  }
  // im2col or pooling over the layer's window: the batch's output pixels x C_in x k^2, as laid out.
  long window(const std::string& name, const std::string& label, Phase ph, Kernel k, const CnnLayer& l) {
    return memory(name, label, ph, k, maps(l.out_pixels(), l.in_channels, double(l.kernel) * l.kernel));
  }
  // Distributed batch norm: the 2 C fp32 sums (mean and variance, or the gradient's two sums).
  long bn_statistics(const std::string& name, Phase ph, const CnnLayer& l) {
    return b_.collective(name, "batch_norm_allreduce", ph, CollectiveKind::all_reduce, CollectiveAlgorithm::ring, "bn",
                         2.0 * l.out_channels * 4, {last_});
  }

  GraphBuilder b_;
  double images_;
  int cores_;
  bool im2col_;
  ConvNetDevice device_;
  Precision p_;
  bool dbn_;
  double padding_flops_ = 0;  // space-to-depth's zero taps
  long last_ = -1;
};


// Parameters in fp32 with their gradients and momentum (sharded under weight-update sharding);
// activations: every layer's input kept for the backward pass in the compute precision.
DeviceMemory convnet_memory(const std::vector<CnnLayer>& layers, double images, const ParallelPlan& plan, Precision p) {
  DeviceMemory m;
  m.parameters = convnet_parameters(layers);
  m.parameters_bytes = 4 * m.parameters;
  m.gradients_bytes = 4 * m.parameters;
  m.optimizer_state_bytes = 4 * m.parameters / (plan.zero_stage == 1 ? plan.data : 1);
  for (const CnnLayer& l : layers)
    if (l.op != CnnOp::residual_add)
      m.activations_bytes += images * double(l.in_size) * l.in_size * l.in_channels * bytes_per_element(p);
  m.in_flight_micro_batches = 1;
  m.total_bytes = m.parameters_bytes + m.gradients_bytes + m.optimizer_state_bytes + m.activations_bytes;
  return m;
}

// MLPerf v0.7 image_util.linear_2d(m, n): a ring order of an m x n tile as (row, column) pairs.
std::vector<std::pair<int, int>> linear_2d(int m, int n) {
  std::vector<std::pair<int, int>> out;
  if (m == 1 || n == 1 || m % 2 != 0) {  // a line, or column by column
    for (int i = 0; i < n * m; ++i) out.emplace_back(i % m, i / m);
    return out;
  }
  for (int i = 0; i < m / 2; ++i) {
    for (int j = 0; j < n; ++j) out.emplace_back(2 * i, j);
    for (int j = n - 1; j >= 0; --j) out.emplace_back(2 * i + 1, j);
  }
  return out;
}

void place_data_parallel(Workload& w, const ParallelPlan& plan) {
  const int replicas = plan.data;
  w.rank_count = replicas;
  GroupTable dp;
  dp.members.emplace_back();
  for (int r = 0; r < replicas; ++r) {
    w.node_of_rank.push_back(r);
    w.class_of_rank.push_back(0);
    dp.members[0].push_back(r);
  }
  dp.index(replicas);
  w.groups["dp"] = dp;
  w.groups["bn"] = batch_norm_groups(plan);
}

}  // namespace

GroupTable batch_norm_groups(const ParallelPlan& plan) {
  GroupTable bn;
  const int size = plan.batch_norm_group;
  if (plan.batch_norm_tile_x > 0) {
    const int tx = plan.batch_norm_tile_x, ty = plan.batch_norm_tile_y, row = plan.batch_norm_row_devices;
    const int tiles_per_row = row / tx;
    const std::vector<std::pair<int, int>> order = linear_2d(ty, tx);
    for (int g = 0; g < plan.data / size; ++g) {
      const int x0 = (g % tiles_per_row) * tx, y0 = (g / tiles_per_row) * ty;
      bn.members.emplace_back();
      for (const auto& [r, c] : order) bn.members.back().push_back((y0 + r) * row + x0 + c);
    }
  } else {
    for (int r = 0; r < plan.data; ++r) {
      if (r % size == 0) bn.members.emplace_back();
      bn.members.back().push_back(r);
    }
  }
  bn.index(plan.data);
  return bn;
}

std::vector<double> convnet_gradient_tensors(const std::vector<CnnLayer>& layers) {
  std::vector<double> out;
  for (std::size_t i = layers.size(); i-- > 0;) {
    const CnnLayer& l = layers[i];
    if (l.op == CnnOp::conv) out.push_back(l.parameters());
    if (l.op == CnnOp::batch_norm) out.insert(out.end(), {double(l.out_channels), double(l.out_channels)});
    if (l.op == CnnOp::fully_connected) out.insert(out.end(), {double(l.out_channels), double(l.in_channels) * l.out_channels});
  }
  return out;
}

ConvNetWorkload build_convnet_workload(const ConvNetSpec& spec, PrecisionPolicy precision, const ParallelPlan& plan,
                                       ConvNetDevice device, GradSync grad_sync) {
  // The plan rules the scenario parser applies, less the machine's (models/plan_rules.hpp).
  if (auto problem = convnet_plan_problem(plan, precision, nullptr, device.cores))
    throw std::invalid_argument(problem->text());
  if (grad_sync == GradSync::per_tensor && plan.zero_stage == 1)
    throw std::invalid_argument("per-tensor all-reduces (CrossShardOptimizer) reduce whole gradients: no weight-update sharding");
  const std::vector<CnnLayer> layers = convnet_layers(spec);
  const double images = double(plan.global_batch) / plan.data;
  const Precision p = precision == PrecisionPolicy::fp32 ? Precision::fp32 : Precision::fp16;
  ConvNetWorkload out;
  place_data_parallel(out.workload, plan);
  ConvNetGraph g(out.workload.programs[0], images, device, p, plan.batch_norm_group > 1);
  for (const CnnLayer& l : layers) g.forward(l);
  g.loss(spec.classes);
  for (size_t i = layers.size(); i-- > 0;) g.backward(layers[i], i == 0);
  out.parameters = convnet_parameters(layers);
  const std::vector<double> tensors = convnet_gradient_tensors(layers);
  g.update(out.parameters, plan.data, plan.zero_stage == 1, grad_sync == GradSync::per_tensor ? &tensors : nullptr);
  out.executed_flops = g.executed_flops() * plan.data;
  out.model_flops = g.model_flops() * plan.data;
  out.images_per_step = plan.global_batch;
  out.memory = convnet_memory(layers, images, plan, p);
  return out;
}

}  // namespace exasim
