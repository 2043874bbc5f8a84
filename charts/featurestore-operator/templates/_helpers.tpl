{{/* The operator's name: its ServiceAccount, Deployment and ClusterRoles (mlp-lib). */}}
{{- define "featurestore-operator.fullname" -}}
{{- include "mlp.fullname" . -}}
{{- end -}}

{{/* Labels on every object (mlp-lib), including commonLabels. */}}
{{- define "featurestore-operator.labels" -}}
{{- include "mlp.labels" . -}}
{{- end -}}

{{/* Labels that select the operator's pods (mlp-lib). */}}
{{- define "featurestore-operator.selectorLabels" -}}
{{- include "mlp.selectorLabels" . -}}
{{- end -}}
