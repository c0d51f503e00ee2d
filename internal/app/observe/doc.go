// Package observe plugs Prometheus and OpenTelemetry into a guard's
// mrtr.Observer, and answers health probes, for the mrtr command.
//
// The library packages (mrtr, reqstate, replay, gosdk) import neither
// Prometheus nor OpenTelemetry: the guard reports events through
// mrtr.Observer, and this package turns them into metrics ([Metrics]),
// spans ([Tracer]) or both ([Observers]). [Health] serves /healthz and
// /readyz.
//
// Nothing here is global: metrics register with the prometheus.Registerer
// given, spans go to the trace.TracerProvider given.
//
// Labels stay low in cardinality whatever callers send: resume outcomes
// and store operations come from fixed sets, and key ids from the
// server's own key ring (a key id is reported only for a token this
// process sealed or authenticated). No label carries a tool, prompt or
// resource name, a principal or a token; an outcome outside the fixed
// sets counts as other. Spans carry the tool, prompt or resource name as
// the MCP semantic conventions ask, cut to 256 bytes, and the protocol
// version only when it is date-shaped (_OTHER otherwise); a refusal of a
// token this server did not seal makes no span. The OTLP provider bounds
// every span besides ([SpanLimits]): a span waits in the exporter's queue
// while the collector is slow, so its size is memory held per request.
package observe
