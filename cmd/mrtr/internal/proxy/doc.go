// Package proxy is mrtr proxy: the sealing proxy in front of any MCP
// server, reached over HTTP (--upstream) or run as a command, directly, by
// mrtr runner (--runner) or as another user (--upstream-user); with the
// era probe of its upstream, the late-era handler, the bridge of a
// 2025-11-25 upstream, and the replicas that forward a resume to the node
// holding its flow. The library package of the same name is imported as
// mrtrproxy here.
package proxy
