// A dedicated arena for 24-byte heap objects, used while the engine runs SimGrid.
//
// Why: SimGrid 3.32 keeps every activity started from maestro (all of the engine's comms)
// in one std::list, and on each completion removes the activity with list::remove, a walk
// over every node of that list. With thousands of live comms the walk dominates the run,
// and its cost is memory latency: the list's nodes (24 bytes each) are scattered across a
// heap of hundreds of MiB. Serving 24-byte allocations from one compact arena keeps the
// whole list in cache; on moda-1024 exhaustive this cut the wall time from 157 s to 54 s.
//
// The replaced global operator new takes 24-byte requests from the arena only while a
// NodeArenaScope is alive; operator delete recognises arena memory by its address at any
// time, so objects may outlive the scope. Everything else goes to malloc as usual.
#pragma once

namespace exasim {

class NodeArenaScope {
 public:
  NodeArenaScope();
  ~NodeArenaScope();
  NodeArenaScope(const NodeArenaScope&) = delete;
  NodeArenaScope& operator=(const NodeArenaScope&) = delete;
};

}  // namespace exasim
