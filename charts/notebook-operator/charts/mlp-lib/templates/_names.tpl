{{/*
The chart's name as objects show it: nameOverride, else the chart's name.
*/}}
{{- define "mlp.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The operator's name: its ServiceAccount, Deployment and ClusterRoles.
fullnameOverride when set; else the release name alone when it already
contains the chart's name, so that the umbrella installed as "ml-platform"
does not repeat itself; else release-name.
*/}}
{{- define "mlp.fullname" -}}
{{- $name := include "mlp.name" . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The ServiceAccount the operator runs as: serviceAccount.name, else the
operator's name when the chart creates it. A platform team that brings its
own account must name it: the chart binds the operator's cluster-wide roles
to it, and the namespace's default account, which every pod there runs as
unless it names another, must never get them.
*/}}
{{- define "mlp.serviceAccountName" -}}
{{- $sa := .Values.serviceAccount | default dict -}}
{{- if ne (toString $sa.create) "false" -}}
{{- $sa.name | default (include "mlp.fullname" .) -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false: name the ServiceAccount the operator runs as (the chart would bind the operator's cluster-wide roles to the namespace's default account otherwise)" $sa.name -}}
{{- end -}}
{{- end -}}

{{/*
Labels on every object: the recommended app.kubernetes.io labels, then the
umbrella's global.commonLabels, then the chart's own commonLabels (the more
specific wins). The selector labels are never overridden: a Deployment's
selector is immutable.
*/}}
{{- define "mlp.labels" -}}
{{- $common := merge (dict) (.Values.commonLabels | default dict) ((.Values.global | default dict).commonLabels | default dict) -}}
{{- $base := dict "app.kubernetes.io/version" (.Chart.AppVersion | toString) "app.kubernetes.io/managed-by" .Release.Service "app.kubernetes.io/part-of" "ml-platform" "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version) -}}
{{- include "mlp.selectorLabels" . }}
{{ toYaml (omit (merge $base $common) "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/component") }}
{{- end -}}

{{/* Labels that select the operator's pods. */}}
{{- define "mlp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mlp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
A metadata.annotations block with the commonAnnotations (the umbrella's
global.commonAnnotations, then the chart's own), indented for an object's
metadata and starting with a newline, or nothing when there are none: use
it as {{- include "mlp.annotations" . }} right after the labels.
*/}}
{{- define "mlp.annotations" -}}
{{- $ann := merge (dict) (.Values.commonAnnotations | default dict) ((.Values.global | default dict).commonAnnotations | default dict) -}}
{{- with $ann }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end -}}
{{- end -}}
