{{/*
mlp.networkPolicy is the ingress NetworkPolicy of the operator's own pods
(networkPolicy.enabled): the metrics port admits only the peers of
networkPolicy.metricsFrom (the scraper), the health port everyone (the
kubelet's probes come from the node, which some engines judge like any
other source), and nothing else gets in. A chart with more ports passes
their rules as "ingress" (a YAML list of NetworkPolicyIngressRules). Egress
stays open: the operators talk to the API server and, for the Notebook
prober and the FeatureStore's servers, to tenant pods.

It takes a dict: root (the chart's context) and ingress (optional).
*/}}
{{- define "mlp.networkPolicy" -}}
{{- $ := .root }}
{{- $extra := .ingress | default "" }}
{{- with $.Values.networkPolicy }}
{{- if .enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "mlp.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
  {{- include "mlp.annotations" $ }}
spec:
  podSelector:
    matchLabels:
      {{- include "mlp.selectorLabels" $ | nindent 6 }}
  policyTypes:
    - Ingress
  ingress:
    - ports:
        - port: 8081
          protocol: TCP
    {{- with .metricsFrom }}
    - from:
        {{- toYaml . | nindent 8 }}
      ports:
        - port: {{ $.Values.metrics.port }}
          protocol: TCP
    {{- end }}
    {{- with $extra }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}
