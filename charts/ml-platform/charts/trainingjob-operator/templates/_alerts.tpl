{{/*
The TrainingJob operator's own alerts, added to mlp-lib's PrometheusRule.
Context: root (the chart), sel (the operator's metrics selector), values
(monitoring.prometheusRule).
*/}}
{{- define "trainingjob-operator.alerts" -}}
- alert: MLPlatformTrainingJobsQueuedLong
  expr: |-
    histogram_quantile(0.9, sum by (le, namespace) (rate(mlplatform_trainingjob_queue_wait_seconds_bucket{ {{- .sel -}} }[1h])))
      > {{ .values.trainingJobQueueWaitSeconds | default 3600 }}
  for: {{ (.values.for | default dict).trainingJobsQueuedLong | default "15m" }}
  labels:
    severity: warning
    operator: trainingjob-operator
  annotations:
    summary: "TrainingJobs in {{ "{{" }} $labels.namespace {{ "}}" }} wait long in the Kueue queue."
    description: "In the last hour, 1 in 10 TrainingJob runs in {{ "{{" }} $labels.namespace {{ "}}" }} waited more than {{ .values.trainingJobQueueWaitSeconds | default 3600 }} s before Kueue admitted it; the ClusterQueue's quota may be too small."
    runbook_url: {{ include "mlp.runbookURL" (dict "root" .root "alert" "MLPlatformTrainingJobsQueuedLong") }}
- alert: MLPlatformTrainingJobRestartsExhausted
  expr: |-
    sum by (namespace) (increase(mlplatform_trainingjob_restarts_exhausted_total{ {{- .sel -}} }[1h])) > 0
      or sum by (namespace) (
        mlplatform_trainingjob_restarts_exhausted_total{ {{- .sel -}} }
          unless mlplatform_trainingjob_restarts_exhausted_total{ {{- .sel -}} } offset 1h
      ) > 0
  labels:
    severity: warning
    operator: trainingjob-operator
  annotations:
    summary: "TrainingJobs in {{ "{{" }} $labels.namespace {{ "}}" }} failed because their restarts ran out."
    description: "In the last hour, TrainingJobs in {{ "{{" }} $labels.namespace {{ "}}" }} failed with a failure a new run could fix (preemption, node failure) because checkpoint.maxRestarts was reached. kubectl get trainingjobs.training.mlplatform.dev -n {{ "{{" }} $labels.namespace {{ "}}" }}; raise maxRestarts or look at the cluster's disruptions."
    runbook_url: {{ include "mlp.runbookURL" (dict "root" .root "alert" "MLPlatformTrainingJobRestartsExhausted") }}
{{- end -}}
