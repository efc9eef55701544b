{{/*
kubeleased's address: .Values.endpoint, or http://<ClusterIP>:<port> of the
kubelease Service (looked up at install; the node has no cluster DNS).
*/}}
{{- define "kv.endpoint" -}}
{{- if .Values.endpoint }}
{{- .Values.endpoint }}
{{- else }}
{{- $svc := lookup "v1" "Service" .Values.kubelease.namespace .Values.kubelease.service }}
{{- if not $svc }}
{{- fail (printf "no Service %s/%s: install the kubelease chart first, or set endpoint" .Values.kubelease.namespace .Values.kubelease.service) }}
{{- end }}
{{- printf "http://%s:%d" $svc.spec.clusterIP (int .Values.kubelease.port) }}
{{- end }}
{{- end }}
