package supervisor

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// crash is what a Go runtime crash report says.
type crash struct {
	// signal is the fatal signal the runtime caught, 0 if none.
	signal syscall.Signal
	// fatal is the first line of a panic or fatal error that was not a
	// signal: "a Go panic: …".
	fatal string
	// where says where it happened, as far as the report tells.
	where string
}

// parseReport reads a Go runtime crash report (what SetCrashOutput gets):
//
//	SIGILL: illegal instruction
//	PC=0x402308 m=0 sigcode=2
//	signal arrived during cgo execution
//
//	goroutine 1 gp=… m=0 mp=… [syscall]:
//	runtime.cgocall(0x402308, 0xc000070f08)
//	…
//
// or "panic: …" / "fatal error: …", the latter with "[signal SIGSEGV: …]"
// when a signal struck the runtime itself.
func parseReport(report string) crash {
	var c crash
	var inC bool
	sigcode, haveCode := int64(0), false
	lines := strings.Split(report, "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		switch {
		case i == 0 && strings.HasPrefix(line, "panic: "):
			c.fatal = "a Go panic: " + strings.TrimPrefix(line, "panic: ")
		case i == 0 && strings.HasPrefix(line, "fatal error: "):
			c.fatal = "a Go fatal error: " + strings.TrimPrefix(line, "fatal error: ")
		case i == 0 && strings.HasPrefix(line, "SIG"):
			name, _, _ := strings.Cut(line, ":")
			c.signal = unix.SignalNum(name)
		case strings.HasPrefix(line, "[signal SIG") && c.fatal != "" && !strings.HasPrefix(c.fatal, "a Go panic"):
			// A signal in the runtime's own code: the signal is the cause.
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "[signal "), ":")
			if s := unix.SignalNum(name); s != 0 {
				c.signal, c.fatal = s, ""
			}
		case strings.HasPrefix(line, "PC=") && strings.Contains(line, "sigcode="):
			_, v, _ := strings.Cut(line, "sigcode=")
			v, _, _ = strings.Cut(v, " ")
			if u, err := strconv.ParseUint(v, 10, 64); err == nil {
				sigcode, haveCode = int64(u), true
			} else if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				sigcode, haveCode = n, true
			}
		case strings.HasPrefix(line, "signal arrived during cgo execution"),
			strings.HasPrefix(line, "signal arrived during external code execution"):
			inC = true
		}
	}
	var parts []string
	frame := firstFrame(lines)
	switch {
	case inC && frame != "":
		parts = append(parts, "in C code called from "+frame)
	case inC:
		parts = append(parts, "in C code")
	case frame != "":
		parts = append(parts, "in "+frame)
	}
	if c.signal != 0 && haveCode {
		if origin := originOf(c.signal, int32(sigcode)); origin != "" {
			parts = append(parts, origin)
		}
	}
	c.where = strings.Join(parts, ", ")
	return c
}

// The si_code values that say who sent a signal (siginfo.h).
const (
	siUser  = 0  // kill(2)
	siTkill = -6 // tkill(2), tgkill(2): raise(3), abort(3)
)

// originOf says who raised a signal, from its si_code.
func originOf(s syscall.Signal, code int32) string {
	switch {
	case code == siUser:
		return "sent by another process (kill)"
	case code == siTkill:
		return "raised by the process itself (abort or raise)"
	case code > 0 && (s == syscall.SIGILL || s == syscall.SIGSEGV || s == syscall.SIGBUS || s == syscall.SIGFPE):
		return "raised by the CPU"
	}
	return ""
}

// firstFrame is the first function of the crashed goroutine's stack that
// is not the runtime's or the foreign-call machinery's: where genq's code
// was, or the C function a cgo call entered.
func firstFrame(lines []string) string {
	in := false
	for _, line := range lines {
		switch {
		case !in:
			in = strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(strings.TrimSpace(line), ":")
			continue
		case strings.TrimSpace(line) == "":
			return "" // the goroutine's stack ended
		case strings.HasPrefix(line, "\t"), strings.HasPrefix(line, "created by "):
			continue
		}
		fn := line
		if i := strings.LastIndex(fn, "("); i > 0 {
			fn = fn[:i]
		}
		if _, c, ok := strings.Cut(fn, "._Cfunc_"); ok {
			return c + " (C)"
		}
		if skipFrame(fn) {
			continue
		}
		if i := strings.LastIndex(fn, "/"); i >= 0 {
			fn = fn[i+1:]
		}
		return fn
	}
	return ""
}

// skipFrame: the runtime, system calls and foreign-call packages, which
// say nothing about what was running.
func skipFrame(fn string) bool {
	for _, p := range []string{"runtime.", "runtime/", "internal/", "syscall.", "github.com/ebitengine/purego",
		"github.com/jupiterrider/ffi", "_cgo_", "main._C"} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}
