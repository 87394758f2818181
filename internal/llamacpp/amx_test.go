package llamacpp

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// amxInstruction matches the AMX instructions in objdump's listing: the
// tile configuration, loads, stores and products.
var amxInstruction = regexp.MustCompile(`\t(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilerelease|tilezero|tdp[a-z0-9]+)(\s|$)`)

// TestNoAMXInstructions: no CPU backend of either build holds an AMX
// instruction (scripts/llama-patches/0005), whatever CPU it was built on
// or for. It reads the machine code, so it holds on a CPU without AMX,
// where the variant that had them (sapphirerapids) cannot run.
func TestNoAMXInstructions(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump (binutils) is not installed")
	}
	// The scan itself, on a library that has them.
	t.Run("finds-them", func(t *testing.T) {
		cc, err := exec.LookPath("cc")
		if err != nil {
			t.Skip("no C compiler")
		}
		dir := t.TempDir()
		src, lib := filepath.Join(dir, "amx.c"), filepath.Join(dir, "libamx.so")
		code := "#include <immintrin.h>\nvoid f(void *cfg, void *a, void *c) { _tile_loadconfig(cfg); _tile_loadd(0, a, 64); _tile_loadd(1, a, 64); _tile_zero(2); _tile_dpbssd(2, 0, 1); _tile_stored(2, c, 64); _tile_release(); }\n"
		if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(cc, "-O2", "-mamx-tile", "-mamx-int8", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
			t.Skipf("the C compiler does not build AMX code: %v\n%s", err, out)
		}
		if n, _ := amxInstructions(t, objdump, lib); n != 7 {
			t.Errorf("found %d AMX instructions in a library with 7", n)
		}
	})
	var libs []string
	for _, env := range []struct{ name, target string }{{LibDirEnv, "make engine"}, {portableEnv, "make engine-portable"}} {
		dir := requireDir(t, env.name, env.target)
		found, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu*.so"))
		if len(found) == 0 {
			t.Fatalf("%s (%s) holds no CPU backend (libggml-cpu*.so)", env.name, dir)
		}
		libs = append(libs, found...)
	}
	for _, lib := range libs {
		t.Run(filepath.Base(lib), func(t *testing.T) {
			t.Parallel()
			if n, first := amxInstructions(t, objdump, lib); n > 0 {
				t.Errorf("%d AMX instructions, the first: %q", n, first)
			}
		})
	}
}

// amxInstructions counts the AMX instructions in lib's code, and returns
// the first.
func amxInstructions(t *testing.T, objdump, lib string) (n int, first string) {
	t.Helper()
	cmd := exec.Command(objdump, "-d", "--no-show-raw-insn", lib)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		if amxInstruction.MatchString(sc.Text()) {
			if n == 0 {
				first = sc.Text()
			}
			n++
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("objdump %s: %v", lib, err)
	}
	if lines < 10 {
		t.Fatalf("objdump listed %d lines of %s: not its code", lines, lib)
	}
	return n, first
}
