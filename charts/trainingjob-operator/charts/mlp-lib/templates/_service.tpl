{{/*
The metrics Service (HTTPS, authenticated and authorized by the API server)
and, when metrics.serviceMonitor.enabled, a Prometheus Operator
ServiceMonitor. The ServiceMonitor authenticates through the authorization
field (bearerTokenFile is deprecated) with a token from a Secret: by
default a ServiceAccount token the chart creates for a scraper allowed only
to get /metrics, or metrics.serviceMonitor.authorization.secretName. It keeps the operators' own labels (honorLabels), so that the
`namespace` label of a per-object metric is not renamed to
exported_namespace.
*/}}
{{- define "mlp.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "mlp.fullname" . }}-metrics
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "mlp.labels" . | nindent 4 }}
    app.kubernetes.io/component: metrics
  {{- include "mlp.annotations" . }}
spec:
  selector:
    {{- include "mlp.selectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .Values.metrics.port }}
      targetPort: metrics
      protocol: TCP
{{- with .Values.metrics.serviceMonitor }}
{{- if or .enabled (include "mlp.monitoringEverywhere" $) }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "mlp.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
    {{- with .labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- include "mlp.annotations" $ }}
spec:
  selector:
    matchLabels:
      {{- include "mlp.selectorLabels" $ | nindent 6 }}
      app.kubernetes.io/component: metrics
  endpoints:
    - port: metrics
      scheme: https
      path: /metrics
      interval: {{ .interval }}
      honorLabels: true
      authorization:
        type: Bearer
        credentials:
          name: {{ .authorization.secretName | default (printf "%s-metrics-scraper" (include "mlp.fullname" $)) }}
          key: {{ .authorization.key | default "token" }}
      tlsConfig:
        {{- if $.Values.metrics.certificate.secretName }}
        serverName: {{ include "mlp.fullname" $ }}-metrics.{{ $.Release.Namespace }}.svc
        ca:
          secret:
            name: {{ $.Values.metrics.certificate.secretName }}
            key: ca.crt
        {{- else }}
        # The operator serves a self-signed certificate
        # (metrics.certificate.secretName is empty).
        insecureSkipVerify: true
        {{- end }}
{{- if not .authorization.secretName }}
---
# Prometheus reads the scrape token from this Secret: the API server fills
# it with a token of the ServiceAccount below, which may only get /metrics.
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "mlp.fullname" $ }}-metrics-scraper
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
automountServiceAccountToken: false
---
apiVersion: v1
kind: Secret
type: kubernetes.io/service-account-token
metadata:
  name: {{ include "mlp.fullname" $ }}-metrics-scraper
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
  annotations:
    kubernetes.io/service-account.name: {{ include "mlp.fullname" $ }}-metrics-scraper
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "mlp.fullname" $ }}-metrics-scraper
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "mlp.fullname" $ }}-metrics-reader
subjects:
  - kind: ServiceAccount
    name: {{ include "mlp.fullname" $ }}-metrics-scraper
    namespace: {{ $.Release.Namespace }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The operator's ServiceAccount, with serviceAccount.annotations (e.g. for workload identity). */}}
{{- define "mlp.serviceAccount" -}}
{{- if ne (toString (.Values.serviceAccount | default dict).create) "false" }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "mlp.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "mlp.labels" . | nindent 4 }}
    {{- with .Values.serviceAccount.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $ann := merge (dict) (.Values.serviceAccount.annotations | default dict) (.Values.commonAnnotations | default dict) ((.Values.global | default dict).commonAnnotations | default dict) }}
  {{- with $ann }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
The opt-in PodDisruptionBudget. With one replica keep maxUnavailable (the
default) so that a node drain is never blocked: leader election hands over
to the new pod within seconds.
*/}}
{{- define "mlp.podDisruptionBudget" -}}
{{- with .Values.podDisruptionBudget }}
{{- if .enabled }}
{{- if and (hasKey . "minAvailable") (hasKey . "maxUnavailable") }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" }}
{{- end }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "mlp.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
  {{- include "mlp.annotations" $ }}
spec:
  selector:
    matchLabels:
      {{- include "mlp.selectorLabels" $ | nindent 6 }}
  {{- /* hasKey, not default: default would take a 0 for unset. */}}
  {{- if hasKey . "minAvailable" }}
  minAvailable: {{ .minAvailable }}
  {{- else if hasKey . "maxUnavailable" }}
  maxUnavailable: {{ .maxUnavailable }}
  {{- else }}
  maxUnavailable: 1
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}
