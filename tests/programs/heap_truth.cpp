// Ground truth for the heap analysis of C++ (issue 3), compared with heaptrack_print: operator
// new/delete (single and array), std::string, std::vector growth and std::map, plus leaks.
// heaptrack_print names the caller of operator new as the site; allocations inside libstdc++
// (std::string's _M_create) are sited there. Usage: heap_truth_cpp [N] (N defaults to 100,000).
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

struct Node {
    long v[4];
};

static void *volatile sink;

__attribute__((noipa)) void news(int n) {
    for (int i = 0; i < n; i++) {
        Node *p = new Node(); // LINE:new
        sink = p;
        delete p;
    }
}

__attribute__((noipa)) void arrays(int n) {
    for (int i = 0; i < n; i++) {
        long *a = new long[i % 32 + 1]; // LINE:array
        sink = a;
        delete[] a;
    }
}

__attribute__((noipa)) size_t strings(int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        std::string s(40 + i % 50, 'x'); // beyond the small-string buffer: heap
        s += std::to_string(i);
        total += s.size();
    }
    return total;
}

__attribute__((noipa)) size_t vectors(int rounds) {
    size_t total = 0;
    for (int r = 0; r < rounds; r++) {
        std::vector<int> v;
        for (int i = 0; i < 1000; i++) v.push_back(i); // grows 11 times
        total += v.size();
    }
    return total;
}

__attribute__((noipa)) size_t maps(int n) {
    std::map<int, int> m;
    for (int i = 0; i < n; i++) m[i * 7 % n] = i;
    return m.size();
}

__attribute__((noipa)) void leaks(int n) {
    for (int i = 0; i < n; i++) sink = new Node(); // LINE:leak
}

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 100000;
    news(n);
    arrays(n);
    size_t t = strings(n);
    t += vectors(n / 100);
    t += maps(n / 10);
    leaks(1000);
    return t > 0 ? 0 : 1;
}
