// See node_arena.hpp for why this exists. This file replaces every form of the global
// operator new and delete for the whole program.
#include "sim/node_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <stdlib.h>  // posix_memalign
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

// Every form of new and delete is replaced, so that all of them agree on one allocator (malloc and
// free): a form left to the runtime (libstdc++'s, or a sanitizer's interceptor) would allocate with
// its own and could hand that memory to the delete below, or the other way round (AddressSanitizer
// reports an alloc-dealloc mismatch). Only the plain form takes 24-byte requests from the arena;
// every delete recognises arena memory.
namespace {

void* allocate(std::size_t n) {
  if (n == exasim::kSlot && exasim::g_scopes.load(std::memory_order_relaxed) > 0)
    if (void* p = exasim::arena_alloc()) return p;
  return std::malloc(n == 0 ? 1 : n);
}

void* allocate_aligned(std::size_t n, std::align_val_t a) {
  const std::size_t align = std::max(static_cast<std::size_t>(a), sizeof(void*));
  void* p = nullptr;
  return posix_memalign(&p, align, n == 0 ? 1 : n) == 0 ? p : nullptr;
}

void release(void* p) noexcept {
  if (exasim::in_arena(p)) {
    *static_cast<void**>(p) = exasim::t_free;
    exasim::t_free = p;
    return;
  }
  std::free(p);
}

void* or_throw(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return or_throw(allocate(n)); }
void* operator new[](std::size_t n) { return or_throw(allocate(n)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) { return or_throw(allocate_aligned(n, a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return or_throw(allocate_aligned(n, a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return allocate_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return allocate_aligned(n, a); }

void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
