{{- /*
mlp.ownedObjectsPolicy narrows the writes of the operator's ServiceAccount
(and of nobody else) to its own children. RBAC cannot limit the operator to
the objects it created: it grants a verb on a kind, in every namespace or in
one. This policy admits a creation only with the label
app.kubernetes.io/managed-by=<operator>, and an update, patch or delete only
of an object that has it already (and an update must keep it). So the
operator cannot change or delete a tenant's objects of those kinds, nor
anything in kube-system, even where RBAC lets it write that kind. The
garbage collector, which deletes the children with their owner, is another
user and is not affected.

It takes a dict: root (the chart's context), operator (the label's value),
group (the API group that names the policy) and rules (the resourceRules:
apiGroups and resources of the kinds the operator writes).
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
        oldObject != null && has(oldObject.metadata.labels) &&
        'app.kubernetes.io/managed-by' in oldObject.metadata.labels &&
        oldObject.metadata.labels['app.kubernetes.io/managed-by'] == '{{ .operator }}'
  validations:
    - expression: request.operation == 'DELETE' || variables.ownedNew
      messageExpression: >-
        'the {{ $short }} operator may only write ' + request.resource.resource +
        ' labelled app.kubernetes.io/managed-by={{ .operator }}'
      reason: Forbidden
    - expression: request.operation == 'CREATE' || variables.ownedOld
      messageExpression: >-
        'the {{ $short }} operator may not change or delete ' + request.resource.resource + ' ' +
        request.namespace + '/' + request.name + ': it is not labelled app.kubernetes.io/managed-by={{ .operator }}'
      reason: Forbidden
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
