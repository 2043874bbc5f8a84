{{/* The operator's name: its ServiceAccount, Deployment and ClusterRoles (mlp-lib). */}}
{{- define "trainingjob-operator.fullname" -}}
{{- include "mlp.fullname" . -}}
{{- end -}}

{{/* Labels on every object (mlp-lib), including commonLabels. */}}
{{- define "trainingjob-operator.labels" -}}
{{- include "mlp.labels" . -}}
{{- end -}}

{{/* Labels that select the operator's pods (mlp-lib). */}}
{{- define "trainingjob-operator.selectorLabels" -}}
{{- include "mlp.selectorLabels" . -}}
{{- end -}}

{{/* Kubeflow training-operator names, when installed alongside. */}}
{{- define "trainingjob-operator.kubeflowName" -}}
{{- printf "%s-kubeflow" (include "trainingjob-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
