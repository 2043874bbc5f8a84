{{/*
The opt-in PrometheusRule of an operator: the alerts every operator shares
(down, no leader, reconcile errors, cleanups failing) and the operator's
own, which the chart defines as "<chart>.alerts" (a YAML list of rules,
possibly empty). Every expression selects the operator's own metrics
Service by the job label Prometheus gives its targets (the Service's
name), never by namespace: with honorLabels the namespace label of a
per-object metric is the object's.
*/}}
{{- define "mlp.prometheusRule" -}}
{{- with .Values.monitoring.prometheusRule }}
{{- if or .enabled (include "mlp.monitoringEverywhere" $) }}
{{- $sel := printf "job=\"%s-metrics\"" (include "mlp.fullname" $) }}
{{- $for := .for | default dict }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
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
  groups:
    - name: {{ $.Chart.Name }}
      rules:
        - alert: MLPlatformOperatorDown
          expr: absent(up{ {{- $sel -}} } == 1)
          for: {{ $for.down | default "5m" }}
          labels:
            severity: critical
            operator: {{ $.Chart.Name }}
          annotations:
            summary: The {{ $.Chart.Name }} has no replica Prometheus can scrape.
            description: No target of {{ include "mlp.fullname" $ }}-metrics in {{ $.Release.Namespace }} has been up for {{ $for.down | default "5m" }}; its objects are not reconciled.
            runbook_url: {{ include "mlp.runbookURL" (dict "root" $ "alert" "MLPlatformOperatorDown") }}
        {{- if $.Values.leaderElection.enabled }}
        - alert: MLPlatformOperatorNoLeader
          expr: max(leader_election_master_status{ {{- $sel -}} }) < 1
          for: {{ $for.noLeader | default "5m" }}
          labels:
            severity: critical
            operator: {{ $.Chart.Name }}
          annotations:
            summary: No replica of the {{ $.Chart.Name }} holds the leader lease.
            description: The {{ $.Chart.Name }} runs, but none of its replicas has led for {{ $for.noLeader | default "5m" }}, so nothing is reconciled. Check the Lease in {{ $.Release.Namespace }} and the API server.
            runbook_url: {{ include "mlp.runbookURL" (dict "root" $ "alert" "MLPlatformOperatorNoLeader") }}
        {{- end }}
        - alert: MLPlatformReconcileErrors
          expr: |-
            sum by (controller) (rate(controller_runtime_reconcile_errors_total{ {{- $sel -}} }[15m]))
              / sum by (controller) (rate(controller_runtime_reconcile_total{ {{- $sel -}} }[15m])) > {{ .reconcileErrorRatio | default 0.1 }}
          for: {{ $for.reconcileErrors | default "15m" }}
          labels:
            severity: warning
            operator: {{ $.Chart.Name }}
          annotations:
            summary: "{{ "{{" }} $labels.controller {{ "}}" }} reconciles fail."
            description: "More than {{ .reconcileErrorRatio | default 0.1 }} of the {{ "{{" }} $labels.controller {{ "}}" }} reconciles of the {{ $.Chart.Name }} failed in the last 15 minutes; its logs and the objects' events say why."
            runbook_url: {{ include "mlp.runbookURL" (dict "root" $ "alert" "MLPlatformReconcileErrors") }}
        - alert: MLPlatformObjectsStalled
          expr: max by (kind, namespace) (mlplatform_objects_stalled{ {{- $sel -}} }) > 0
          for: {{ $for.stalled | default "15m" }}
          labels:
            severity: warning
            operator: {{ $.Chart.Name }}
          annotations:
            summary: "{{ "{{" }} $labels.kind {{ "}}" }} objects in {{ "{{" }} $labels.namespace {{ "}}" }} are Stalled."
            description: "They cannot make progress without a change from a person: kubectl get mlplatform -n {{ "{{" }} $labels.namespace {{ "}}" }} and the Stalled condition's message say what."
            runbook_url: {{ include "mlp.runbookURL" (dict "root" $ "alert" "MLPlatformObjectsStalled") }}
        - alert: MLPlatformCleanupFailing
          expr: sum by (finalizer) (rate(mlplatform_finalizer_cleanup_failures_total{ {{- $sel -}} }[15m])) > 0
          for: {{ $for.cleanupFailing | default "30m" }}
          labels:
            severity: warning
            operator: {{ $.Chart.Name }}
          annotations:
            summary: "Cleanups behind the {{ "{{" }} $labels.finalizer {{ "}}" }} finalizer keep failing."
            description: "Deleted objects keep their finalizer (condition CleanupFailed) because removing what they provisioned fails; the objects' events say why. See the chart README for abandoning a cleanup."
            runbook_url: {{ include "mlp.runbookURL" (dict "root" $ "alert" "MLPlatformCleanupFailing") }}
        {{- with include (printf "%s.alerts" $.Chart.Name) (dict "root" $ "sel" $sel "values" .) }}
        {{- . | nindent 8 }}
        {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Whether the umbrella's global.monitoring.enabled turns on every operator's
ServiceMonitor, PrometheusRule and dashboards at once: "true" or empty.
*/}}
{{- define "mlp.monitoringEverywhere" -}}
{{- if ((.Values.global | default dict).monitoring | default dict).enabled }}true{{ end -}}
{{- end -}}

{{/*
The runbook of an alert: monitoring.prometheusRule.runbookBaseURL (the
project's docs/runbooks.md by default) and the alert's name as anchor.
Context: root (the chart) and alert (its name).
*/}}
{{- define "mlp.runbookURL" -}}
{{- $base := .root.Values.monitoring.prometheusRule.runbookBaseURL | default "https://github.com/ml-platform/ml-platform/blob/main/docs/runbooks.md" -}}
{{- printf "%s#%s" $base (lower .alert) -}}
{{- end -}}

{{/*
The opt-in Grafana dashboards of an operator: every files/dashboards/*.json
of the chart in one ConfigMap, labelled for Grafana's dashboard sidecar
(monitoring.dashboards.labels). The dashboards pick the operator's job from
a variable, so one Grafana serves several releases.
*/}}
{{- define "mlp.dashboards" -}}
{{- with .Values.monitoring.dashboards }}
{{- if or .enabled (include "mlp.monitoringEverywhere" $) }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "mlp.fullname" $ }}-dashboards
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
    {{- with .labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with merge (dict) (.annotations | default dict) ($.Values.commonAnnotations | default dict) }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  {{- range $path, $_ := $.Files.Glob "files/dashboards/*.json" }}
  {{ base $path }}: |-
    {{- $.Files.Get $path | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}
