{{/* The operator's name: its ServiceAccount, Deployment and ClusterRoles (mlp-lib). */}}
{{- define "notebook-operator.fullname" -}}
{{- include "mlp.fullname" . -}}
{{- end -}}

{{/* Labels on every object (mlp-lib), including commonLabels. */}}
{{- define "notebook-operator.labels" -}}
{{- include "mlp.labels" . -}}
{{- end -}}

{{/* Labels that select the operator's pods (mlp-lib). */}}
{{- define "notebook-operator.selectorLabels" -}}
{{- include "mlp.selectorLabels" . -}}
{{- end -}}

