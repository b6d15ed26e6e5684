// Keeps SimGrid 3.32's list of detached comms short (see simgrid_driver.cpp's top comment).
//
// What SimGrid 3.32 does (read in libsimgrid 3.32's code, checked with gdb on the shipped library):
// s4u::Comm::sendto_init() detaches every host-to-host comm at creation, and CommImpl::detach()
// appends it to the activities_ list of maestro (the engine's maestro, whichever actor calls), a
// std::list<ActivityImplPtr> whose only role is to hold a reference to the comm while nobody else
// may. CommImpl::finish() then calls maestro->activities_.remove(this): std::list::remove compares
// every node, so each completion costs time linear in the number of live comms. Starting comms from
// other actors would not help (detach() names maestro), nor would Comm::sendto_async (it calls
// sendto_init); mailbox comms avoid the list but need a receiving actor and simcalls per message.
//
// The engine holds every comm it starts (Replay::live_, then finished_ until time advances), so the
// list's reference is redundant: right after start, the comm's node, which detach() put last, is
// taken out of the list. finish() then walks a list that stays empty. Nothing simulated changes: the
// list is bookkeeping, read by no model. The list is a private member of SimGrid's ActorImpl, reached
// at its offset in the 3.32 layout; the first comm checks that the offset holds the list (its size grew
// by one and its last element is that comm), and on any mismatch, or with another SimGrid version,
// the trimming is off and the run is as before (only slower).
#pragma once

#include <simgrid/s4u/Activity.hpp>

#include <cstddef>

namespace exasim::detail {

class DetachedComms {
 public:
  // Call before creating a comm with sendto_init (from maestro, while the engine exists).
  void before_create();
  // Call right after the comm's start(): takes its node out of maestro's list if the check holds.
  void after_start(const simgrid::s4u::Activity& comm);
  bool trimming() const { return state_ == State::on; }
  long unlisted() const { return unlisted_; }

 private:
  enum class State { unchecked, on, off };
  void* list_ = nullptr;  // maestro's activities_ (std::list<ActivityImplPtr>) once found
  std::size_t size_before_ = 0;
  State state_ = State::unchecked;
  long unlisted_ = 0;
};

}  // namespace exasim::detail
