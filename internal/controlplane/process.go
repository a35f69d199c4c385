package controlplane

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// process is a child running in its own process group, output to a log file.
type process struct {
	name string
	log  string
	pid  int
	done chan struct{} // closed once it has exited
}

// Process is a child the tests run next to the control plane (the real
// system-upgrade-controller): the same lifecycle as etcd's and the
// apiserver's.
type Process struct{ p *process }

// StartProcess starts bin with args and extra environment (added to this
// process's), output appended to logPath; it dies with the test binary.
func StartProcess(name, bin string, args, env []string, logPath string) (*Process, error) {
	p, err := startProcess(name, bin, args, logPath, env...)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.p.done }

// PID is the process's id (its CPU and memory in /proc).
func (p *Process) PID() int { return p.p.pid }

// Stop sends SIGTERM to its process group and waits, killing it after 15s.
func (p *Process) Stop() { p.p.stop() }

func startProcess(name, bin string, args []string, logPath string, env ...string) (*process, error) {
	// Appending: a restarted apiserver keeps the earlier run's log.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own group, so stop reaches anything it forks; Pdeathsig so that the
	// kernel kills it when the test binary dies without calling Stop (a panic,
	// a -timeout, Ctrl-C).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, log: logPath, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the *thread* that forked the child exits, and
		// Go may retire threads; a locked thread lives until this goroutine
		// returns, which is after the child has exited.
		runtime.LockOSThread()
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("controlplane: start %s: %w", name, err)
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

// stop terminates the process group, killing it if it lingers.
func (p *process) stop() {
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const max = 4 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
