// Ground truth for Go stacks (issue 24): two leaf functions whose loops run 3:1, called by
// one function, first from the main goroutine and then from a goroutine of its own, so every
// sample in them has a known stack (callee <- caller) that ends at Go's outermost frame:
//
//	main.hotA | main.hotB <- main.work <- main.main <- runtime.main <- runtime.goexit
//	main.hotA | main.hotB <- main.work <- main.worker <- main.main.func1 <- runtime.goexit
//
// (Go 1.19 wraps a `go` statement with arguments in a closure, main.main.func1.) Both phases
// do the same work. Nothing allocates in the loops, so the garbage collector does not run.
// Each round's length varies (unit/2 to 3*unit/2 iterations of hotB, three times as many of
// hotA): rounds of one fixed length repeat at a period near the sampler's (about a
// millisecond on a fast machine) and the samples alias, landing at the same point of
// every round (a fresh machine measured hotA at 66% instead of 75%).
// Usage: go_split ROUNDS.
package main

import (
	"fmt"
	"os"
	"strconv"
)

// Iterations of hotB per round; hotA runs three times as many.
const unit = 1 << 18

//go:noinline
func hotA(n int, x uint64) uint64 {
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func hotB(n int, x uint64) uint64 {
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func work(rounds int, x uint64) uint64 {
	seed := uint64(0x9e3779b97f4a7c15)
	for r := 0; r < rounds; r++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		n := unit/2 + int(seed>>40)%unit
		x = hotA(3*n, x)
		x = hotB(n, x)
	}
	return x
}

//go:noinline
func worker(rounds int, done chan<- uint64) {
	done <- work(rounds, 2)
}

func main() {
	rounds := 100
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "usage: go_split ROUNDS")
			os.Exit(2)
		}
		rounds = n
	}
	x := work(rounds, 1)
	done := make(chan uint64)
	go worker(rounds, done)
	fmt.Println(x ^ <-done)
}
