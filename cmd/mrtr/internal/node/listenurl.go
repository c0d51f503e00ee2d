package node

import (
	"net"
	"strconv"
)

// listenURL is the URL a listener on bound serves path at, for the log: the
// host as --addr (or --metrics-addr) gave it, so that 0.0.0.0:8080 reads
// http://0.0.0.0:8080/mcp and not the [::]:8080 Go's dual-stack socket
// reports, and the port the listener got (HOST:0 picks one).
func listenURL(given string, bound net.Addr, path string) string {
	host, _, err := net.SplitHostPort(given)
	tcp, ok := bound.(*net.TCPAddr)
	if err != nil || host == "" || !ok {
		return "http://" + bound.String() + path
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)) + path
}
