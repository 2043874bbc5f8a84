{{/*
The Notebook operator's own alerts, added to mlp-lib's PrometheusRule.
Context: root (the chart), sel (the operator's metrics selector), values
(monitoring.prometheusRule).
*/}}
{{- define "notebook-operator.alerts" -}}
- alert: MLPlatformNotebookProbesFailing
  expr: |-
    sum(rate(mlplatform_notebook_probe_failures_total{ {{- .sel -}} }[10m]))
      / sum(rate(mlplatform_notebook_probe_duration_seconds_count{ {{- .sel -}} }[10m])) > {{ .values.probeFailureRatio | default 0.5 }}
  for: {{ (.values.for | default dict).notebookProbesFailing | default "15m" }}
  labels:
    severity: warning
    operator: notebook-operator
  annotations:
    summary: Most activity probes of Jupyter servers fail.
    description: "More than {{ .values.probeFailureRatio | default 0.5 }} of the culling probes failed in the last 10 minutes. A failed probe never culls, so idle notebooks keep their accelerators; check the NetworkPolicy towards the notebooks and the operator's logs."
    runbook_url: {{ include "mlp.runbookURL" (dict "root" .root "alert" "MLPlatformNotebookProbesFailing") }}
{{- end -}}
