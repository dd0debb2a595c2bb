package main

// SIGINT during a call. The Go runtime never handles SIGINT in this
// library: nothing here calls signal.Notify. In a library built with
// -buildmode=c-shared, Notify puts Go's handler in front of the program's
// and Reset puts the program's back, and a SIGINT that arrives on a thread
// Go does not own while the two are being swapped makes the runtime
// re-install its own handler after handing the signal on; the next Notify
// then saves Go's handler as "the program's", and SIGINT forwards to
// itself until the stack overflows. A storm of SIGINTs during short calls
// hits that window.
//
// Instead a handler written in C (below) sits in front of the program's
// own (Python's) and never leaves: it counts the interruptible calls in
// progress (those waiting for an object's turn among them), and a SIGINT that finds one is taken: counted, and a byte is
// written to a pipe, which forward reads to stop those calls. A SIGINT
// that finds none goes straight on to the program's handler, as if the
// library were not there. A call learns that it was interrupted from the
// count, not from the pipe, so a SIGINT taken just as the call ends is
// never lost: the call reports it (KeyboardInterrupt in Python).

/*
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

// tl_word: the interruptible calls in progress (low 32 bits) and the
// SIGINTs taken from the program while one was (high 32 bits, wrapping).
static uint64_t tl_word;
// tl_next: the handler a SIGINT with no such call is passed on to; never
// tl_on_sigint itself, SIG_DFL or SIG_IGN.
static void *tl_next;
static int tl_pipe[2] = {-1, -1};
static pthread_mutex_t tl_mu = PTHREAD_MUTEX_INITIALIZER;

static void tl_on_sigint(int sig, siginfo_t *info, void *ctx) {
	int saved = errno;
	uint64_t w = __atomic_load_n(&tl_word, __ATOMIC_SEQ_CST);
	for (;;) {
		if ((uint32_t)w == 0) {
			void (*next)(int, siginfo_t *, void *) = __atomic_load_n(&tl_next, __ATOMIC_SEQ_CST);
			if (next != 0) {
				next(sig, info, ctx); // a handler of one argument ignores the other two
			}
			break;
		}
		if (__atomic_compare_exchange_n(&tl_word, &w, w + ((uint64_t)1 << 32), 0, __ATOMIC_SEQ_CST,
		                                __ATOMIC_SEQ_CST)) {
			char b = 1;
			ssize_t n = write(tl_pipe[1], &b, 1); // a full pipe already wakes the reader
			(void)n;
			break;
		}
	}
	errno = saved;
}

// A forked child has no calls in progress.
static void tl_after_fork(void) {
	__atomic_and_fetch(&tl_word, ~(uint64_t)0xffffffff, __ATOMIC_SEQ_CST);
}

// tl_sigint_take puts tl_on_sigint in front of SIGINT's handler unless it
// is there already, and returns 1; or 0 when SIGINT has no handler to
// pass the signal on to (the default action or ignored), which it leaves
// alone. *fd receives the pipe's reading end once it exists.
static int tl_sigint_take(int *fd) {
	int ok = 0;
	void *h;
	struct sigaction cur, sa;
	pthread_mutex_lock(&tl_mu);
	if (tl_pipe[0] < 0) {
		int p[2];
		if (pipe(p) != 0) {
			goto out;
		}
		for (int i = 0; i < 2; i++) {
			fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL) | O_NONBLOCK);
			fcntl(p[i], F_SETFD, FD_CLOEXEC);
		}
		tl_pipe[0] = p[0];
		tl_pipe[1] = p[1];
		pthread_atfork(0, 0, tl_after_fork);
	}
	*fd = tl_pipe[0];
	if (sigaction(SIGINT, 0, &cur) != 0) {
		goto out;
	}
	h = (cur.sa_flags & SA_SIGINFO) ? (void *)cur.sa_sigaction : (void *)cur.sa_handler;
	if (h == (void *)tl_on_sigint) {
		ok = 1;
		goto out;
	}
	if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN) {
		goto out;
	}
	__atomic_store_n(&tl_next, h, __ATOMIC_SEQ_CST);
	sa = cur; // its SA_RESTART or not, as the program chose
	sa.sa_sigaction = tl_on_sigint;
	sa.sa_flags = cur.sa_flags | SA_SIGINFO | SA_ONSTACK; // Go's threads run handlers on their signal stacks
	sigfillset(&sa.sa_mask);
	ok = sigaction(SIGINT, &sa, 0) == 0;
out:
	pthread_mutex_unlock(&tl_mu);
	return ok;
}

// tl_sigint_enter counts an interruptible call in and returns the count
// of SIGINTs taken so far; tl_sigint_leave counts it out and returns the
// count then: a difference means a SIGINT came during the call.
static uint32_t tl_sigint_enter(void) {
	return (uint32_t)(__atomic_fetch_add(&tl_word, 1, __ATOMIC_SEQ_CST) >> 32);
}

static uint32_t tl_sigint_leave(void) {
	return (uint32_t)(__atomic_fetch_sub(&tl_word, 1, __ATOMIC_SEQ_CST) >> 32);
}

static uint32_t tl_sigint_taken(void) {
	return (uint32_t)(__atomic_load_n(&tl_word, __ATOMIC_SEQ_CST) >> 32);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/tapeloop/tapeloop/internal/engine"
)

// errSIGINT is a call's error when a SIGINT came while it ran but its
// work was done before the interrupt reached it.
var errSIGINT = fmt.Errorf("%w by SIGINT as the call finished", engine.ErrInterrupted)

// errWaiting is a call's error when a SIGINT came while it waited for its
// turn on the object: it did not start.
var errWaiting = fmt.Errorf("%w by SIGINT while waiting for the object, which a call from another thread had; "+
	"this call did not start", engine.ErrInterrupted)

// maxStale bounds the reruns of a call stopped by an interrupt meant for
// an earlier one (see runPlain).
const maxStale = 3

var sig struct {
	once sync.Once
	ok   bool // the pipe exists and forward reads it
}

// wake is closed, and replaced, at each SIGINT forward reads: the calls
// waiting for an object's turn watch it (see lockWatched).
var wake struct {
	mu sync.Mutex
	ch chan struct{}
}

// wakeup is the channel that the next SIGINT forward reads closes.
func wakeup() <-chan struct{} {
	wake.mu.Lock()
	defer wake.mu.Unlock()
	if wake.ch == nil {
		wake.ch = make(chan struct{})
	}
	return wake.ch
}

// take puts the SIGINT handler in place (again, if the program has
// replaced it since) and reports whether calls can be interrupted.
func take() bool {
	var fd C.int
	if C.tl_sigint_take(&fd) == 0 {
		return false
	}
	sig.once.Do(func() {
		if f := os.NewFile(uintptr(fd), "tapeloop-sigint"); f != nil {
			sig.ok = true
			go forward(f)
		}
	})
	return sig.ok
}

// forward stops the watched calls that a SIGINT came during, and wakes
// those waiting for their turn, each time the handler writes to the pipe.
func forward(f *os.File) {
	buf := make([]byte, 4096)
	for {
		if _, err := f.Read(buf); err != nil {
			return
		}
		wake.mu.Lock()
		if wake.ch != nil {
			close(wake.ch)
			wake.ch = nil
		}
		wake.mu.Unlock()
		taken := uint32(C.tl_sigint_taken())
		objMu.Lock()
		for _, o := range objects {
			o.sigMu.Lock()
			if o.watched && o.seq0 != taken {
				o.prog.Interrupt()
			}
			o.sigMu.Unlock()
		}
		objMu.Unlock()
	}
}

// runWatched runs a call that SIGINT interrupts, on o (h), from its wait
// for the object's turn to its end: a SIGINT while it waits ends the wait
// (errWaiting; the call does not start), one while it runs stops it, and
// either way the call returns an error wrapping engine.ErrInterrupted,
// even when its work was done, since the program's handler never saw the
// SIGINT. The caller has checked take.
func runWatched(o *object, h C.int64_t, run func() error) (err error) {
	seq := uint32(C.tl_sigint_enter())
	if err := o.lockWatched(seq); err != nil {
		C.tl_sigint_leave()
		return err
	}
	defer o.unlock()
	o.sigMu.Lock()
	o.seq0, o.watched = seq, true
	o.sigMu.Unlock()
	// The watch ends however run ends, a panic included (guard turns it
	// into an error), and before the next call has the object, so that
	// the program's own handler sees the SIGINTs after it.
	defer func() {
		o.sigMu.Lock()
		sigint := uint32(C.tl_sigint_leave()) != seq
		o.watched = false
		o.sigMu.Unlock()
		if sigint && !errors.Is(err, engine.ErrInterrupted) {
			err = errSIGINT
		}
	}()
	// A SIGINT between the turn and watched: forward did not stop the
	// program for it.
	if uint32(C.tl_sigint_taken()) != seq {
		return errWaiting
	}
	if err := o.usable(h); err != nil {
		return err
	}
	return rerunStale(o, run, func() bool { return uint32(C.tl_sigint_taken()) != seq })
}

// lockWatched waits for o's turn as lock does, unless a SIGINT comes
// first (one taken since seq, the count when the call began): then it
// returns errWaiting, without the turn.
func (o *object) lockWatched(seq uint32) error {
	select {
	case o.turn <- struct{}{}:
		return nil
	default:
	}
	for {
		w := wakeup() // before the count: a SIGINT after the count closes w
		if uint32(C.tl_sigint_taken()) != seq {
			return errWaiting
		}
		select {
		case o.turn <- struct{}{}:
			return nil
		case <-w:
		}
	}
}

// runPlain runs a call that SIGINT does not interrupt.
func runPlain(o *object, run func() error) error {
	return rerunStale(o, run, func() bool { return false })
}

// rerunStale runs run, again when an interrupt stopped it that neither
// tl_interrupt during it nor a SIGINT during it (sigint) asked for: one
// that reached the object just after its previous call's work was done
// stops the next call before its first block. A call that tl_interrupt
// stopped says so.
func rerunStale(o *object, run func() error, sigint func() bool) error {
	for stale := 0; ; stale++ {
		user := o.stops.Load()
		err := run()
		if !errors.Is(err, engine.ErrInterrupted) || sigint() {
			return err
		}
		if o.stops.Load() != user {
			return fmt.Errorf("%w; interrupt() was called on the object", err)
		}
		if stale == maxStale {
			return err
		}
	}
}
