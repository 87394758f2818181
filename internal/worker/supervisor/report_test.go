package supervisor

import (
	"syscall"
	"testing"
)

// Reports as Go 1.26 writes them (trimmed), from a program that crashed
// each way on purpose.
func TestParseReport(t *testing.T) {
	for _, tc := range []struct {
		name, report string
		want         crash
	}{
		{
			name: "SIGILL raised by the CPU in a cgo call",
			report: `SIGILL: illegal instruction
PC=0x402308 m=0 sigcode=2
signal arrived during cgo execution
instruction bytes: 0xf 0xb 0xe8 0x31

goroutine 1 gp=0x351e8012a1e0 m=0 mp=0x561f00 [syscall]:
runtime.cgocall(0x402308, 0x351e80170f08)
	/usr/local/go/src/runtime/cgocall.go:167 +0x4b fp=0x351e80170ee0 sp=0x351e80170ea8 pc=0x477e4b
main._Cfunc_trap()
	_cgo_gotypes.go:56 +0x3a fp=0x351e80170f08 sp=0x351e80170ee0 pc=0x48d7fa
main.main()
`,
			want: crash{signal: syscall.SIGILL, where: "in C code called from trap (C), raised by the CPU"},
		},
		{
			name: "SIGILL in a purego call to llama.cpp",
			report: `SIGILL: illegal instruction
PC=0x7f00 m=5 sigcode=2
signal arrived during external code execution

goroutine 42 gp=0xc0 m=5 mp=0xc1 [syscall]:
runtime.cgocall(0x1, 0x2)
	/usr/local/go/src/runtime/cgocall.go:167 +0x4b
github.com/ebitengine/purego.SyscallN(0x1, {0x2, 0x3, 0x4})
	/go/pkg/mod/github.com/ebitengine/purego@v0.10.0/syscall.go:40 +0x30
github.com/hybridgroup/yzma/pkg/llama.Decode(0x1, {0x2})
	/go/pkg/mod/github.com/hybridgroup/yzma@v1.28.0/pkg/llama/decode.go:20 +0x40
github.com/genq/genq/internal/textgen.(*scheduler).step(0xc2)
`,
			want: crash{signal: syscall.SIGILL, where: "in C code called from llama.Decode, raised by the CPU"},
		},
		{
			name: "abort in C",
			report: `SIGABRT: abort
PC=0x7fb7c2737eec m=0 sigcode=18446744073709551610
signal arrived during cgo execution

goroutine 1 gp=0x6caacb641e0 m=0 mp=0x561f00 [syscall]:
runtime.cgocall(0x402302, 0x6caacbaff08)
	/usr/local/go/src/runtime/cgocall.go:167 +0x4b
main._Cfunc_ab()
`,
			want: crash{signal: syscall.SIGABRT, where: "in C code called from ab (C), raised by the process itself (abort or raise)"},
		},
		{
			name: "SIGILL sent with kill",
			report: `SIGILL: illegal instruction
PC=0x40956e m=0 sigcode=0

goroutine 0 gp=0x5fa9a0 m=0 mp=0x5fb160 [idle]:
runtime.futex(0x5fb2a0, 0x80, 0x0)
	/usr/local/go/src/runtime/sys_linux_amd64.s:557 +0x21

goroutine 1 gp=0xc0 m=nil [select]:
main.main()
`,
			want: crash{signal: syscall.SIGILL, where: "sent by another process (kill)"},
		},
		{
			name: "a Go panic, nil dereference included",
			report: `panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x48d7d6]

goroutine 7 [running]:
github.com/genq/genq/internal/worker.(*Runtime).run(0x0)
	/src/internal/worker/runtime.go:10 +0x16
`,
			want: crash{fatal: "a Go panic: runtime error: invalid memory address or nil pointer dereference", where: "in worker.(*Runtime).run"},
		},
		{
			name: "a signal in the runtime's own code",
			report: `fatal error: unexpected signal during runtime execution
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4]

goroutine 3 gp=0x1 m=2 mp=0x2 [running]:
runtime.throw({0x1, 0x2})
`,
			want: crash{signal: syscall.SIGSEGV},
		},
		{name: "no report", report: "", want: crash{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseReport(tc.report); got != tc.want {
				t.Errorf("parseReport:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
