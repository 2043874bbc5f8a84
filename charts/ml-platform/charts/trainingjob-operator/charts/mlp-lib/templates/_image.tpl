{{/*
The operator image: [registry/]repository, then @digest when a digest is
set (a digest names exactly one image, so the tag is dropped), else :tag,
which defaults to the chart's appVersion. The registry is image.registry,
else the umbrella's global.imageRegistry, so an air-gapped cluster points
every operator at its mirror with one value.
*/}}
{{- define "mlp.image" -}}
{{- $img := .Values.image -}}
{{- $registry := $img.registry | default ((.Values.global | default dict).imageRegistry) | default "" -}}
{{- $repo := $img.repository -}}
{{- if $registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo -}}
{{- end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo ($img.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}
