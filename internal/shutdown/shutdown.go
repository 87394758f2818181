// Package shutdown turns the signals that ask a process to stop into a
// context's end.
package shutdown

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signals are the signals that end OnSignal's context: SIGTERM always, and
// SIGINT unless the process started with it ignored. A shell starts a
// script's background commands with SIGINT ignored, so that Ctrl-C reaches
// the script alone (scripts/run-local.sh stops its worker before its api);
// asking for SIGINT would undo that, as Go's signal.Notify does.
func Signals() []os.Signal {
	if signal.Ignored(os.Interrupt) {
		return []os.Signal{syscall.SIGTERM}
	}
	return []os.Signal{os.Interrupt, syscall.SIGTERM}
}

// OnSignal returns a context that ends when one of Signals arrives, and
// the function that stops listening for them.
func OnSignal(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, Signals()...)
}
