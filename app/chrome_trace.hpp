// The step as a timeline: a Chrome trace-event file (JSON object format) that Perfetto
// (ui.perfetto.dev) and chrome://tracing open.
//
// One process per traced rank, named "rank R" with how many real ranks it stands for (a
// folded run simulates one representative per class of alike ranks) and its program; inside
// it, compute and communication go to separate threads ("compute", "communication"), each
// split into as many lanes as its overlapping ops need (a trace viewer draws overlapping
// slices of one thread badly). Each op is a complete event ("ph": "X") from the moment its
// predecessors were done to its end on this rank, named by its label (e.g. "qkv_gemm",
// "dp_all_reduce"), with its category (compute, collective, transfer), its phase and its work
// as arguments: kernel, precision, flops and bytes for compute; kind, algorithm, group role
// and bytes for a collective; direction, peer offset, bytes and tag for a transfer.
// Timestamps are in microseconds of simulated time (the format's unit).
//
// Size: an exhaustive run simulates every rank; above `max_ranks` traced ranks only the first
// simulated rank of each class is kept (labelled with its class's size), so the file of the
// 96,000-node scenario stays small. Deterministic: the same prediction gives the same bytes.
#pragma once
#include <string>

#include "app/pipeline.hpp"

namespace exasim {

struct TraceOptions {
  int max_ranks = 256;
};

// Throws std::invalid_argument for a prediction without simulated timings (memory-only).
std::string chrome_trace_json(const Prediction& p, const TraceOptions& o = {});

}  // namespace exasim
