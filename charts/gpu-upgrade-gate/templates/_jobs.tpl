{{- /*
The per-node guard on SUC's upgrade Jobs (webhook/jobs.md). SUC creates each
node's Job paused (parallelism 0) and raises parallelism once the node is in
the Plan's status.applying; that write (or a Job created running) is the
moment a node's upgrade starts, and the only Job write sent here:
- batch/v1 jobs (never jobs/status), in the SUC namespaces only;
- objectSelector: Jobs labelled upgrade.cattle.io/plan (SUC labels every Job
  it writes; a Job without the node label is refused as FactsMissing);
- written by a ServiceAccount of a SUC namespace (SUC's own), so people's and
  every other controller's Jobs never reach the gate;
- only a start: running now (parallelism above 0, not suspended) and created
  so, or not running before. SUC's paused creates, relabels and deletes, and
  the Job controller's status writes, never wait on the gate.
Fail: while the gate is down, a node's upgrade stays paused and SUC retries.
*/}}
{{- define "gug.jobsWebhook" -}}
{{- $groups := list }}
{{- range .Values.config.sucNamespaces }}
{{- $groups = append $groups (include "gug.celString" (printf "system:serviceaccounts:%s" .)) }}
{{- end }}
- name: jobs.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/jobs") | nindent 4 }}
  rules:
    - apiGroups: ["batch"]
      apiVersions: ["v1"]
      resources: ["jobs"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          {{- toYaml .Values.config.sucNamespaces | nindent 10 }}
  objectSelector:
    matchExpressions:
      - key: upgrade.cattle.io/plan
        operator: Exists
  matchConditions:
    - name: written-by-suc
      expression: {{ printf "request.userInfo.groups.exists(g, g in [%s])" (join ", " $groups) | quote }}
    - name: starts-the-job
      expression: {{ "object.spec.?parallelism.orValue(1) > 0 && !object.spec.?suspend.orValue(false) && (request.operation == 'CREATE' || oldObject.spec.?parallelism.orValue(1) == 0 || oldObject.spec.?suspend.orValue(false))" | quote }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- end }}
