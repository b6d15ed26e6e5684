// Folding classes on machines with a fast inner level (the GPUs of a node on NVLink).
//
// A plan's classes (one per pipeline stage) say which ranks run the same program. On a GPU
// node they need not behave alike: in a data-parallel ring over consecutive GPUs, GPU 7 sends
// to the next node through its NIC while GPUs 0-6 send over NVLink, and the ring runs at the
// NIC's pace. Folding one representative per stage would see only NVLink steps.
// split_classes_at_inner_level splits each class by the rank's offset inside its inner level
// (node % devices_per_inner_level) when some group's ring neighbours are sometimes inside one
// inner level and sometimes not; plans whose groups all stay inside, or all leave, an inner
// level (Megatron's tensor groups on a node, data-parallel groups across nodes) keep their
// classes.
#pragma once
#include <string>

#include "sim/workload.hpp"

namespace exasim {

// True when a group of some role has consecutive members (ring neighbours, wrap included)
// both inside one inner level and across inner levels; roles that run only multi-ring
// collectives (role_runs_only_multi_ring) are not asked.
// True when no op of any program over group role `role` is other than a multi_ring collective
// (a role no op uses, such as a dense model's expert_dp, cannot tell ranks apart either).
bool role_runs_only_multi_ring(const Workload& w, const std::string& role);

bool groups_straddle_inner_levels(const Workload& w, int devices_per_inner_level);

// Splits w.class_of_rank by inner-level offset when groups_straddle_inner_levels; returns
// whether it did.
bool split_classes_at_inner_level(Workload& w, int devices_per_inner_level);

}  // namespace exasim
