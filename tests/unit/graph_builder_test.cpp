// GraphBuilder's dependencies (models/graph_builder.hpp): one id, a vector or a brace list of ids,
// read in place; ids below zero add no edge; the edges come in the order given.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "models/graph_builder.hpp"

using namespace exasim;

namespace {
std::vector<OpId> sources_of(const StepGraph& g, long v) {
  std::vector<OpId> s;
  for (auto [e, end] = boost::in_edges(static_cast<OpId>(v), g); e != end; ++e) s.push_back(boost::source(*e, g));
  return s;
}
}  // namespace

TEST_CASE("GraphBuilder: an op runs after one id, a vector or a brace list of ids, negative ids dropped") {
  StepGraph g;
  GraphBuilder b(g);
  const long a = b.memory("a", "x", Phase::forward, Kernel::gelu, Precision::fp16, elements(8), 8, 16, -1);
  const long c = b.memory("c", "x", Phase::forward, Kernel::gelu, Precision::fp16, elements(8), 8, 16, a);
  const std::vector<long> both{c, -1, a};
  const long d = b.memory("d", "x", Phase::forward, Kernel::gelu, Precision::fp16, elements(8), 8, 16, both);
  const long e = b.memory("e", "x", Phase::forward, Kernel::gelu, Precision::fp16, elements(8), 8, 16, {d, a});
  CHECK(sources_of(g, a).empty());
  CHECK(sources_of(g, c) == std::vector<OpId>{OpId(a)});
  CHECK(sources_of(g, d) == std::vector<OpId>{OpId(c), OpId(a)});
  CHECK(sources_of(g, e) == std::vector<OpId>{OpId(d), OpId(a)});
  CHECK(g[static_cast<OpId>(e)].name == "e");
  // A GEMM's backward: the data gradient, then the weight gradient after it, named from the forward's.
  const long w = b.gemm_backward("L0.fc", "fc", Precision::fp16, Precision::fp16, gemm_shape(4, 8, 16), e);
  CHECK(g[static_cast<OpId>(w)].name == "L0.fc.wgrad");
  CHECK(g[static_cast<OpId>(w - 1)].name == "L0.fc.dgrad");
  CHECK(g[static_cast<OpId>(w - 1)].label == "fc.dgrad");
  CHECK(sources_of(g, w - 1) == std::vector<OpId>{OpId(e)});
  // More than four ids in a brace list is a vector's job.
  CHECK_THROWS_AS(b.memory("f", "x", Phase::forward, Kernel::gelu, Precision::fp16, elements(8), 8, 16, {a, c, d, e, w}),
                  std::invalid_argument);
}

TEST_CASE("StepGraph: an op's edge lists keep their first edge inline and grow past it, in order") {
  // (sim/step_graph.hpp: small_edge_vecS holds one edge in the vertex, the rest on the heap)
  StepGraph g;
  const OpId a = add_op(g, Op{"a", "x", Phase::forward, ComputeWork{}}, {});
  const OpId b = add_op(g, Op{"b", "x", Phase::forward, ComputeWork{}}, {a});
  const OpId c = add_op(g, Op{"c", "x", Phase::forward, ComputeWork{}}, {a});
  const OpId d = add_op(g, Op{"d", "x", Phase::backward, ComputeWork{}}, {a, b, c});
  CHECK(boost::num_edges(g) == 5);
  CHECK(boost::out_degree(a, g) == 3);
  CHECK(boost::in_degree(d, g) == 3);
  CHECK(sources_of(g, static_cast<long>(d)) == std::vector<OpId>{a, b, c});
  std::vector<OpId> targets;
  for (auto [e, end] = boost::out_edges(a, g); e != end; ++e) targets.push_back(boost::target(*e, g));
  CHECK(targets == std::vector<OpId>{b, c, d});
  CHECK(boost::edge(b, d, g).second);
  CHECK_FALSE(boost::edge(d, b, g).second);
  const StepGraph copy = g;  // a copy keeps every edge (the inline one and the heap's)
  CHECK(boost::in_degree(d, copy) == 3);
  CHECK(copy[d].name == "d");
}
