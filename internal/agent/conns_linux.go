package agent

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// stalled reports whether conn's peer stopped acknowledging it: the socket
// is no longer established, or data sent on it waits unacknowledged past a
// retransmission timeout (the kernel's TCP_INFO). That is a connection a
// partition or a vanished host left behind, which may carry nothing for tens
// of seconds after the path heals. An API server that is only slow (CPU
// starved, or queueing requests) has its kernel acknowledge at once: its
// connections are not stalled, and dropping them would only add TLS
// handshakes and watch re-lists to its load, from every agent at once. A
// connection whose state cannot be read counts as stalled.
func stalled(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var info *unix.TCPInfo
	var infoErr error
	if err := raw.Control(func(fd uintptr) {
		info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || infoErr != nil {
		return true
	}
	// The kernel's TCP states; BPF_TCP_ESTABLISHED is its TCP_ESTABLISHED.
	return info.State != unix.BPF_TCP_ESTABLISHED || (info.Unacked > 0 && info.Retransmits > 0)
}
