{{/* The chart's name. */}}
{{- define "prefixgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The resources' name: RELEASE-prefixgate, or the release name when it names prefixgate. */}}
{{- define "prefixgate.fullname" -}}
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

{{/* The labels every resource carries. */}}
{{- define "prefixgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "prefixgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ include "prefixgate.mode" . }}
{{- end }}

{{/* The labels that select the pods. */}}
{{- define "prefixgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "prefixgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* mode, checked: serve or epp. */}}
{{- define "prefixgate.mode" -}}
{{- if not (has .Values.mode (list "serve" "epp")) }}
{{- fail (printf "mode: %q is neither serve nor epp" .Values.mode) }}
{{- end }}
{{- .Values.mode }}
{{- end }}

{{- define "prefixgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "prefixgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "prefixgate.poolName" -}}
{{- default (include "prefixgate.fullname" .) .Values.inferencePool.name }}
{{- end }}

{{- define "prefixgate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The backend source that discovers an InferencePool's pods. */}}
{{- define "prefixgate.poolBackend" -}}
{{- printf "inferencepool://%s/%s" .Release.Namespace (include "prefixgate.poolName" .) }}
{{- end }}

{{/* The backend source that discovers a Service's endpoints. */}}
{{- define "prefixgate.serviceBackend" -}}
{{- printf "k8s://%s/%s:%v" .Release.Namespace .Values.discovery.service .Values.discovery.port }}
{{- end }}

{{/*
The configuration file: .Values.config with the keys the chart owns
(listen or epp, drain_timeout) set from ports and drain.
*/}}
{{- define "prefixgate.config" -}}
{{- range $key := list "listen" "epp" "drain_timeout" }}
{{- if hasKey $.Values.config $key }}
{{- fail (printf "config.%s: the chart sets it (from ports and drain.timeoutSeconds); leave it out of config" $key) }}
{{- end }}
{{- end }}
{{- $cfg := deepCopy .Values.config }}
{{- if eq (include "prefixgate.mode" .) "serve" }}
{{- $_ := set $cfg "listen" (printf ":%d" (int .Values.ports.http)) }}
{{- if .Values.discovery.service }}
{{- $_ := set $cfg "backends" (append (default (list) (get $cfg "backends")) (include "prefixgate.serviceBackend" .)) }}
{{- end }}
{{- else }}
{{- $_ := set $cfg "epp" (dict "listen" (printf ":%d" (int .Values.ports.grpc)) "health_listen" (printf ":%d" (int .Values.ports.health)) "metrics_listen" (printf ":%d" (int .Values.ports.metrics))) }}
{{- if and .Values.inferencePool.create (empty (get $cfg "backends")) }}
{{- $_ := set $cfg "backends" (list (include "prefixgate.poolBackend" .)) }}
{{- end }}
{{- end }}
{{- if empty (get $cfg "backends") }}
{{- fail "config.backends: no backends (list the replicas, set discovery.service, or in epp mode set inferencePool.create)" }}
{{- end }}
{{- range (get $cfg "backends") }}
{{- if and (kindIs "string" .) (regexMatch "^([a-z]+\\+)?(k8s|inferencepool)://" .) (not $.Values.serviceAccount.automount) (not (dig "kubernetes" "kubeconfig" "" $cfg)) }}
{{- fail (printf "config.backends: %s reads the API server with the pod's service account token, which serviceAccount.automount: false leaves out" .) }}
{{- end }}
{{- end }}
{{- $_ := set $cfg "drain_timeout" (printf "%ds" (int .Values.drain.timeoutSeconds)) }}
{{- toYaml $cfg }}
{{- end }}
