package main

import "syscall"

// childAttr makes a server process die with connbench (even killed with -9),
// so that no server outlives a run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
