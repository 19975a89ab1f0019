// Ground truth for C++: work::Engine::hot_a does 3x the work of work::Engine::hot_b; the inner
// step is an always-inlined helper that must show up as its own (inlined) frame. The volatile
// local gives hot_a/hot_b a stack frame, so that gcc sets up the frame pointer the kernel's
// call-chain walk needs (it omits it in leaf functions that use no stack).
// A unit's size varies from round to round (burn.h's next_unit), so that sampling cannot lock
// onto the rounds.
// Usage: cpu_split_cpp [ROUNDS]
#include <cstdint>
#include <cstdlib>

#include "burn.h"

namespace work {

static volatile std::uint64_t sink;

static inline __attribute__((always_inline)) std::uint64_t mix(std::uint64_t seed, long n) {
    volatile std::uint64_t x = seed;
    for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; // LINE:mix
    return x;
}

class Engine {
  public:
    __attribute__((noinline)) void hot_a(long unit);
    __attribute__((noinline)) void hot_b(long unit);
};

void Engine::hot_a(long unit) { sink = mix(sink, 3 * unit); } // LINE:hot_a
void Engine::hot_b(long unit) { sink = mix(sink, unit); }     // LINE:hot_b

} // namespace work

int main(int argc, char **argv) {
    long rounds = argc > 1 ? std::atol(argv[1]) : 2000;
    work::Engine e;
    for (long r = 0; rounds == 0 || r < rounds; r++) {
        long unit = next_unit(200000);
        e.hot_a(unit);
        e.hot_b(unit);
    }
    return 0;
}
