// Folding without a simulation (sim/folding.hpp): which ranks represent which, and how shared
// links fold, on a small hand-made network.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "sim/folding.hpp"

using namespace exasim;

namespace {

// Nodes in domains of `per_domain` consecutive nodes; kind 0 is a private NIC, kind 1 a shared
// domain uplink.
class Domains final : public Network {
 public:
  Domains(int nodes, int per_domain) : nodes_(nodes), per_(per_domain) {
    kinds_ = {{"nic", 10e9, 1e-6, true}, {"uplink", 40e9, 1e-6, false}};
  }
  int node_count() const override { return nodes_; }
  const std::vector<LinkKind>& link_kinds() const override { return kinds_; }
  void path(int src, int dst, std::vector<LinkRef>& out) const override {
    out.push_back({0, src});
    out.push_back({1, src / per_});
    out.push_back({0, dst});
  }
  int domain_of(int kind, int node) const override { return kind == 0 ? node : node / per_; }
  int compute_units_per_node() const override { return 1; }
  double compute_unit_speed_flops_per_s() const override { return 1e12; }

 private:
  int nodes_, per_;
  std::vector<LinkKind> kinds_;
};

Workload ranks_with_classes(const std::vector<int>& classes) {
  Workload w;
  w.rank_count = static_cast<int>(classes.size());
  w.class_of_rank = classes;
  for (int r = 0; r < w.rank_count; ++r) w.node_of_rank.push_back(r);
  return w;
}

}  // namespace

TEST_CASE("folding: one representative per class, the first rank of it, standing for the class") {
  const Domains net(8, 4);
  const Workload w = ranks_with_classes({0, 1, 0, 1, 0, 1, 0, 2});
  const Folding f = fold_ranks(w, net, Fidelity::folded);
  CHECK(f.slot_rank == std::vector<int>{0, 1, 7});
  CHECK(f.multiplicity == std::vector<int>{4, 3, 1});
  CHECK(f.rank_slot == std::vector<int>{0, 1, -1, -1, -1, -1, -1, 2});
  CHECK(f.slot_standing_for(w, 6) == 0);
  CHECK(f.slot_standing_for(w, 5) == 1);
  CHECK(f.slot_standing_for(w, 7) == 2);
}

TEST_CASE("folding: exhaustive runs every rank, one slot each, and folds no link") {
  const Domains net(4, 2);
  const Workload w = ranks_with_classes({0, 0, 0, 0});
  const Folding f = fold_ranks(w, net, Fidelity::exhaustive);
  CHECK(f.slot_rank == std::vector<int>{0, 1, 2, 3});
  CHECK(f.multiplicity == std::vector<int>{1, 1, 1, 1});
  CHECK(f.slot_standing_for(w, 3) == 3);
  CHECK(f.domain.empty());
}

TEST_CASE("folding: domains holding the same classes alike share one folded link at 1/n of its capacity") {
  // Domains {0..3} and {4..7} hold classes 0 and 1 twice each: one folded uplink, per = 2.
  // Domain {8..11} holds class 2 four times: its own folded uplink, per = 4.
  const Domains net(12, 4);
  const Workload w = ranks_with_classes({0, 1, 0, 1, 0, 1, 0, 1, 2, 2, 2, 2});
  const Folding f = fold_ranks(w, net, Fidelity::folded);
  REQUIRE(f.domain.size() == 2);
  CHECK(f.domain[0].empty());  // the private NIC does not fold by domain
  REQUIRE(f.domain[1].size() == 3);
  CHECK(f.domain[1].at(0).instance == f.domain[1].at(1).instance);
  CHECK(f.domain[1].at(0).per == 2);
  CHECK(f.domain[1].at(2).instance != f.domain[1].at(0).instance);
  CHECK(f.domain[1].at(2).per == 4);
}

TEST_CASE("folding: a domain holding its classes unequally weighs each representative's flow by its class's ranks") {
  // Class 0 holds 3 ranks, class 1 one: the link runs at B / gcd(3, 1) = B, class 0's flow counts
  // 3 times on it, class 1's once: with all four ranks sending, each gets B / 4 as the real ones.
  const Domains net(4, 4);
  const Workload w = ranks_with_classes({0, 0, 0, 1});
  const Folding f = fold_ranks(w, net, Fidelity::folded);
  const FoldedDomain& d = f.domain[1].at(0);
  CHECK(d.per == 1);
  CHECK(d.weighted);
  CHECK(d.weight(f.slot_of_class.at(0), 0) == 3);
  CHECK(d.weight(f.slot_of_class.at(1), 0) == 1);
}

TEST_CASE("folding: classes in proportion 2:6 fold at B / 2 with weights 1 and 3, equal classes keep weight 1") {
  const Domains net(16, 8);
  const Workload w = ranks_with_classes({0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  const Folding f = fold_ranks(w, net, Fidelity::folded);
  const FoldedDomain& a = f.domain[1].at(0);
  const FoldedDomain& b = f.domain[1].at(1);
  CHECK(a.per == 2);
  CHECK(a.weight(f.slot_of_class.at(0), 0) == 1);
  CHECK(a.weight(f.slot_of_class.at(1), 0) == 3);
  CHECK(b.per == 4);
  CHECK_FALSE(b.weighted);
  CHECK(b.weight(f.slot_of_class.at(2), 0) == 1);
  // a flow of class 2 into domain 0 counts for the ranks of class 2 it stands for there, over 2
  CHECK(a.weight(f.slot_of_class.at(2), 4) == 2);
}

TEST_CASE("folding: beyond kMaxFoldedWeight a domain's counts are scaled") {
  // 127 ranks of class 0 and one of class 1: q = ceil(127 / 64) = 2, weights round(63.5) = 64 and 1.
  std::vector<int> classes(128, 0);
  classes.back() = 1;
  const Domains net(128, 128);
  const Workload w = ranks_with_classes(classes);
  const Folding f = fold_ranks(w, net, Fidelity::folded);
  const FoldedDomain& d = f.domain[1].at(0);
  CHECK(d.per == 2);
  CHECK(d.weight(f.slot_of_class.at(0), 0) == 64);
  CHECK(d.weight(f.slot_of_class.at(1), 0) == 1);
}

TEST_CASE("folding: a class mixing programs is refused, naming both ranks") {
  const Domains net(4, 4);
  Workload w = ranks_with_classes({0, 0, 1, 1});
  w.programs.resize(2);
  w.program_of_rank = {0, 1, 0, 0};
  CHECK_THROWS_WITH_AS(fold_ranks(w, net, Fidelity::folded),
                       doctest::Contains("ranks 0 and 1 of class 0 run different programs"), std::runtime_error);
  CHECK_NOTHROW(fold_ranks(w, net, Fidelity::exhaustive));
}
