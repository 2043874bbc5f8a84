{{/*
The chart's notes, a named template so that the ml-platform umbrella prints
them too (Helm prints only the top chart's NOTES.txt).
*/}}
{{- define "featurestore-operator.notes" -}}
The featurestore-operator is installed in namespace {{ .Release.Namespace }}.

Register a shared server (platform team). Its admin Secret must be in
{{ .Release.Namespace }}, where tenants cannot read it:

  kubectl -n {{ .Release.Namespace }} create secret generic pg-admin \
    --from-literal=username=mlp_admin --from-literal=password=...
  cat <<YAML | kubectl apply -f -
  apiVersion: features.mlplatform.dev/v1alpha1
  kind: FeatureStoreBackend
  metadata:
    name: shared-postgres
  spec:
    postgresql:
      host: postgres.databases.svc
      adminSecret: {name: pg-admin}
  YAML

Create a feature store (tenant) and wait for it:

  cat <<YAML | kubectl apply -f -
  apiVersion: features.mlplatform.dev/v1alpha1
  kind: FeatureStore
  metadata:
    name: sales
  spec:
    project: sales
    onlineStore: {backend: shared-redis}
    offlineStore: {backend: shared-postgres}
    registry: {backend: shared-postgres}
  YAML

  kubectl wait featurestores.features.mlplatform.dev/sales --for=condition=Ready --timeout=5m

Notebooks and TrainingJobs that reference it mount its feature_store.yaml.

A deleted FeatureStore whose server stays unreachable keeps its finalizer
(condition CleanupFailed). An administrator may give up its cleanup with
  kubectl annotate featurestores.features.mlplatform.dev/sales features.mlplatform.dev/abandon-cleanup=true
which {{ if .Values.abandonCleanup.policy }}the ValidatingAdmissionPolicy abandon-cleanup.features.mlplatform.dev
allows only{{ else }}(abandonCleanup.policy=false: make sure deploy/admission/abandon-cleanup.yaml
is installed, or anybody who may edit FeatureStores can do it) should allow only{{ end }} to users with the abandon-cleanup verb. Grant it, for example:
  kubectl create clusterrolebinding alice-abandon-featurestores \
    --clusterrole={{ include "mlp.fullname" . }}-abandon-cleanup --user=alice
  kubectl -n team-a create rolebinding alice-abandon-featurestores \
    --clusterrole={{ include "mlp.fullname" . }}-abandon-cleanup --user=alice
An event (ResourcesLeftBehind) lists what is left on the servers to remove by hand.

Before uninstalling this release, delete every FeatureStore and wait until
they are gone, then the backends: only the running operator cleans up and
releases their finalizers.
  kubectl delete featurestores.features.mlplatform.dev --all --all-namespaces --wait
  kubectl delete featurestorebackends.features.mlplatform.dev --all --wait
{{- if .Values.crds.keep }}
The CRDs stay installed when this release is uninstalled (crds.keep=true), and
so do FeatureStores left then, with finalizers nobody releases: deleting one,
or its namespace, hangs (the namespace stays Terminating).
{{- else }}
The CRDs are deleted with this release (crds.keep=false), but FeatureStores
left then keep finalizers nobody releases: the CRDs, and the namespaces of
those stores, hang in deletion (Terminating).
{{- end }}
To recover, reinstall the chart: the operator finishes the cleanups (or
abandons them on the annotation above). As a last resort an administrator
removes the finalizers by hand, e.g.
  kubectl -n team-a patch featurestores.features.mlplatform.dev/sales --type=merge -p '{"metadata":{"finalizers":null}}'
which leaves its PostgreSQL databases and roles and its Redis user and keys on the servers, for removal by hand.

Another API may also be called featurestores (the Feast operator, featurestores.feast.dev), and
then a bare `featurestores` in a kubectl command may reach it: name ours with its group,
featurestores.features.mlplatform.dev, or its short name mlfs.
`kubectl get mlplatform` lists every ml-platform object of a namespace.
{{- end -}}
