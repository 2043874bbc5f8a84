{{/*
Pod-level settings every operator shares, indented to the level of the pod
spec's keys. Pull secrets are the chart's own plus the umbrella's
global.imagePullSecrets; the priority class is the chart's, else the
umbrella's global.priorityClassName.
*/}}
{{- define "mlp.podSpec" -}}
{{- $global := .Values.global | default dict -}}
serviceAccountName: {{ include "mlp.serviceAccountName" . }}
{{- $secrets := concat (.Values.imagePullSecrets | default list) ($global.imagePullSecrets | default list) | uniq }}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName | default $global.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml (.Values.podSecurityContext | default (fromYaml (include "mlp.defaultPodSecurityContext" .))) | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range . }}
  - {{ toYaml (merge (dict) . (dict "labelSelector" (dict "matchLabels" (fromYaml (include "mlp.selectorLabels" $))))) | nindent 4 | trim }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
The secure defaults of the pod's and the container's securityContext,
used when a chart's values have none (podSecurityContext and
securityContext replace them whole, as in most charts).
*/}}
{{- define "mlp.defaultPodSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "mlp.defaultSecurityContext" -}}
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
readOnlyRootFilesystem: true
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The container settings every operator shares, indented to the level of the
container's keys: image, security context and resources.
*/}}
{{- define "mlp.container" -}}
image: {{ include "mlp.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml (.Values.securityContext | default (fromYaml (include "mlp.defaultSecurityContext" .))) | nindent 2 }}
resources:
  {{- toYaml .Values.resources | nindent 2 }}
{{- end -}}

{{/*
The log level: the chart's logLevel, else the umbrella's global.logLevel,
else info. The operator charts leave logLevel empty by default so that the
umbrella's global value reaches them.
*/}}
{{- define "mlp.logLevel" -}}
{{- .Values.logLevel | default (.Values.global | default dict).logLevel | default "info" -}}
{{- end -}}

{{/*
Flags every operator takes from the shared values, as list items at column
0 (nindent them under args): log level and format, the metrics certificate,
then extraArgs last so that a repeated flag overrides the chart's (Go's flag
package keeps the last value).
*/}}
{{- define "mlp.containerArgs" -}}
- --zap-log-level={{ include "mlp.logLevel" . }}
- --zap-encoder={{ .Values.logFormat | default "json" }}
{{- if .Values.metrics.certificate.secretName }}
- --metrics-cert-dir=/etc/mlplatform/metrics-certs
{{- end }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Environment every operator takes from the shared values: the tracing
exporter as OpenTelemetry's own variables (shared/tracing exports spans over
OTLP/gRPC once an endpoint is set, and the OpenTelemetry SDK reads the
sampler and TLS settings), then extraEnv last.
*/}}
{{- define "mlp.containerEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- with .Values.tracing }}
{{- if .enabled }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ required "tracing.endpoint is required when tracing.enabled" .endpoint | quote }}
{{- if .insecure }}
- name: OTEL_EXPORTER_OTLP_INSECURE
  value: "true"
{{- end }}
- name: OTEL_TRACES_SAMPLER
  value: parentbased_traceidratio
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .samplingRatio | toString | quote }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volume mounts from the shared values: the metrics certificate, volumeMounts. */}}
{{- define "mlp.volumeMounts" -}}
{{- if .Values.metrics.certificate.secretName }}
- name: metrics-certs
  mountPath: /etc/mlplatform/metrics-certs
  readOnly: true
{{- end }}
{{- with .Values.volumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volumes from the shared values: the metrics certificate, volumes. */}}
{{- define "mlp.volumes" -}}
{{- with .Values.metrics.certificate.secretName }}
- name: metrics-certs
  secret:
    secretName: {{ . }}
{{- end }}
{{- with .Values.volumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}
