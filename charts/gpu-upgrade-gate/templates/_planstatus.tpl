{{- /*
SUC's status.applying (webhook/planstatus.md): the Plan webhook holds version
edits while it is non-empty, so nobody but SUC may change it. Sent here only:
- upgrade.cattle.io/v1 plans/status UPDATE, in the SUC namespaces;
- written by anyone but a ServiceAccount of a SUC namespace, so SUC's own
  status writes never wait on the gate;
- changing status.applying; every other status write stays in the API server.
Fail: while the gate is down, only SUC can change status.applying.
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
    - name: changes-applying
      expression: {{ "object.?status.?applying.orValue([]) != oldObject.?status.?applying.orValue([])" | quote }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- end }}
