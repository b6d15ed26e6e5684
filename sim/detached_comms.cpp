// See detached_comms.hpp for what this does and why.
#include "sim/detached_comms.hpp"

#include <simgrid/forward.h>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/version.h>

#include <list>

namespace exasim::detail {

namespace {

using ActivityList = std::list<simgrid::kernel::activity::ActivityImplPtr>;

#if SIMGRID_VERSION_MAJOR == 3 && SIMGRID_VERSION_MINOR == 32
// Offset of ActorImpl::activities_ in libsimgrid 3.32 (x86-64, libstdc++): CommImpl::detach() appends
// to maestro + 0xc0 and CommImpl::finish() removes from it (disassembly of the Debian 3.32 library).
constexpr std::size_t kActivitiesOffset = 0xc0;
#else
constexpr std::size_t kActivitiesOffset = 0;  // unknown layout: never trim
#endif

ActivityList* maestro_activities() {
  if (kActivitiesOffset == 0) return nullptr;
  const simgrid::s4u::Actor* self = simgrid::s4u::Actor::self();
  if (self == nullptr || self->get_impl() == nullptr) return nullptr;
  return reinterpret_cast<ActivityList*>(reinterpret_cast<char*>(self->get_impl()) + kActivitiesOffset);
}

}  // namespace

void DetachedComms::before_create() {
  if (state_ == State::off) return;
  if (state_ == State::unchecked) list_ = maestro_activities();
  if (list_ == nullptr) {
    state_ = State::off;
    return;
  }
  size_before_ = static_cast<ActivityList*>(list_)->size();
}

void DetachedComms::after_start(const simgrid::s4u::Activity& comm) {
  if (state_ == State::off) return;
  auto* list = static_cast<ActivityList*>(list_);
  // The checked facts: one more element than before the comm existed, and it is this comm.
  if (list->size() != size_before_ + 1 || list->back().get() != comm.get_impl()) {
    state_ = State::off;
    return;
  }
  state_ = State::on;
  list->pop_back();  // drops the list's reference; the engine's CommPtr keeps the comm alive
  unlisted_++;
}

}  // namespace exasim::detail
