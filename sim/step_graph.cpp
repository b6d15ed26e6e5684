#include "sim/step_graph.hpp"

namespace exasim {

const char* to_string(Phase p) {
  switch (p) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::optimizer: return "optimizer";
  }
  return "?";
}
const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp64: return "fp64";
    case Precision::fp32: return "fp32";
    case Precision::fp16: return "fp16";
  }
  return "?";
}
const char* to_string(KernelClass k) {
  switch (k) {
    case KernelClass::gemm: return "gemm";
    case KernelClass::memory_bound: return "memory_bound";
    case KernelClass::optimizer_update: return "optimizer_update";
  }
  return "?";
}
const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::all_to_all: return "all_to_all";
  }
  return "?";
}
const char* to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::pairwise: return "pairwise";
    case CollectiveAlgorithm::direct: return "direct";
    case CollectiveAlgorithm::hierarchical: return "hierarchical";
  }
  return "?";
}
double bytes_per_element(Precision p) {
  switch (p) {
    case Precision::fp64: return 8;
    case Precision::fp32: return 4;
    case Precision::fp16: return 2;
  }
  return 4;
}

OpId add_op(StepGraph& g, Op op, const std::vector<OpId>& deps) {
  OpId v = boost::add_vertex(std::move(op), g);
  for (OpId d : deps) boost::add_edge(d, v, g);
  return v;
}

}  // namespace exasim
