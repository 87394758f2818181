package hub

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Reporter hears what a download does. Its methods are called from several
// goroutines at once.
type Reporter interface {
	Plan(files int, bytes int64)      // what is left to fetch, once planned
	Check(f RemoteFile)               // hashing a file already on disk
	Skip(f RemoteFile)                // already complete on disk
	Start(f RemoteFile, offset int64) // offset > 0: resuming a partial file
	Add(n int64)                      // bytes received, any file
	Retry(f RemoteFile, attempt, attempts int, delay time.Duration, err error)
	Done(f RemoteFile, elapsed time.Duration)
	Close()
}

// NopReporter reports nothing.
type NopReporter struct{}

func (NopReporter) Plan(int, int64)                                  {}
func (NopReporter) Check(RemoteFile)                                 {}
func (NopReporter) Skip(RemoteFile)                                  {}
func (NopReporter) Start(RemoteFile, int64)                          {}
func (NopReporter) Add(int64)                                        {}
func (NopReporter) Retry(RemoteFile, int, int, time.Duration, error) {}
func (NopReporter) Done(RemoteFile, time.Duration)                   {}
func (NopReporter) Close()                                           {}

// lineReporter writes one line per event, and a progress line now and then:
// what a build log or a file wants.
type lineReporter struct {
	mu       sync.Mutex
	w        io.Writer
	bar      io.Writer // nil: no bar, periodic progress lines instead
	total    int64
	files    int
	done     atomic.Int64
	finished int
	start    time.Time
	stop     chan struct{}
	stopped  sync.WaitGroup
	interval time.Duration
}

// NewLineReporter writes a line per file to w and, every interval, a line
// with the overall progress.
func NewLineReporter(w io.Writer, interval time.Duration) Reporter {
	return newReporter(w, nil, interval)
}

// NewBarReporter writes a line per file to w and keeps a progress bar,
// redrawn in place, on the terminal bar.
func NewBarReporter(w, bar io.Writer) Reporter {
	return newReporter(w, bar, 200*time.Millisecond)
}

func newReporter(w, bar io.Writer, interval time.Duration) *lineReporter {
	return &lineReporter{w: w, bar: bar, interval: interval, start: time.Now(), stop: make(chan struct{})}
}

func (r *lineReporter) Plan(files int, bytes int64) {
	r.mu.Lock()
	r.files, r.total = files, bytes
	r.start = time.Now()
	r.mu.Unlock()
	if files == 0 || r.interval <= 0 {
		return
	}
	r.stopped.Add(1)
	go r.tick()
}

func (r *lineReporter) tick() {
	defer r.stopped.Done()
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			if r.bar != nil {
				r.drawBar()
			} else {
				fmt.Fprintln(r.w, "progress", r.summary())
			}
			r.mu.Unlock()
		}
	}
}

func (r *lineReporter) Check(f RemoteFile) {
	r.line("check  %s (%s on disk: hashing it)", f.Path, FormatBytes(f.Size))
}

func (r *lineReporter) Skip(f RemoteFile) {
	r.line("skip   %s (%s, already complete)", f.Path, FormatBytes(f.Size))
}

func (r *lineReporter) Start(f RemoteFile, offset int64) {
	if offset > 0 {
		r.line("resume %s at %s of %s", f.Path, FormatBytes(offset), FormatBytes(f.Size))
		return
	}
	r.line("get    %s (%s)", f.Path, FormatBytes(f.Size))
}

func (r *lineReporter) Add(n int64) { r.done.Add(n) }

func (r *lineReporter) Retry(f RemoteFile, attempt, attempts int, delay time.Duration, err error) {
	r.line("retry  %s in %s (attempt %d of %d): %v", f.Path, delay.Round(time.Millisecond), attempt, attempts, err)
}

func (r *lineReporter) Done(f RemoteFile, elapsed time.Duration) {
	r.mu.Lock()
	r.finished++
	r.mu.Unlock()
	r.line("done   %s (%s in %s, %s/s)", f.Path, FormatBytes(f.Size), elapsed.Round(time.Millisecond), FormatBytes(rate(f.Size, elapsed)))
}

func (r *lineReporter) Close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.stopped.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		fmt.Fprint(r.bar, "\r\033[K")
	}
}

// line prints above the bar: clear it, print, draw it again.
func (r *lineReporter) line(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		fmt.Fprint(r.bar, "\r\033[K")
	}
	fmt.Fprintf(r.w, format+"\n", args...)
	if r.bar != nil && r.files > 0 {
		r.drawBar()
	}
}

const barWidth = 30

func (r *lineReporter) drawBar() {
	done := min(r.done.Load(), r.total)
	filled := barWidth
	if r.total > 0 {
		filled = int(done * barWidth / r.total)
	}
	fmt.Fprintf(r.bar, "\r\033[K[%s%s] %s", strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled), r.summary())
}

// summary is "45% (1.2 GB of 2.7 GB, 230 MB/s, 1 of 3 files)"; r.mu is held.
func (r *lineReporter) summary() string {
	done := min(r.done.Load(), r.total)
	pct := 100
	if r.total > 0 {
		pct = int(done * 100 / r.total)
	}
	return fmt.Sprintf("%3d%% (%s of %s, %s/s, %d of %d files)", pct, FormatBytes(done), FormatBytes(r.total),
		FormatBytes(rate(done, time.Since(r.start))), r.finished, r.files)
}

func rate(bytes int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(bytes) / d.Seconds())
}

// FormatBytes writes n in decimal units, as the hub's pages do: 42.5 GB.
func FormatBytes(n int64) string {
	const unit = 1000
	if n < 0 {
		return "size unknown"
	}
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
