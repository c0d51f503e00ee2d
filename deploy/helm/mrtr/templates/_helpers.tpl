{{/* The chart's name, or nameOverride. */}}
{{- define "mrtr.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's objects' name: fullnameOverride, or RELEASE-mrtr (RELEASE alone when it names mrtr already). */}}
{{- define "mrtr.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mrtr.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mrtr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mrtr.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mrtr.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mrtr.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mrtr.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mrtr.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "mrtr.runnerImage" -}}
{{- $i := .Values.runner.image }}
{{- if $i.digest }}
{{- printf "%s@%s" $i.repository $i.digest }}
{{- else }}
{{- printf "%s:%s" $i.repository ($i.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The runner's socket, on the emptyDir both containers mount. */}}
{{- define "mrtr.runnerSocket" -}}/run/mrtr-runner/runner.sock{{- end }}

{{/* Whether a Redis store is configured. */}}
{{- define "mrtr.redis" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* The Secret and key holding the Redis URL. */}}
{{- define "mrtr.redisSecretName" -}}
{{- .Values.redis.existingSecret | default (printf "%s-redis" (include "mrtr.fullname" .)) }}
{{- end }}
{{- define "mrtr.redisSecretKey" -}}
{{- if .Values.redis.existingSecret }}{{ .Values.redis.existingSecretKey }}{{ else }}url{{ end }}
{{- end }}

{{/* Refuses values that would deploy something broken. */}}
{{- define "mrtr.validate" -}}
{{- if not (has .Values.mode (list "proxy" "serve")) }}
{{- fail (printf "mode: %q is not proxy or serve" .Values.mode) }}
{{- end }}
{{- if not .Values.keys.existingSecret }}
{{- fail "keys.existingSecret is required: the replicas must share one key ring (mrtr keygen --out keys.json && kubectl create secret generic mrtr-keys --from-file=keys.json, then --set keys.existingSecret=mrtr-keys)" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "mrtr.redis" .)) }}
{{- fail (printf "replicaCount: %d replicas need a shared Redis store (redis.url or redis.existingSecret); the in-memory one would let a requestState be used once per pod" (int .Values.replicaCount)) }}
{{- end }}
{{- if and .Values.redis.url .Values.redis.existingSecret }}
{{- fail "redis: give url or existingSecret, not both" }}
{{- end }}
{{- if and .Values.redis.url (regexMatch "^[a-z-]+://[^/@]*:[^/@]*@" .Values.redis.url) }}
{{- fail "redis.url holds a password: put the URL in a Secret of your own and set redis.existingSecret instead" }}
{{- end }}
{{- if eq .Values.mode "proxy" }}
{{- if and .Values.upstream.url .Values.upstream.command }}
{{- fail "upstream: give url or command, not both" }}
{{- end }}
{{- if not (or .Values.upstream.url .Values.upstream.command) }}
{{- fail "upstream.url (an MCP server's Streamable HTTP endpoint) or upstream.command is required with mode: proxy" }}
{{- end }}
{{- end }}
{{- if and (eq .Values.mode "proxy") .Values.upstream.command }}
{{- if not .Values.runner.image.repository }}
{{- fail "runner.image.repository is required with upstream.command: an image with mrtr and the command's runtime and server installed (deploy/image/Containerfile.stdio builds one); the command runs in a runner container of its own, away from the key ring" }}
{{- end }}
{{- if eq (int .Values.runner.runAsUser) (int .Values.podSecurityContext.runAsUser) }}
{{- fail (printf "runner.runAsUser: %d is the proxy's uid (podSecurityContext.runAsUser): the runner must run under another uid, or its children could read the key ring" (int .Values.runner.runAsUser)) }}
{{- end }}
{{- if not .Values.podSecurityContext.fsGroup }}
{{- fail "podSecurityContext.fsGroup is required with upstream.command: it is the group of the runner's socket, which both containers are in" }}
{{- end }}
{{- if not .Values.podSecurityContext.runAsUser }}
{{- fail "podSecurityContext.runAsUser is required with upstream.command: the runner admits that uid (the proxy's) alone" }}
{{- end }}
{{- if eq (int .Values.runner.runAsUser) 0 }}
{{- fail "runner.runAsUser: 0 is root: give the runner an unprivileged uid of its own" }}
{{- end }}
{{- range $k, $v := .Values.upstream.env }}
{{- if hasPrefix "MRTR_" $k }}
{{- fail (printf "upstream.env.%s: MRTR_* variables never reach the command (the runner refuses them)" $k) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.audit.enabled (not .Values.audit.stdout) (not .Values.audit.existingClaim) (not .Values.audit.volume) }}
{{- fail "audit.enabled needs a place that outlives the container: audit.existingClaim (a PersistentVolumeClaim), audit.volume, or audit.stdout: true (the trail on stdout, the log on stderr)" }}
{{- end }}
{{- if and .Values.audit.stdout (or .Values.audit.existingClaim .Values.audit.volume) }}
{{- fail "audit: give stdout or a volume (existingClaim, volume), not both" }}
{{- end }}
{{- if lt (int .Values.terminationGraceExtraSeconds) 1 }}
{{- fail "terminationGraceExtraSeconds must be at least 1: the drain must end before SIGKILL" }}
{{- end }}
{{- end }}
