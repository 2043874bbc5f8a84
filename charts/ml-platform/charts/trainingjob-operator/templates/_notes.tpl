{{/*
The chart's notes, a named template so that the ml-platform umbrella prints
them too (Helm prints only the top chart's NOTES.txt).
*/}}
{{- define "trainingjob-operator.notes" -}}
The trainingjob-operator is installed in namespace {{ .Release.Namespace }}.
{{- if eq .Values.defaultBackend "kubeflow" }}
{{- if not .Values.kubeflow.enabled }}

Its default backend is kubeflow (defaultBackend=kubeflow), which needs the
Kubeflow training-operator (v1.8.x) running in the cluster: set
kubeflow.enabled=true to install it alongside, or defaultBackend=native.
{{- end }}
{{- else }}

TrainingJobs run on the {{ .Values.defaultBackend }} backend (Indexed Jobs and a headless Service), which
needs no other operator.
{{- if not .Values.kubeflow.enabled }} The kubeflow backend (spec.backend: kubeflow) needs the Kubeflow
training-operator (v1.8.x): set kubeflow.enabled=true to install it alongside.
{{- end }}
{{- end }}

Run a training and wait for it:

  cat <<YAML | kubectl apply -f -
  apiVersion: training.mlplatform.dev/v1alpha1
  kind: TrainingJob
  metadata:
    name: mnist
  spec:
    framework: pytorch
    image: registry.example.com/mnist:1
    command: ["python", "train.py"]
    workers: 2
    resources:
      accelerators: {count: 1}
  YAML

  kubectl wait trainingjobs.training.mlplatform.dev/mnist --for=condition=Running --timeout=10m
  kubectl wait trainingjobs.training.mlplatform.dev/mnist --for=condition=Finished --timeout=24h   # succeeded or failed
  kubectl get trainingjobs.training.mlplatform.dev/mnist   # STATUS says which
  kubectl describe trainingjobs.training.mlplatform.dev/mnist   # events, including pod problems

The TrainingJob CRD {{ if .Values.crds.keep }}stays installed when this release is uninstalled (crds.keep=true); delete it by hand to remove every TrainingJob.{{ else }}is deleted with this release, and with it every TrainingJob.{{ end }}

Another API may also be called trainingjobs (other training operators may install one), and
then a bare `trainingjobs` in a kubectl command may reach it: name ours with its group,
trainingjobs.training.mlplatform.dev, or its short name mltj.
`kubectl get mlplatform` lists every ml-platform object of a namespace.
{{- end -}}
