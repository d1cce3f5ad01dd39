package proc

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// tailLines is how many lines of each log LogTail returns.
const tailLines = 20

// logMark is a log file and its size when a run started.
type logMark struct {
	path string
	size int64
}

// logFiles returns Spec.Output and Spec.Logs.
func (p *Process) logFiles() []string {
	var files []string
	if p.spec.Output != "" {
		files = append(files, p.spec.Output)
	}
	return append(files, p.spec.Logs...)
}

func markLogs(files []string) []logMark {
	marks := make([]logMark, len(files))
	for i, f := range files {
		marks[i].path = f
		if fi, err := os.Stat(f); err == nil {
			marks[i].size = fi.Size()
		}
	}
	return marks
}

// addrInUse reports whether what the logs gained since marks were taken
// says that an address was already in use (as redis-server, etcd, the JVM
// and PostgreSQL word a failed bind).
func addrInUse(marks []logMark) bool {
	for _, m := range marks {
		f, err := os.Open(m.path)
		if err != nil {
			continue
		}
		if _, err := f.Seek(m.size, io.SeekStart); err == nil {
			b, _ := io.ReadAll(f)
			if bytes.Contains(bytes.ToLower(b), []byte("address already in use")) {
				f.Close()
				return true
			}
		}
		f.Close()
	}
	return false
}

// LogTail returns the last lines of the process's output and logs.
func (p *Process) LogTail() string {
	var b strings.Builder
	for _, f := range p.logFiles() {
		data, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		for _, l := range lines[max(0, len(lines)-tailLines):] {
			if l != "" {
				b.WriteString(l + "\n")
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
