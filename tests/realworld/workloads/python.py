# The Python workload of the real-world suite (tests/src/realworld.rs, "python"): about a
# second of interpreter work spread over the eval loop, integer arithmetic, dictionaries,
# strings and sorting, so that many of the interpreter's C functions, exported or static,
# take samples.


def primes(limit):
    sieve = bytearray([1]) * limit
    sieve[0:2] = b"\0\0"
    for i in range(2, int(limit**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytes(len(range(i * i, limit, i)))
    return [i for i, v in enumerate(sieve) if v]


def word_counts(rounds):
    counts = {}
    for r in range(rounds):
        for w in ("alpha beta gamma delta %d epsilon %d" % (r % 97, r % 13)).split():
            counts[w] = counts.get(w, 0) + 1
    return counts


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm(self):
        return self.x * self.x + self.y * self.y


def points(n):
    ps = [Point(i % 101, (i * 7) % 53) for i in range(n)]
    ps.sort(key=Point.norm)
    return sum(p.norm() for p in ps[:100])


total = len(primes(2_000_000))
total += len(word_counts(120_000))
total += fib(27)
total += points(300_000)
print(total)
