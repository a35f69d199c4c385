{{- /*
A Plan's status (webhook/planstatus.md) is SUC's record of its rollout, and
the gate relies on each of its four fields, so nobody but SUC may change it.
Sent here only:
- upgrade.cattle.io/v1 plans/status UPDATE, in the SUC namespaces;
- written by anyone but a ServiceAccount of a SUC namespace, so SUC's own
  status writes never wait on the gate;
- changing applying, conditions, latestHash or latestVersion (all the fields
  the CRD's structural schema keeps); a write that changes nothing stays in
  the API server.
Fail: while the gate is down, only SUC can change a Plan's status.
*/}}
{{- define "gug.planStatusWebhook" -}}
{{- $groups := list }}
{{- range .Values.config.sucNamespaces }}
{{- $groups = append $groups (include "gug.celString" (printf "system:serviceaccounts:%s" .)) }}
{{- end }}
- name: planstatus.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/plan-status") | nindent 4 }}
  rules:
    - apiGroups: ["upgrade.cattle.io"]
      apiVersions: ["v1"]
      resources: ["plans/status"]
      operations: ["UPDATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          {{- toYaml .Values.config.sucNamespaces | nindent 10 }}
  matchConditions:
    - name: not-suc
      expression: {{ printf "!request.userInfo.groups.exists(g, g in [%s])" (join ", " $groups) | quote }}
    - name: changes-status
      expression: {{ "object.?status.?applying.orValue([]) != oldObject.?status.?applying.orValue([]) || object.?status.?conditions.orValue([]) != oldObject.?status.?conditions.orValue([]) || object.?status.?latestHash.orValue('') != oldObject.?status.?latestHash.orValue('') || object.?status.?latestVersion.orValue('') != oldObject.?status.?latestVersion.orValue('')" | quote }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- end }}
