// A C++ method whose inner loop is an always-inlined helper: the helper must come back as its own
// frame (with its own line) before the method (with the call-site line).
// Build (done by the tests): g++ -O2 -g -Wl,--build-id inline.cpp -o inline
#include <cstdint>
#include <cstdlib>

namespace work {

static volatile std::uint64_t sink;

static inline __attribute__((always_inline)) std::uint64_t mix(std::uint64_t x, long n) {
    for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; // LINE:mix
    return x;
}

class Engine {
  public:
    __attribute__((noinline)) void hot_a(long unit);
};

void Engine::hot_a(long unit) { sink = mix(sink, 3 * unit); } // LINE:hot_a

} // namespace work

int main(int argc, char **argv) {
    work::Engine e;
    e.hot_a(argc > 1 ? std::atol(argv[1]) : 10);
    return 0;
}
