// Brief spinning before sleeping. Waking a thread that sleeps on a futex takes tens of
// microseconds on this kind of VM (about 40 us measured), as long as a small kernel runs;
// a thread that polls for a short while after its last piece of work picks up the next
// one at once. The budget bounds the CPU time a thread burns when no work comes.
#pragma once

#include <chrono>
#include <thread>

namespace kiln {

inline constexpr std::chrono::microseconds kSpinBudget{100};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `ready()` for up to `budget`; returns true as soon as it holds, false on timeout.
template <typename Ready>
bool spin_until(Ready&& ready, std::chrono::microseconds budget = kSpinBudget) {
  auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

}  // namespace kiln
