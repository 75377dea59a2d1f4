//go:build !linux

package main

import "syscall"

// childAttr: elsewhere a -serve child still exits when its stdin closes.
func childAttr() *syscall.SysProcAttr { return nil }
