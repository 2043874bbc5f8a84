{{/*
The FeatureStore operator's own alerts, added to mlp-lib's PrometheusRule.
Context: root (the chart), sel (the operator's metrics selector), values
(monitoring.prometheusRule).
*/}}
{{- define "featurestore-operator.alerts" -}}
- alert: MLPlatformFeatureStoreCleanupFailing
  expr: sum by (origin) (rate(mlplatform_featurestore_cleanup_failures_total{ {{- .sel -}} }[15m])) > 0
  for: {{ (.values.for | default dict).featureStoreCleanupFailing | default "30m" }}
  labels:
    severity: warning
    operator: featurestore-operator
  annotations:
    summary: "Removing what deleted FeatureStores provisioned keeps failing ({{ "{{" }} $labels.origin {{ "}}" }})."
    description: "Databases, roles or keys of deleted FeatureStores cannot be removed from their servers; the FeatureStores (or, for origin pending_cleanup, the handed-off cleanups in {{ .root.Release.Namespace }}) keep their finalizers. Their events and the backends' conditions say why."
    runbook_url: {{ include "mlp.runbookURL" (dict "root" .root "alert" "MLPlatformFeatureStoreCleanupFailing") }}
{{- end -}}
