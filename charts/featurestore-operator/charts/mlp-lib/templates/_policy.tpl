{{- /*
mlp.ownedObjectsPolicy narrows the writes of the operator's ServiceAccount
(and of nobody else) to its own children. RBAC cannot limit the operator to
the objects it created: it grants a verb on a kind, in every namespace or in
one. This policy admits a creation only with the label
app.kubernetes.io/managed-by=<operator>, and an update, patch or delete only
of an object that has it already or that a resource of the operator's API
group controls (an owner reference with controller: true; the operator
adopts such a child when its labels were lost, and relabels it), and an
update must leave the label on. So the
operator cannot change or delete a tenant's objects of those kinds, nor
anything in kube-system, even where RBAC lets it write that kind. The
garbage collector, which deletes the children with their owner, is another
user and is not affected.

A label is only a claim, so what a labelled object could do with the
cluster's own credentials is refused too, whatever the label:
- no object in a kube-* namespace: a pod template there could run as one
  of the control plane's ServiceAccounts;
- a Secret must be Opaque or kubernetes.io/tls, the types the operators
  write (the TrainingJob operator's progress endpoint keeps its CA and
  certificate in a TLS Secret): the token controller fills a
  kubernetes.io/service-account-token Secret with a token of the
  ServiceAccount it names, and a bootstrap token Secret is a credential to
  join the cluster;
- a Service must be a ClusterIP Service without externalIPs, as the
  operators' are: externalIPs capture the cluster's traffic to those
  addresses (CVE-2020-8554), and other types open node ports or balancers.
A chart adds what only it can say about its own children (validations).
Events, Leases and the custom resources' status are not matched: the
operator writes them for objects that are not its children.

It takes a dict: root (the chart's context), operator (the label's value),
group (the API group that names the policy), rules (the resourceRules:
apiGroups and resources of the kinds the operator writes) and, optionally,
validations (more entries of spec.validations, as YAML at column 0).
*/ -}}
{{- define "mlp.ownedObjectsPolicy" -}}
{{- $ := .root }}
{{- $fullname := include "mlp.fullname" $ }}
{{- $short := trimSuffix "-operator" .operator }}
{{- if $.Values.rbac.ownedObjectsPolicy }}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $fullname }}-owned-objects.{{ .group }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      {{- range .rules }}
      - apiGroups: {{ toJson .apiGroups | replace "\",\"" "\", \"" }}
        apiVersions: ["*"]
        operations: ["CREATE", "UPDATE", "DELETE"]
        resources: {{ toJson .resources | replace "\",\"" "\", \"" }}
      {{- end }}
  matchConditions:
    - name: the-operator
      expression: request.userInfo.username == 'system:serviceaccount:{{ $.Release.Namespace }}:{{ include "mlp.serviceAccountName" $ }}'
  variables:
    - name: ownedNew
      expression: >-
        object != null && has(object.metadata.labels) &&
        'app.kubernetes.io/managed-by' in object.metadata.labels &&
        object.metadata.labels['app.kubernetes.io/managed-by'] == '{{ .operator }}'
    - name: ownedOld
      expression: >-
        oldObject != null && ((has(oldObject.metadata.labels) &&
        'app.kubernetes.io/managed-by' in oldObject.metadata.labels &&
        oldObject.metadata.labels['app.kubernetes.io/managed-by'] == '{{ .operator }}') ||
        (has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r,
        has(r.controller) && r.controller && r.apiVersion.startsWith('{{ .group }}/'))))
  validations:
    - expression: request.operation == 'DELETE' || variables.ownedNew
      messageExpression: >-
        'the {{ $short }} operator may only write ' + request.resource.resource +
        ' labelled app.kubernetes.io/managed-by={{ .operator }}'
      reason: Forbidden
    - expression: request.operation == 'CREATE' || variables.ownedOld
      messageExpression: >-
        'the {{ $short }} operator may not change or delete ' + request.resource.resource + ' ' +
        request.namespace + '/' + request.name + ': it is not labelled app.kubernetes.io/managed-by={{ .operator }}' +
        ' and no {{ .group }} resource controls it'
      reason: Forbidden
    - expression: "!request.namespace.startsWith('kube-')"
      messageExpression: >-
        'the {{ $short }} operator may not write ' + request.resource.resource + ' in namespace ' + request.namespace
      reason: Forbidden
    - expression: >-
        request.operation == 'DELETE' || request.resource.resource != 'secrets' ||
        (has(object.type) && object.type in ['Opaque', 'kubernetes.io/tls'])
      messageExpression: >-
        'the {{ $short }} operator may only write Secrets of type Opaque or kubernetes.io/tls, not ' +
        (has(object.type) ? object.type : 'without a type')
      reason: Forbidden
    - expression: >-
        request.operation == 'DELETE' || request.resource.resource != 'services' ||
        ((!has(object.spec.type) || object.spec.type == 'ClusterIP') &&
        (!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0))
      message: the {{ $short }} operator may only write Services of type ClusterIP without externalIPs
      reason: Forbidden
    {{- with .validations }}
    {{- . | nindent 4 }}
    {{- end }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $fullname }}-owned-objects.{{ .group }}
  labels:
    {{- include "mlp.labels" $ | nindent 4 }}
spec:
  policyName: {{ $fullname }}-owned-objects.{{ .group }}
  validationActions: [Deny]
{{- end }}
{{- end -}}
