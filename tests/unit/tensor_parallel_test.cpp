// Tensor parallelism in 1, 2, 2.5 and 3 dimensions (models/tensor_parallel.hpp): group roles,
// layouts, and one linear layer's collectives against the scheme table of reference/models.md
// (Bian et al., arXiv 2105.14450). No simulation here.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <stdexcept>

#include "models/plan_placement.hpp"
#include "models/tensor_parallel.hpp"
#include "sim/collectives.hpp"
#include "tests/unit/approx.hpp"

using namespace exasim;

namespace {

// One transformer layer's four linears (QKV, projection, FFN1, FFN2) under layout l: the bytes and
// number of collectives per group role; every group of the q = 2 cases has two members.
struct LayerTraffic {
  std::map<std::string, double> bytes;
  std::map<std::string, int> count;
};
LayerTraffic layer_traffic(const TensorLayout& l, double T, double h, double ff, double e) {
  LayerTraffic t;
  for (const TensorLinear& lin : {tensor_linear(l, T, h, 3 * h, e, Linear1D::column), tensor_linear(l, T, h, h, e, Linear1D::row),
                                  tensor_linear(l, T, h, ff, e, Linear1D::column), tensor_linear(l, T, ff, h, e, Linear1D::row)})
    for (const TensorCollective& c : lin.all()) {
      t.bytes[c.role] += c.bytes;
      t.count[c.role]++;
      CHECK(c.members == 2);
    }
  return t;
}

ParallelPlan tp_plan(TensorMode m, int tensor, int depth = 1) {
  ParallelPlan p;
  p.tensor = tensor;
  p.tensor_mode = m;
  p.tensor_depth = depth;
  return p;
}

struct AlphaBeta {
  double bytes = 0;  // per device: the beta term with beta = 1 B/s
  double steps = 0;  // the alpha term with alpha = 1 s
};
// Sums the ring alpha-beta costs of a linear's collectives (forward and backward).
AlphaBeta cost(const TensorLinear& lin) {
  AlphaBeta ab;
  for (const TensorCollective& c : lin.all()) {
    const CollectiveSchedule s(c.kind, CollectiveAlgorithm::ring, c.members, c.bytes);
    ab.bytes += s.alpha_beta_time_s(0, 1);
    ab.steps += s.alpha_beta_time_s(1, 1e300);
  }
  return ab;
}

}  // namespace

TEST_CASE("tensor layouts: grid sides, splits and the table's memory and computation fractions") {
  const TensorLayout one = tensor_layout(tp_plan(TensorMode::one_d, 8));
  CHECK(one.q == 8);
  CHECK(one.activation_fraction() == 1.0);
  CHECK(one.parameter_fraction() == test::rel(1.0 / 8));
  const TensorLayout two = tensor_layout(tp_plan(TensorMode::two_d, 9));
  CHECK(two.q == 3);
  CHECK(two.activation_fraction() == test::rel(1.0 / 9));
  CHECK(two.parameter_fraction() == test::rel(1.0 / 9));
  const TensorLayout half = tensor_layout(tp_plan(TensorMode::two_half_d, 18, 2));
  CHECK(half.q == 3);
  CHECK(half.activation_fraction() == test::rel(1.0 / 18));  // 1/(d q^2)
  CHECK(half.parameter_fraction() == test::rel(1.0 / 9));    // 1/q^2
  CHECK(half.computation_fraction() == test::rel(1.0 / 18));
  const TensorLayout three = tensor_layout(tp_plan(TensorMode::three_d, 27));
  CHECK(three.q == 3);
  CHECK(three.activation_fraction() == test::rel(1.0 / 27));
  CHECK(three.parameter_fraction() == test::rel(1.0 / 27));
  CHECK_THROWS_AS(tensor_layout(tp_plan(TensorMode::two_d, 8)), std::invalid_argument);
  CHECK_THROWS_AS(tensor_layout(tp_plan(TensorMode::two_half_d, 12, 2)), std::invalid_argument);
  CHECK_THROWS_AS(tensor_layout(tp_plan(TensorMode::three_d, 9)), std::invalid_argument);
}

TEST_CASE("one linear's collectives reproduce the table's bandwidth and latency terms") {
  // X, A and Y all M elements of 1 byte: T = d_in = d_out = 216 (divisible by every split below).
  const double n = 216, M = n * n;
  SUBCASE("1-D: one all-reduce per linear, 2(P-1)/P x M and 2(P-1) steps") {
    for (int P : {2, 4, 8}) {
      const TensorLayout l = tensor_layout(tp_plan(TensorMode::one_d, P));
      for (Linear1D kind : {Linear1D::column, Linear1D::row}) {
        const AlphaBeta ab = cost(tensor_linear(l, n, n, n, 1, kind));
        CHECK(ab.bytes / M == test::rel(2.0 * (P - 1) / P));
        CHECK(ab.steps == 2 * (P - 1));
      }
    }
  }
  SUBCASE("2-D: 6(q-1)/q in panels of M/q, 6(q-1) steps") {
    for (int q : {2, 3, 6}) {
      const AlphaBeta ab = cost(tensor_linear(tensor_layout(tp_plan(TensorMode::two_d, q * q)), n, n, n, 1));
      CHECK(ab.bytes / (M / q) == test::rel(6.0 * (q - 1) / q));
      CHECK(ab.bytes / M == test::rel(6.0 * (q - 1) / (q * q)));  // = 6(sqrt(P)-1)/P
      CHECK(ab.steps == 6 * (q - 1));
    }
  }
  SUBCASE("2.5-D: 3(q-1)(d+1)/(d q) in panels of M/q, 6(q-1) steps") {
    for (auto [q, d] : {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 3}, std::pair{3, 1}}) {
      const AlphaBeta ab =
          cost(tensor_linear(tensor_layout(tp_plan(TensorMode::two_half_d, d * q * q, d)), n, n, n, 1));
      CHECK(ab.bytes / (M / q) == test::rel(3.0 * (q - 1) * (d + 1) / (d * q)));
      CHECK(ab.steps == 6 * (q - 1));
    }
  }
  SUBCASE("3-D: 6(q-1)/q^3 x M, 6(q-1) steps") {
    for (int q : {2, 3, 6}) {
      const AlphaBeta ab = cost(tensor_linear(tensor_layout(tp_plan(TensorMode::three_d, q * q * q)), n, n, n, 1));
      CHECK(ab.bytes / M == test::rel(6.0 * (q - 1) / (q * q * q)));
      CHECK(ab.steps == 6 * (q - 1));
    }
  }
}

TEST_CASE("3-D, one transformer layer by hand: bytes per group role, Colossal-AI's swapped input and output groups") {
  // q = 2 (8 devices), T = 64 tokens, h = 32, d_ff = 128, fp16. Colossal-AI's Linear3D: the weight
  // group "tp_x" all-gathers A (d_in/q^2 x d_out/q -> d_in/q x d_out/q) forward and reduce-scatters
  // dA backward; the input group all-gathers X (T/q x d_in/q gathered) forward and reduce-scatters dX
  // backward; the output group reduce-scatters Y (T/q x d_out/q) forward and all-gathers dY backward.
  // QKV and FFN1 use input "tp_y", output "tp_z"; the projection and FFN2 swap them.
  const TensorLayout l = tensor_layout(tp_plan(TensorMode::three_d, 8));
  const double T = 64, h = 32, ff = 128, e = 2;
  const LayerTraffic t = layer_traffic(l, T, h, ff, e);
  std::map<std::string, double> bytes = t.bytes;
  std::map<std::string, int> count = t.count;
  // tp_x: 2 x (32x96 + 32x32 + 32x128 + 128x32) / 4 x 2 bytes = 2 x 12288 / 4 x 2.
  CHECK(bytes["tp_x"] == 12288);
  // tp_y: X of QKV and FFN1 (32 x 16 each), Y of projection and FFN2 (32 x 16 each), twice, x 2 bytes.
  CHECK(bytes["tp_y"] == 2 * 4 * 32 * 16 * 2);
  // tp_z: Y of QKV (32 x 48) and FFN1 (32 x 64), X of projection (32 x 16) and FFN2 (32 x 64), twice.
  CHECK(bytes["tp_z"] == 2 * (32 * 48 + 32 * 64 + 32 * 16 + 32 * 64) * 2);
  CHECK(count["tp_x"] == 8);
  CHECK(count["tp_y"] == 8);
  CHECK(count["tp_z"] == 8);
  // The swap: a row linear's X is gathered over tp_z and its Y scattered over tp_y.
  const TensorLinear row = tensor_linear(l, T, ff, h, e, Linear1D::row);
  CHECK(row.forward_before[0].role == "tp_z");
  CHECK(row.forward_before[1].role == "tp_x");
  CHECK(row.forward_after[0].role == "tp_y");
  CHECK(row.forward_before[0].bytes == 32 * 64 * 2);
}

TEST_CASE("2-D, one transformer layer by hand: bytes per group role (Colossal-AI's Linear2D, SUMMA as gathers)") {
  // q = 2 (4 devices), T = 64 tokens, h = 32, d_ff = 128, fp16. Per linear, "tp_row" carries X's
  // row panel (T/q x d_in) three times (forward all-gather, the weight gradient's all-gather
  // again, dX reduce-scatter) and "tp_col" A's column panel (d_in x d_out/q) three times (forward
  // all-gather, the data gradient's all-gather again, dA reduce-scatter).
  const TensorLayout l = tensor_layout(tp_plan(TensorMode::two_d, 4));
  const double T = 64, h = 32, ff = 128, e = 2;
  const LayerTraffic t = layer_traffic(l, T, h, ff, e);
  std::map<std::string, double> bytes = t.bytes;
  std::map<std::string, int> count = t.count;
  // tp_row: X panels 32 x 32 (QKV, projection, FFN1) and 32 x 128 (FFN2), 3 times, x 2 bytes.
  CHECK(bytes["tp_row"] == 3 * (3 * 32 * 32 + 32 * 128) * 2);
  // tp_col: A panels 32 x 48, 32 x 16, 32 x 64, 128 x 16, 3 times, x 2 bytes.
  CHECK(bytes["tp_col"] == 3 * (32 * 48 + 32 * 16 + 32 * 64 + 128 * 16) * 2);
  CHECK(count["tp_row"] == 12);
  CHECK(count["tp_col"] == 12);
  // Row and column linears are the same under 2-D (no Megatron pairs).
  CHECK(tensor_linear(l, T, ff, h, e, Linear1D::row).all().size() == tensor_linear(l, T, ff, h, e, Linear1D::column).all().size());
}

TEST_CASE("the 64-device cube and grid on 4-GPU nodes: which groups stay in a node (Colossal-AI's rank order)") {
  // Tensor ranks are global ranks 0..63, 4 to a node (rank / 4). 3-D 4 x 4 x 4 (t = i + 4 (j + 4 l)):
  // the weight group tp_x is one node; every member of a tp_y or tp_z group is on its own node, so
  // the four GPUs of a node are in four different tp_y (tp_z) groups and all four rings leave
  // through the node's NICs at once. 2-D 8 x 8: a row spans 2 nodes, a column 8 nodes.
  auto nodes_of = [](const std::vector<int>& members) {
    std::set<int> n;
    for (int r : members) n.insert(r / 4);
    return n.size();
  };
  Workload w3;
  place_plan(tp_plan(TensorMode::three_d, 64), w3);
  for (const auto& g : w3.groups.at("tp_x").members) CHECK(nodes_of(g) == 1);
  for (const char* role : {"tp_y", "tp_z"})
    for (const auto& g : w3.groups.at(role).members) CHECK(nodes_of(g) == 4);
  Workload w2;
  place_plan(tp_plan(TensorMode::two_d, 64), w2);
  for (const auto& g : w2.groups.at("tp_row").members) CHECK(nodes_of(g) == 2);
  for (const auto& g : w2.groups.at("tp_col").members) CHECK(nodes_of(g) == 8);
}

TEST_CASE("local GEMMs of one linear: each device does 1/P of the FLOPs, collectives by hand") {
  const double T = 64, din = 32, dout = 48;
  auto flops = [](const KernelShape& s) { return 2.0 * s.dims[0] * s.dims[1] * s.dims[2] * s.batch; };
  const double full = 2 * T * din * dout;
  SUBCASE("2-D, q = 2") {
    const TensorLinear lin = tensor_linear(tensor_layout(tp_plan(TensorMode::two_d, 4)), T, din, dout, 2);
    CHECK(lin.forward_gemm == KernelShape{{32, 24, 32}, 1});  // T/q x d_out/q x d_in
    CHECK(flops(lin.forward_gemm) == test::rel(full / 4));
    REQUIRE(lin.forward_before.size() == 2);
    CHECK(lin.forward_before[0].role == "tp_row");
    CHECK(lin.forward_before[0].bytes == T / 2 * din * 2);  // X's row panel, fp16
    CHECK(lin.forward_before[1].role == "tp_col");
    CHECK(lin.forward_before[1].bytes == din * dout / 2 * 2);  // A's column panel
    CHECK(lin.all().size() == 6);
  }
  SUBCASE("2.5-D, q = 2, d = 2") {
    const TensorLinear lin = tensor_linear(tensor_layout(tp_plan(TensorMode::two_half_d, 8, 2)), T, din, dout, 2);
    CHECK(lin.forward_gemm == KernelShape{{16, 24, 32}, 1});
    CHECK(flops(lin.forward_gemm) == test::rel(full / 8));
    CHECK(lin.forward_before[0].bytes == T / 4 * din * 2);
    CHECK(lin.forward_before[1].bytes == din * dout / 2 * 2);
  }
  SUBCASE("3-D, q = 2") {
    const TensorLinear lin = tensor_linear(tensor_layout(tp_plan(TensorMode::three_d, 8)), T, din, dout, 2);
    CHECK(lin.forward_gemm == KernelShape{{32, 24, 16}, 1});
    CHECK(flops(lin.forward_gemm) == test::rel(full / 8));
    REQUIRE(lin.forward_after.size() == 1);
    CHECK(lin.forward_after[0].kind == CollectiveKind::reduce_scatter);
    CHECK(lin.forward_after[0].role == "tp_z");
    CHECK(lin.forward_after[0].bytes == T / 2 * dout / 2 * 2);
    std::set<std::string> roles;
    for (auto& c : lin.all()) roles.insert(c.role);
    CHECK(roles == std::set<std::string>{"tp_x", "tp_y", "tp_z"});
  }
  SUBCASE("1-D column and row") {
    const TensorLayout l = tensor_layout(tp_plan(TensorMode::one_d, 4));
    CHECK(tensor_linear(l, T, din, dout, 2, Linear1D::column).forward_gemm == KernelShape{{64, 12, 32}, 1});
    CHECK(tensor_linear(l, T, din, dout, 2, Linear1D::row).forward_gemm == KernelShape{{64, 48, 8}, 1});
  }
}

TEST_CASE("placement builds every tensor role, each tensor group is covered once per role") {
  struct Case {
    TensorMode mode;
    int tensor, depth;
  };
  for (const Case c : {Case{TensorMode::two_d, 4, 1}, Case{TensorMode::two_half_d, 8, 2}, Case{TensorMode::three_d, 8, 1}}) {
    ParallelPlan p = tp_plan(c.mode, c.tensor, c.depth);
    p.data = 2;
    p.pipeline = 2;
    Workload w;
    place_plan(p, w);
    const TensorLayout l = tensor_layout(p);
    for (const std::string& role : tensor_group_roles(c.mode)) {
      const GroupTable& g = w.groups.at(role);
      CHECK(g.members.size() == size_t(p.devices() / l.q));
      for (auto& m : g.members) {
        CHECK(m.size() == size_t(l.q));
        for (int r : m) CHECK(r >= 0);
      }
      for (int r = 0; r < p.devices(); ++r) CHECK(g.group_of_rank[r] >= 0);
    }
  }
  // 2-D q = 2, tensor innermost: rows are adjacent, columns strided by q.
  Workload w;
  place_plan(tp_plan(TensorMode::two_d, 4), w);
  CHECK(w.groups.at("tp_row").members == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  CHECK(w.groups.at("tp_col").members == std::vector<std::vector<int>>{{0, 2}, {1, 3}});
  // 2.5-D q = 2, d = 2: depth groups stride by q^2.
  Workload w2;
  place_plan(tp_plan(TensorMode::two_half_d, 8, 2), w2);
  CHECK(w2.groups.at("tp_depth").members == std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(w2.groups.at("tp_row").members[1] == std::vector<int>{2, 3});
  CHECK(w2.groups.at("tp_row").members[2] == std::vector<int>{4, 5});
  // 3-D q = 2: x adjacent, y stride 2, z stride 4.
  Workload w3;
  place_plan(tp_plan(TensorMode::three_d, 8), w3);
  CHECK(w3.groups.at("tp_x").members[0] == std::vector<int>{0, 1});
  CHECK(w3.groups.at("tp_y").members[0] == std::vector<int>{0, 2});
  CHECK(w3.groups.at("tp_z").members[0] == std::vector<int>{0, 4});
}
