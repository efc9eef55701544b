{{/*
Chart name, truncated to 63 characters (the DNS-1123 label limit).
*/}}
{{- define "kubelease.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's objects: fullnameOverride, else the release name
when it already contains the chart name, else <release>-<chart>.
*/}}
{{- define "kubelease.fullname" -}}
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

{{/*
Chart name and version for the helm.sh/chart label.
*/}}
{{- define "kubelease.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "kubelease.labels" -}}
helm.sh/chart: {{ include "kubelease.chart" . }}
{{ include "kubelease.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: server
app.kubernetes.io/part-of: kubelease
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels: stable across upgrades (never add to these).
*/}}
{{- define "kubelease.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubelease.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Name of the ServiceAccount kubeleased runs as.
*/}}
{{- define "kubelease.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubelease.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Namespaces whose Leases kubeleased manages in namespaced mode, one per line:
rbac.namespaces, or the release namespace when that list is empty.
*/}}
{{- define "kubelease.rbacNamespaces" -}}
{{- if .Values.rbac.namespaces }}
{{- join "\n" .Values.rbac.namespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
Name of the cluster-scoped RBAC objects; it carries the release namespace,
since releases of the same name may live in several namespaces.
*/}}
{{- define "kubelease.clusterRoleName" -}}
{{- printf "%s-%s" .Release.Namespace (include "kubelease.fullname" .) | trunc 253 | trimSuffix "-" }}
{{- end }}

{{/*
The Secret holding the term key: termKey.existingSecret, or the one the chart
makes.
*/}}
{{- define "kubelease.termKeySecret" -}}
{{- .Values.termKey.existingSecret | default (printf "%s-term-key" (include "kubelease.fullname" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{/*
Name of the cluster-scoped objects that let kubeleased review tokens and
access (auth.mode kubernetes).
*/}}
{{- define "kubelease.authClusterRoleName" -}}
{{- printf "%s-%s-auth" .Release.Namespace (include "kubelease.fullname" .) | trunc 253 | trimSuffix "-" }}
{{- end }}

{{/*
The ClusterRole a Prometheus needs to scrape /metrics (auth.metrics
kubernetes): get on the non-resource URL /metrics.
*/}}
{{- define "kubelease.metricsReaderName" -}}
{{- printf "%s-%s-metrics-reader" .Release.Namespace (include "kubelease.fullname" .) | trunc 253 | trimSuffix "-" }}
{{- end }}

{{/*
--metrics-auth: auth.metrics, or kubernetes with auth.mode kubernetes.
*/}}
{{- define "kubelease.metricsAuth" -}}
{{- if .Values.auth.metrics }}{{ .Values.auth.metrics }}{{ else if eq .Values.auth.mode "kubernetes" }}kubernetes{{ else }}none{{ end }}
{{- end }}

{{/*
The Service's in-cluster URL: what replicas set as KUBELEASE_ENDPOINT.
*/}}
{{- define "kubelease.endpoint" -}}
{{- printf "%s://%s.%s.svc:%d" (ternary "https" "http" .Values.tls.enabled) (include "kubelease.fullname" .) .Release.Namespace (int .Values.service.port) }}
{{- end }}

{{/*
The TLS Secret's name (tls.secretName, required when TLS is enabled).
*/}}
{{- define "kubelease.tlsSecret" -}}
{{- required "tls.secretName is required when tls.enabled is true" .Values.tls.secretName }}
{{- end }}

{{/*
The job label of kubeleased's scrape targets, which the alerts select on:
prometheusRule.job, else the ServiceMonitor's (the Service's name).
*/}}
{{- define "kubelease.metricsJob" -}}
{{- .Values.prometheusRule.job | default (include "kubelease.fullname" .) }}
{{- end }}
