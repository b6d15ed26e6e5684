// The collectives of a step graph counted by label: how many, and the bytes of each (the last one's;
// the tests that use it build graphs whose like-labelled collectives move the same bytes).
#pragma once

#include <boost/range/iterator_range.hpp>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "sim/step_graph.hpp"

namespace exasim::test {

using CollectivesByLabel = std::map<std::string, std::pair<int, double>>;  // label -> (count, bytes of each)

// Any kind of work (CollectiveWork, TransferWork) counted by label, with the bytes of each.
template <class Work>
CollectivesByLabel works_by_label(const StepGraph& g) {
  CollectivesByLabel seen;
  for (auto v : boost::make_iterator_range(boost::vertices(g)))
    if (const auto* w = std::get_if<Work>(&g[v].work)) {
      auto& [n, bytes] = seen[g[v].label];
      ++n;
      bytes = w->bytes;
    }
  return seen;
}

inline CollectivesByLabel collectives_by_label(const StepGraph& g) { return works_by_label<CollectiveWork>(g); }

}  // namespace exasim::test
