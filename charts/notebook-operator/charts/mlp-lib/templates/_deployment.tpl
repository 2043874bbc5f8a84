{{/*
The operator's Deployment, the same in every chart: one manager container
with the shared flags, environment, ports, probes, security settings and
volumes. A chart passes, in a dict, its root context and only what is its
own, each part as YAML at column 0 (as include renders it; empty for none):
  root             the chart's root context (.)
  podAnnotations   pod template annotations before .Values.podAnnotations,
                   such as checksums that roll the pods on a changed config
  args             the operator's own flags, after the shared ones and
                   before mlp.containerArgs
  watchNamespaces  the namespaces a namespace-scoped install watches
                   (--watch-namespaces), a list; empty for the whole cluster
  env              variables after mlp.containerEnv
  ports            container ports after metrics and health
  volumeMounts     mounts before mlp.volumeMounts
  volumes          volumes before mlp.volumes
*/}}
{{- define "mlp.deployment" -}}
{{- $in := . -}}
{{- with .root -}}
{{- /* Without leader election every replica reconciles: they undo each
other's writes, and what an operator serialises in its process (such as
the featurestore's Redis collision check) is no longer serialised. */}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas: %v needs leaderElection.enabled: true; without it every replica reconciles at once (set replicas: 1 or enable leader election)" .Values.replicas) }}
{{- end }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "mlp.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "mlp.labels" . | nindent 4 }}
  {{- include "mlp.annotations" . }}
spec:
  replicas: {{ .Values.replicas }}
  {{- if not (kindIs "invalid" .Values.revisionHistoryLimit) }}
  revisionHistoryLimit: {{ .Values.revisionHistoryLimit }}
  {{- end }}
  {{- with .Values.strategy }}
  strategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "mlp.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "mlp.selectorLabels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- if or $in.podAnnotations .Values.podAnnotations }}
      annotations:
        {{- with $in.podAnnotations }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- with .Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
    spec:
      {{- include "mlp.podSpec" . | nindent 6 }}
      containers:
        - name: manager
          {{- include "mlp.container" . | nindent 10 }}
          args:
            - --leader-elect={{ .Values.leaderElection.enabled }}
            - --leader-election-lease-duration={{ .Values.leaderElection.leaseDuration }}
            - --leader-election-renew-deadline={{ .Values.leaderElection.renewDeadline }}
            - --leader-election-retry-period={{ .Values.leaderElection.retryPeriod }}
            {{- with .Values.leaderElection.renewInterval }}
            - --leader-election-renew-interval={{ . }}
            {{- end }}
            {{- $warm := .Values.leaderElection.warmStandby }}
            - --warm-standby={{ ternary true $warm (kindIs "invalid" $warm) }}
            - --priority-queue={{ .Values.priorityQueue }}
            {{- $memoryLimit := dig "limits" "memory" "" (.Values.resources | default dict) }}
            {{- if $memoryLimit }}
            - --memory-limit=$(MLP_MEMORY_LIMIT)
            {{- end }}
            - --metrics-bind-address=:{{ .Values.metrics.port }}
            - --health-probe-bind-address=:8081
            {{- with $in.args }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- include "mlp.containerArgs" . | nindent 12 }}
            {{- with $in.watchNamespaces }}
            - --watch-namespaces={{ join "," . }}
            {{- end }}
          env:
            {{- if $memoryLimit }}
            # The container's memory limit in bytes: the operator keeps the
            # Go runtime within 90 % of it (--memory-limit).
            - name: MLP_MEMORY_LIMIT
              valueFrom:
                resourceFieldRef:
                  containerName: manager
                  resource: limits.memory
            {{- end }}
            {{- include "mlp.containerEnv" . | nindent 12 }}
            {{- with $in.env }}
            {{- . | nindent 12 }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: {{ .Values.metrics.port }}
              protocol: TCP
            - name: health
              containerPort: 8081
              protocol: TCP
            {{- with $in.ports }}
            {{- . | nindent 12 }}
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            {{- toYaml .Values.probes.liveness | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            {{- toYaml .Values.probes.readiness | nindent 12 }}
          {{- $mounts := include "mlp.volumeMounts" . }}
          {{- if or $in.volumeMounts $mounts }}
          volumeMounts:
            {{- with $in.volumeMounts }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- $mounts | nindent 12 }}
          {{- end }}
      {{- $volumes := include "mlp.volumes" . }}
      {{- if or $in.volumes $volumes }}
      volumes:
        {{- with $in.volumes }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- $volumes | nindent 8 }}
      {{- end }}
{{- end }}
{{- end -}}
