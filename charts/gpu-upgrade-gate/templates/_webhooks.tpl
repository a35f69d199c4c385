{{- /*
Generated from the webhook table (webhook/table.go) by
go test ./test/chart -run TestWebhooksTemplateIsGenerated -update
Do not edit: change webhook/table.go and regenerate. The entries of the
ValidatingWebhookConfiguration (templates/webhook.yaml), one a row of the
table; match conditions that depend on values are the templates the table
names (templates/_helpers.tpl).
*/ -}}
{{- define "gug.webhooks" -}}
# Plans, in the SUC namespaces only; fail closed.
- name: plans.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/plans") | nindent 4 }}
  rules:
    - apiGroups: ["upgrade.cattle.io"]
      apiVersions: ["v1"]
      resources: ["plans"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          {{- toYaml .Values.config.sucNamespaces | nindent 10 }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# Label changes, uncordons and taint changes that can start or stop a DaemonSet's Pod
# of GPU nodes by people (nodes/status too: a label changed through the status
# subresource is reviewed like one changed through the Node); kubelets and the exempt
# system controllers never reach it, nor do the system's and the configured node-taint
# controllers' taint writes. Failure policy a value.
- name: nodes.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/nodes") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["nodes", "nodes/status"]
      operations: ["UPDATE"]
      scope: Cluster
  matchConditions:
    - name: not-a-kubelet
      expression: "!('system:nodes' in request.userInfo.groups)"
    - name: gpu-node
      expression: {{ include "gug.gpuNodeCondition" . | quote }}
    - name: labels-taints-or-uncordon
      expression: {{ include "gug.nodeChangeCondition" . | quote }}
{{- with include "gug.nodeExemptCondition" . }}
    - name: not-a-system-controller
      expression: {{ . | quote }}
{{- end }}
  failurePolicy: {{ .Values.webhook.nodeFailurePolicy }}
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# SUC's completion write (webhook/completions.md): only SUC's uncordon or
# plan-label completion of a GPU node reaches it (nodes/status too: a plan label
# set through the status subresource marks the node done like one set through
# the Node); every other SUC write keeps the Node webhook's exemption and never
# waits on the gate.
- name: completions.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/completions") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["nodes", "nodes/status"]
      operations: ["UPDATE"]
      scope: Cluster
  matchConditions:
    - name: suc-service-account
      expression: {{ include "gug.sucServiceAccount" . | quote }}
    - name: gpu-node
      expression: {{ include "gug.gpuNodeCondition" . | quote }}
    - name: uncordon-or-marked-done
      expression: "(oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false)) || object.metadata.?labels.orValue({}).exists(k, k.startsWith('plan.upgrade.cattle.io/') && object.metadata.labels[k] != 'disabled' && oldObject.metadata.?labels.orValue({})[?k].orValue('') != object.metadata.labels[k])"
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# Qualification record ConfigMaps, in the release namespace only; fail closed.
- name: records.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/records") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["configmaps"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          - {{ .Release.Namespace }}
  objectSelector:
    matchLabels:
      gpu-upgrade-gate.io/qualification: "true"
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# The halt record (webhook/halts.md): every write of that one ConfigMap,
# its deletion too, so a halt leaves it only by a reviewed clear.
- name: halts.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/halts") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["configmaps"]
      operations: ["CREATE", "UPDATE", "DELETE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          - {{ .Release.Namespace }}
  matchConditions:
    - name: halt-record
      expression: {{ include "gug.haltRecordWrite" . | quote }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# The GPU Operator's driver path (webhook/driver.md): ClusterPolicy and NVIDIADriver
# writes. CREATE and DELETE too: a new NVIDIADriver (or a ClusterPolicy deleted and
# created again) loads a driver, a deleted one unloads it. An UPDATE reaches the
# gate only when what runs on GPU nodes changes: the ClusterPolicy's driver or DCGM
# exporter section (any field, so one a newer operator adds is judged too), its
# validator section (the operator writes the validator DaemonSet from it), or an
# NVIDIADriver's spec. The operator's own writes (status, finalizers, labels) never
# do. A GPUCluster's DRA driver section too (its CREATE and DELETE: it loads
# and removes the DRA driver). Deleting this webhook configuration still always
# breaks glass.
- name: driver.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/driver") | nindent 4 }}
  rules:
    - apiGroups: ["nvidia.com"]
      apiVersions: ["v1"]
      resources: ["clusterpolicies"]
      operations: ["CREATE", "UPDATE", "DELETE"]
      scope: Cluster
    - apiGroups: ["nvidia.com"]
      apiVersions: ["v1alpha1"]
      resources: ["nvidiadrivers", "gpuclusters"]
      operations: ["CREATE", "UPDATE", "DELETE"]
      scope: Cluster
  matchConditions:
    - name: driver-spec-changed
      expression: >-
        request.operation != 'UPDATE' ||
        (request.resource.resource == 'clusterpolicies' ?
          (object.?spec.?driver.orValue({}) != oldObject.?spec.?driver.orValue({}) ||
           object.?spec.?dcgmExporter.orValue({}) != oldObject.?spec.?dcgmExporter.orValue({}) ||
           object.?spec.?validator.orValue({}) != oldObject.?spec.?validator.orValue({})) :
         request.resource.resource == 'gpuclusters' ?
          object.?spec.?draDriver.orValue({}) != oldObject.?spec.?draDriver.orValue({}) :
          object.?spec.orValue({}) != oldObject.?spec.orValue({}))
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# The GPU Operator's per-node driver step: its upgrade controller moving a
# node's nvidia.com/gpu-driver-upgrade-state label into pod-restart-required
# (or post-maintenance-required) is the write after which it deletes that
# node's driver Pod. Only that transition is sent, by whoever writes it, so
# every other write of the operator, kubelets and people stays away. A
# refusal keeps the node where it is; the operator retries on its own.
- name: driverstep.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/driver-step") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["nodes", "nodes/status"]
      operations: ["UPDATE"]
      scope: Cluster
  matchConditions:
    - name: driver-reload-starts
      expression: >-
        object.metadata.?labels[?'nvidia.com/gpu-driver-upgrade-state'].orValue('') in ['pod-restart-required', 'post-maintenance-required'] &&
        object.metadata.?labels[?'nvidia.com/gpu-driver-upgrade-state'].orValue('') != oldObject.metadata.?labels[?'nvidia.com/gpu-driver-upgrade-state'].orValue('')
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# An upgrade of the GPU Operator itself, in its namespace only: a new image
# of its Deployment (helm upgrade; or the Deployment deleted and created
# again), or the approval of an OLM InstallPlan for its CSV, at its creation
# too (OLM creates it approved under automatic approval); and the spec of a
# Subscription of its OLM package, which must say installPlanApproval: Manual.
# OLM's own Deployment write after an approved InstallPlan stays away (the
# approval was the reviewed step), and so does its creation of an approved
# InstallPlan when config.allowAutomaticOperatorApproval gives that review up.
- name: operator.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/operator") | nindent 4 }}
  rules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      resources: ["deployments"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
    - apiGroups: ["operators.coreos.com"]
      apiVersions: ["v1alpha1"]
      resources: ["installplans", "subscriptions"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          - {{ .Values.config.gpuOperator.namespace }}
  matchConditions:
    - name: operator-version-changes
      expression: >-
        {{- include "gug.operatorVersionChanges" . | nindent 8 }}
{{- with include "gug.notOLM" . }}
    - name: not-olm
      expression: {{ . | quote }}
{{- end }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# The per-node guard on SUC's upgrade Jobs (webhook/jobs.md). SUC creates each
# node's Job paused (parallelism 0) and raises parallelism once the node is in
# the Plan's status.applying; that write (or a Job created running) is the
# moment a node's upgrade starts, and the only Job write sent here: Jobs SUC
# labels with its Plan, in the SUC namespaces, written by a ServiceAccount of a
# SUC namespace, starting now. SUC's paused creates, relabels and deletes, and
# the Job controller's status writes, never wait on the gate. Anyone else's
# create, relabel or start of a Job with SUC's labels is sent too and refused
# (SUCJobForged): the gate reads such a Job as SUC's upgrade of its node. Fail:
# while the gate is down, a node's upgrade stays paused and SUC retries.
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
    - name: suc-starts-or-another-writes
      expression: {{ include "gug.sucJobWrite" . | quote }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# A Plan's status (webhook/planstatus.md) is SUC's record of its rollout, and
# the gate relies on each of its four fields, so nobody but SUC may change it:
# writes by anyone but a ServiceAccount of a SUC namespace that change applying,
# conditions, latestHash or latestVersion. Fail: while the gate is down, only SUC
# can change a Plan's status.
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
      expression: {{ include "gug.notSUC" . | quote }}
    - name: changes-status
      expression: "object.?status.?applying.orValue([]) != oldObject.?status.?applying.orValue([]) || object.?status.?conditions.orValue([]) != oldObject.?status.?conditions.orValue([]) || object.?status.?latestHash.orValue('') != oldObject.?status.?latestHash.orValue('') || object.?status.?latestVersion.orValue('') != oldObject.?status.?latestVersion.orValue('')"
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- if .Values.config.draDrivers }}
# A DRA driver's kubelet plugin (webhook/dradaemonsets.md): the configured
# draDrivers' DaemonSets, in their namespaces only, when one is created or
# deleted, its Pod template changes in any field (the DaemonSet controller then
# replaces the plugin on every node: an image is a new release, anything else
# a restart; scheduling that no longer selects a node removes the driver
# there), or its app.kubernetes.io/version label changes; and any other
# DaemonSet created or whose Pod template changes there, which must not run
# the driver's image, unless written by one of the driver's configured
# controllers (config.draDrivers[].controllers; any other ServiceAccount of
# the namespace is judged). The DaemonSet controller's status and the
# writes of the GPU Operator's own ServiceAccounts
# (webhook.gpuOperatorServiceAccounts, after its reviewed GPUCluster) and the
# namespace controller's deletes (after the reviewed deletion of the namespace)
# never reach the gate. Not rendered without config.draDrivers. Fail: while the
# gate is down, the plugin DaemonSet can be neither changed nor deleted.
- name: dradaemonsets.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/dra-daemonsets") | nindent 4 }}
  rules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      resources: ["daemonsets"]
      operations: ["CREATE", "UPDATE", "DELETE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          {{- include "gug.draDriverNamespaces" . | nindent 10 }}
  matchConditions:
    - name: dra-kubelet-plugin-or-another-daemonset
      expression: {{ include "gug.draPluginOrAnotherDaemonSet" . | quote }}
    - name: created-deleted-or-template-changes
      expression: >-
        request.operation != 'UPDATE' ||
        object.spec.template != oldObject.spec.template ||
        object.metadata.?labels[?'app.kubernetes.io/version'].orValue('') != oldObject.metadata.?labels[?'app.kubernetes.io/version'].orValue('')
    - name: not-gpu-operator
      expression: {{ include "gug.notGPUOperator" . | quote }}
    - name: not-the-namespace-controller
      expression: "request.operation != 'DELETE' || request.userInfo.username != 'system:serviceaccount:kube-system:namespace-controller'"
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- end }}
# The deletion of a namespace GPU drivers run in (webhook/namespaces.md): the
# namespace controller then deletes every Pod there on every node, and nothing
# is created again in a terminating namespace. The GPU Operator's namespace
# (config.gpuOperator.namespace, config.proof.validator.namespace) is judged
# as the unload of every GPU node's driver, a DRA driver's (config.draDrivers)
# as its plugin DaemonSet's deletion: held while their nodes hold GPUs or a
# rollout is in flight. No other namespace's deletion reaches the gate. Fail:
# while the gate is down, they stay.
- name: namespaces.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/namespaces") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["namespaces"]
      operations: ["DELETE"]
      scope: Cluster
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          {{- include "gug.driverNamespaces" . | nindent 10 }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
# The GPU Operator's validator DaemonSet (webhook/validatordaemonset.md): a
# validator Pod proves a node when that DaemonSet's UID controls it, so only
# the GPU Operator creates it or changes what its Pods run. Anyone else's
# CREATE, or UPDATE of its Pods' spec or labels, is sent and refused; the
# operator's own ServiceAccounts (webhook.gpuOperatorServiceAccounts) never
# reach the gate, nor does kubectl rollout restart. Fail: while the gate is
# down, only the GPU Operator writes it.
- name: validatordaemonset.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/validator-daemonset") | nindent 4 }}
  rules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      resources: ["daemonsets"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          - {{ .Values.config.proof.validator.namespace }}
  matchConditions:
    - name: validator-daemonset
      expression: {{ include "gug.validatorDaemonSet" . | quote }}
    - name: created-or-its-pods-change
      expression: "request.operation == 'CREATE' || object.spec.template.spec != oldObject.spec.template.spec || object.spec.template.?metadata.?labels.orValue({}) != oldObject.spec.template.?metadata.?labels.orValue({})"
    - name: not-gpu-operator
      expression: {{ include "gug.notGPUOperator" . | quote }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- if .Values.config.draDrivers }}
# Anything else that runs Pods in a DRA driver's namespace (webhook/draworkloads.md):
# a bare Pod (an ephemeral container added too), a Deployment, ReplicaSet,
# ReplicationController, StatefulSet, Job or CronJob, created or its Pod template
# changed, which must not run the driver's image with the node's filesystem in
# reach (a second kubelet plugin). The kube-controller-manager's controllers
# (their Pods follow a template judged here) and kubelets (static Pods) never
# reach the gate, nor do the GPU Operator's own ServiceAccounts and the driver's
# configured controllers (config.draDrivers[].controllers). Not rendered without
# config.draDrivers. Fail: while the gate is down, only they run Pods there.
- name: draworkloads.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/dra-workloads") | nindent 4 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["pods", "replicationcontrollers"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["pods/ephemeralcontainers"]
      operations: ["UPDATE"]
      scope: Namespaced
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      resources: ["deployments", "replicasets", "statefulsets"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
    - apiGroups: ["batch"]
      apiVersions: ["v1"]
      resources: ["jobs", "cronjobs"]
      operations: ["CREATE", "UPDATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          {{- include "gug.draDriverNamespaces" . | nindent 10 }}
  matchConditions:
    - name: not-a-pod-controller
      expression: "!(request.userInfo.username in ['system:kube-controller-manager', 'system:serviceaccount:kube-system:daemon-set-controller', 'system:serviceaccount:kube-system:deployment-controller', 'system:serviceaccount:kube-system:replicaset-controller', 'system:serviceaccount:kube-system:replication-controller', 'system:serviceaccount:kube-system:statefulset-controller', 'system:serviceaccount:kube-system:job-controller', 'system:serviceaccount:kube-system:cronjob-controller']) && !('system:nodes' in request.userInfo.groups)"
    - name: created-or-pods-change
      expression: >-
        request.operation == 'CREATE' ||
        (request.resource.resource == 'pods' ? object.spec != oldObject.spec :
         request.resource.resource == 'cronjobs' ? object.spec.jobTemplate != oldObject.spec.jobTemplate :
         object.spec.template != oldObject.spec.template)
    - name: not-gpu-operator
      expression: {{ include "gug.notGPUOperator" . | quote }}
    - name: not-a-dra-driver-controller
      expression: {{ include "gug.notADRAController" . | quote }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- end }}
# A DaemonSet of the GPU Operator's namespace deleted by a person
# (webhook/operatordaemonsets.md): its driver, device plugin or DCGM exporter
# DaemonSet deleted unloads that operand from every GPU node at once, judged
# as the namespace's deletion is (GPU holders, a rollout in flight). The GPU
# Operator's own ServiceAccounts, the namespace controller and the garbage
# collector never reach the gate. Fail: while the gate is down, they stay.
- name: operatordaemonsets.gpu-upgrade-gate.io
  clientConfig:
    {{- include "gug.clientConfig" (dict "root" . "path" "/validate/operator-daemonsets") | nindent 4 }}
  rules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      resources: ["daemonsets"]
      operations: ["DELETE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
          - {{ .Values.config.gpuOperator.namespace }}
  matchConditions:
    - name: not-gpu-operator
      expression: {{ include "gug.notGPUOperator" . | quote }}
    - name: not-a-system-controller
      expression: "!(request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller', 'system:serviceaccount:kube-system:generic-garbage-collector', 'system:kube-controller-manager'])"
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
{{- end }}
