package fleettest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ProcessEvent is an Event from the member process named Name.
type ProcessEvent struct {
	Name string
	Event
}

// Process is the driver's handle on a member process started with
// StartProcess: it sends commands to its stdin and forwards the Events of its
// stdout.
type Process struct {
	Name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	quit   chan struct{} // closed by Kill and Stop: stop forwarding
	exited chan struct{} // closed once the process has exited and its output is read
	once   sync.Once
	err    error // of cmd.Wait, set before exited closes
}

// StartProcess starts bin with args and, added to this process's
// environment, env; it forwards each Event the process writes to events (the
// driver must keep reading it until the process has exited or it called Kill
// or Stop) and its stderr to stderr.
func StartProcess(name, bin string, args, env []string, events chan<- ProcessEvent, stderr io.Writer) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Name: name, cmd: cmd, stdin: stdin, quit: make(chan struct{}), exited: make(chan struct{})}
	go func() { // owned by p: Kill and Stop wait for exited
		defer close(p.exited)
		scan := bufio.NewScanner(stdout)
		for scan.Scan() {
			var e Event
			if json.Unmarshal(scan.Bytes(), &e) != nil {
				continue
			}
			select {
			case events <- ProcessEvent{Name: name, Event: e}:
			case <-p.quit:
			}
		}
		p.err = cmd.Wait()
	}()
	return p, nil
}

// Send writes a command line ("load", "stop") to the process.
func (p *Process) Send(cmd string) error {
	_, err := fmt.Fprintln(p.stdin, cmd)
	return err
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	p.once.Do(func() { close(p.quit) })
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop asks the process to stop ("stop", then end of input) and waits up to
// within for it to exit, then kills it. It returns the process's exit error,
// or an error when it had to kill it.
func (p *Process) Stop(within time.Duration) error {
	_ = p.Send("stop")
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		p.once.Do(func() { close(p.quit) })
		return p.err
	case <-time.After(within):
		p.Kill()
		return fmt.Errorf("fleettest: %s did not stop within %v", p.Name, within)
	}
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }
