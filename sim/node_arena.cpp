// See node_arena.hpp for why this exists. This file replaces the global (unaligned,
// non-array) operator new and delete for the whole program; the other forms of new and
// delete in libstdc++ forward to these two or never see arena memory.
#include "sim/node_arena.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <new>

namespace exasim {
namespace {

constexpr std::size_t kSlot = 24;                     // a std::list node holding one pointer
constexpr std::size_t kCapacity = std::size_t(1) << 30;  // address space reserved, not memory

// Set once, never unmapped: delete must recognise arena memory for the life of the process.
std::atomic<char*> g_base{nullptr};
std::atomic<std::size_t> g_used{0};
std::atomic<int> g_scopes{0};
std::mutex g_reserve_mutex;
thread_local void* t_free = nullptr;  // freed slots, reused last-in first-out

bool in_arena(const void* p) {
  const char* base = g_base.load(std::memory_order_acquire);
  return base != nullptr && p >= base && p < base + kCapacity;
}

void* arena_alloc() {
  if (void* p = t_free) {
    t_free = *static_cast<void**>(p);
    return p;
  }
  const std::size_t off = g_used.fetch_add(kSlot, std::memory_order_relaxed);
  if (off + kSlot > kCapacity) return nullptr;  // arena full: fall back to malloc
  return g_base.load(std::memory_order_acquire) + off;
}

}  // namespace

NodeArenaScope::NodeArenaScope() {
  std::lock_guard<std::mutex> lock(g_reserve_mutex);
  if (g_base.load() == nullptr) {
    void* m = mmap(nullptr, kCapacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED) g_base.store(static_cast<char*>(m), std::memory_order_release);
  }
  if (g_base.load() != nullptr) g_scopes.fetch_add(1);
}

NodeArenaScope::~NodeArenaScope() {
  std::lock_guard<std::mutex> lock(g_reserve_mutex);
  if (g_base.load() != nullptr) g_scopes.fetch_sub(1);
}

}  // namespace exasim

void* operator new(std::size_t n) {
  if (n == exasim::kSlot && exasim::g_scopes.load(std::memory_order_relaxed) > 0)
    if (void* p = exasim::arena_alloc()) return p;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept {
  if (exasim::in_arena(p)) {
    *static_cast<void**>(p) = exasim::t_free;
    exasim::t_free = p;
    return;
  }
  std::free(p);
}

void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
