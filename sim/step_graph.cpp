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
    case CollectiveAlgorithm::torus_2d: return "torus_2d";
    case CollectiveAlgorithm::multi_ring: return "multi_ring";
    case CollectiveAlgorithm::rabenseifner: return "rabenseifner";
    case CollectiveAlgorithm::recursive_doubling: return "recursive_doubling";
    case CollectiveAlgorithm::tree: return "tree";
    case CollectiveAlgorithm::nvls: return "nvls";
  }
  return "?";
}

void reserve_ops(StepGraph& g, size_t ops, size_t edges) {
  g.m_vertices.reserve(ops);  // (boost's vecS storage, public in adjacency_list)
  g.m_edges.reserve(edges);
}

OpId add_op(StepGraph& g, Op op, const std::vector<OpId>& deps) {
  OpId v = boost::add_vertex(g);  // (add_vertex(property) would copy the op)
  g[v] = std::move(op);
  for (OpId d : deps) boost::add_edge(d, v, g);
  return v;
}

}  // namespace exasim
