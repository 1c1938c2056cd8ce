//go:build !linux

package etcdtest

import "syscall"

// childAttr puts the process in a group of its own.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
