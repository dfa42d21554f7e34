"""One tracing: OpenTelemetry spans feed the console, `traceFile`, and an OTLP/HTTP exporter alike.

`setup` builds the tracer provider of a process (resource, sampler, the processors below) and the
exporters the standard `OTEL_*` variables ask for; `names` holds the attribute names (the MCP and GenAI
semantic conventions, and agentify's own); `export` redacts every span before it is queued for an
exporter and keeps arguments and results out unless `otel.captureContent` is set; `metrics` turns
MCP spans into the operation-duration histograms the conventions name. Who made the request being
served comes from `team.principal`. Imports only `_common`, `security` and `team`.
"""
