package etcdtest

import "syscall"

// childAttr puts the process in a group of its own and has the kernel
// kill it when the test process dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
