{{/* Kubeflow training-operator names, when installed alongside. */}}
{{- define "trainingjob-operator.kubeflowName" -}}
{{- printf "%s-kubeflow" (include "mlp.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
