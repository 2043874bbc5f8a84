{{/*
The chart's notes, a named template so that the ml-platform umbrella prints
them too (Helm prints only the top chart's NOTES.txt).
*/}}
{{- define "notebook-operator.notes" -}}
The notebook-operator is installed in namespace {{ .Release.Namespace }}.

Start a notebook and open it:

  cat <<YAML | kubectl apply -f -
  apiVersion: notebooks.mlplatform.dev/v1alpha1
  kind: Notebook
  metadata:
    name: my-notebook
  spec:
    workspace: {size: 20Gi}
  YAML

  kubectl wait notebooks.notebooks.mlplatform.dev/my-notebook --for=condition=Ready --timeout=10m
  kubectl get notebooks.notebooks.mlplatform.dev/my-notebook -o jsonpath='{.status.url}'
  kubectl get secret "$(kubectl get notebooks.notebooks.mlplatform.dev/my-notebook -o jsonpath='{.status.tokenSecretName}')" -o jsonpath='{.data.token}' | base64 -d

Idle notebooks are stopped after {{ .Values.notebooks.culling.idleTimeout }} without kernel or terminal activity
(culling.enabled={{ .Values.notebooks.culling.enabled }}), with a warning event first; the workspace is kept.
Start a culled notebook again with:

  kubectl annotate notebooks.notebooks.mlplatform.dev/my-notebook notebooks.mlplatform.dev/restart="$(date -Is)" --overwrite

The Notebook CRD {{ if .Values.crds.keep }}stays installed when this release is uninstalled (crds.keep=true); delete it by hand to remove every Notebook.{{ else }}is deleted with this release, and with it every Notebook.{{ end }}

Another API may also be called notebooks (Kubeflow Notebooks, notebooks.kubeflow.org), and
then a bare `notebooks` in a kubectl command may reach it: name ours with its group,
notebooks.notebooks.mlplatform.dev, or its short name mlnb.
`kubectl get mlplatform` lists every ml-platform object of a namespace.
{{- end -}}
