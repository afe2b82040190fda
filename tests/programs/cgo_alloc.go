// A Go program whose C code allocates (cgo), for the runtime matrix (tests/integration/compat_cases.py).
// Go ends the process with the exit_group system call: no atexit handler, no destructor runs, so
// the shim's tail guard (preload/src/output/tail_guard.h) is what keeps its last events. And the
// Go runtime takes every signal: a snapshot signal reaches the shim only through `heapsnap record`.
//
//	cgo_alloc N ROUNDS PAUSE_MS
//
// ROUNDS times: N C mallocs of 16-79 bytes, every third kept, then a pause. Prints the counts.
package main

/*
#include <stdlib.h>
void *volatile sink;
static long kept;
static void churn(int n) {
	for (int i = 0; i < n; i++) {
		void *p = malloc(16 + i % 64);
		sink = p;
		if (i % 3) free(p); else ++kept;
	}
}
static long kept_blocks(void) { return kept; }
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	rounds, _ := strconv.Atoi(os.Args[2])
	pause, _ := strconv.Atoi(os.Args[3])
	for r := 0; r < rounds; r++ {
		C.churn(C.int(n))
		time.Sleep(time.Duration(pause) * time.Millisecond)
	}
	fmt.Printf("mallocs %d kept %d\n", n*rounds, int(C.kept_blocks()))
}
