// MPICH's choice of collective algorithm per size and group (the sunway family's
// "collective_library", topologies/libraries/mpich-*.json): the decision of MPICH 3's
// MPIR_Allreduce_intra, MPIR_Reduce_scatter_intra and MPIR_Allgather_intra (src/mpi/coll/
// allreduce.c, red_scat.c, allgather.c; Thakur, Rabenseifner & Gropp, "Optimization of Collective
// Communication Operations in MPICH", IJHPCA 19(1), 2005), for a commutative built-in operation:
//   all-reduce      bytes <= allreduce_short_msg_bytes: recursive doubling (the whole buffer
//                   log2 p times); else Rabenseifner's reduce-scatter + all-gather (rabenseifner)
//   reduce-scatter  bytes < redscat_commutative_long_msg_bytes: recursive halving (rabenseifner);
//                   else the pairwise exchange (pairwise)
//   all-gather      bytes (the gathered result) < allgather_long_msg_bytes on a power-of-two group:
//                   recursive doubling; under allgather_short_msg_bytes otherwise: Bruck's
//                   algorithm (not modelled: ring, counted by adopt_mpich_tuning); else ring.
// MPICH's other recursive-doubling case of the all-reduce, fewer elements than the group's power of
// two, is not modelled (the element size is not kept): every Sunway all-reduce built has far more
// elements than members.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/workload.hpp"
#include "topologies/machine_reader.hpp"
#include "topologies/machine_spec.hpp"

namespace exasim {

// MPICH's algorithm for a collective of `bytes` (CollectiveWork::bytes) among `ranks` members;
// all-to-alls are left as they are (the model's own choice: plan.all_to_all).
CollectiveAlgorithm mpich_algorithm(const MpichTuning& t, CollectiveKind kind, int ranks, double bytes,
                                    CollectiveAlgorithm current);

// Sets every ring all-reduce, reduce-scatter and all-gather of w (the model's default) to MPICH's
// choice for its group role's size; returns how many it changed.
int adopt_mpich_tuning(Workload& w, const MpichTuning& t);

// A library file (topologies/libraries/mpich-*.json) at `path` of `doc` into t.
void read_mpich_tuning(const MachineReader& r, const nlohmann::json& doc, const std::string& path, MpichTuning& t);

}  // namespace exasim
