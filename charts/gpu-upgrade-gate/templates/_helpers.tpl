{{/* Name of the chart, or nameOverride. */}}
{{- define "gug.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name: fullnameOverride, else "<release>" when it already
contains the chart name, else "<release>-<name>". At most 52 characters, so
suffixes such as "-selfsigned" keep names within 63.
*/}}
{{- define "gug.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := include "gug.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gug.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "gug.labels" -}}
helm.sh/chart: {{ include "gug.chart" . }}
app.kubernetes.io/name: {{ include "gug.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-upgrade-gate
{{- end }}

{{/*
Selector labels of the webhook's pods. The component keeps the hook Jobs'
pods out of the Service, the PDB and the NetworkPolicy.
*/}}
{{- define "gug.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gug.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "gug.serviceName" -}}{{ include "gug.fullname" . }}{{- end }}
{{- define "gug.serviceAccountName" -}}{{ include "gug.fullname" . }}{{- end }}
{{- define "gug.servingCertName" -}}{{ include "gug.fullname" . }}-serving{{- end }}

{{/* The TLS Secret mounted at /tls. */}}
{{- define "gug.tlsSecretName" -}}
{{- if .Values.tls.secretName }}{{ .Values.tls.secretName }}{{ else }}{{ include "gug.fullname" . }}-tls{{ end }}
{{- end }}

{{/* image reference: repository@digest, else repository:tag. */}}
{{- define "gug.imageRef" -}}
{{- if .digest }}{{ .repository }}@{{ .digest }}{{ else }}{{ .repository }}:{{ .tag }}{{ end }}
{{- end }}

{{- define "gug.image" -}}
{{- include "gug.imageRef" (dict "repository" .Values.image.repository "digest" .Values.image.digest "tag" (default .Chart.AppVersion .Values.image.tag)) }}
{{- end }}

{{- define "gug.hookImage" -}}
{{- include "gug.imageRef" .Values.hooks.image }}
{{- end }}

{{/*
Fails rendering on settings the schema cannot see: kube-system as the
release namespace (the record webhook would then match there), or incomplete
own-CA settings.
*/}}
{{- define "gug.validate" -}}
{{- $validatorNS := .Values.config.proof.validator.namespace }}
{{- $operatorThere := false }}
{{- range .Values.webhook.gpuOperatorServiceAccounts }}{{ if hasPrefix (printf "system:serviceaccount:%s:" $validatorNS) . }}{{ $operatorThere = true }}{{ end }}{{ end }}
{{- if not $operatorThere }}
{{- fail (printf "webhook.gpuOperatorServiceAccounts names no ServiceAccount of config.proof.validator.namespace %q: only those may create the validator DaemonSet (webhook/validatordaemonset.md), so the GPU Operator would be refused its own; name its ServiceAccount, e.g. system:serviceaccount:%s:gpu-operator" $validatorNS $validatorNS) }}
{{- end }}
{{- range $i, $d := .Values.config.draDrivers }}
{{- if and (eq $d.name "gpu.nvidia.com") (not (hasKey $d "controllers")) }}
{{- fail (printf "config.draDrivers[%d] (gpu.nvidia.com) names no controllers: NVIDIA's ComputeDomain controller creates DaemonSets of the driver's image in %s, which the gate refuses (DRAPluginForged) from anyone not listed; name its username, e.g. controllers: [system:serviceaccount:%s:nvidia-dra-driver-gpu-service-account-controller] (the driver's chart names it <release>-service-account-controller), or controllers: [] when ComputeDomains are off" $i $d.namespace $d.namespace) }}
{{- end }}
{{- end }}
{{- if eq .Release.Namespace "kube-system" }}
{{- fail "install gpu-upgrade-gate into its own namespace, not kube-system: its record webhook matches ConfigMaps in the release namespace" }}
{{- end }}
{{- if not .Values.tls.certManager.enabled }}
{{- if not .Values.tls.secretName }}
{{- fail "tls.certManager.enabled=false needs tls.secretName: the kubernetes.io/tls Secret (tls.crt, tls.key) the webhook serves" }}
{{- end }}
{{- if not (hasPrefix "-----BEGIN CERTIFICATE-----" (trim .Values.tls.caBundle)) }}
{{- fail "tls.certManager.enabled=false needs tls.caBundle: the PEM of the CA that signed the serving certificate" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A CEL string literal: single-quoted, with backslashes and quotes escaped, so a
user name can never break out of the match condition.
*/}}
{{- define "gug.celString" -}}
'{{ . | replace "\\" "\\\\" | replace "'" "\\'" }}'
{{- end }}

{{/* A CEL list of string literals. */}}
{{- define "gug.celList" -}}
{{- $items := list }}
{{- range . }}{{ $items = append $items (include "gug.celString" .) }}{{ end }}
{{- join ", " $items }}
{{- end }}

{{/*
Match conditions the webhook table (webhook/table.go) renders from values:
each template is one CEL expression, spliced into the generated
templates/_webhooks.tpl.
*/}}
{{/*
Node webhook: the exempt system controllers (users and groups of Node
exemptions that namespaces and matchLabels do not narrow); nothing when there
are none.
*/}}
{{/* Completions webhook (webhook/completions.md): SUC's ServiceAccounts. */}}
{{- define "gug.sucServiceAccount" -}}
{{- printf "request.userInfo.username in [%s]" (include "gug.celList" .Values.webhook.sucServiceAccounts) }}
{{- end }}

{{/* The groups of the ServiceAccounts of the SUC namespaces, a CEL list: SUC, as the API server authenticates it. */}}
{{- define "gug.sucGroups" -}}
{{- $groups := list }}
{{- range .Values.config.sucNamespaces }}
{{- $groups = append $groups (printf "system:serviceaccounts:%s" .) }}
{{- end }}
{{- include "gug.celList" $groups }}
{{- end }}

{{/* Job webhook: written by SUC. */}}
{{- define "gug.writtenBySUC" -}}
{{- printf "request.userInfo.groups.exists(g, g in [%s])" (include "gug.sucGroups" .) }}
{{- end }}

{{/* Job webhook: SUC's start of its Job, or anyone else's create, relabel or
start of a Job with SUC's labels (SUCJobForged). The garbage collector's and
others' writes that change neither labels nor start stay away. */}}
{{- define "gug.sucJobWrite" -}}
{{- $starts := "object.spec.?parallelism.orValue(1) > 0 && !object.spec.?suspend.orValue(false) && (request.operation == 'CREATE' || oldObject.spec.?parallelism.orValue(1) == 0 || oldObject.spec.?suspend.orValue(false))" -}}
{{- printf "(%s) ? (%s) : (request.operation == 'CREATE' || object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || (%s))" (include "gug.writtenBySUC" .) $starts $starts }}
{{- end }}

{{/* Plan status webhook: written by anyone but SUC. */}}
{{- define "gug.notSUC" -}}
{{- printf "!request.userInfo.groups.exists(g, g in [%s])" (include "gug.sucGroups" .) }}
{{- end }}

{{/* Halt webhook: the halt record, by name. */}}
{{- define "gug.haltRecordWrite" -}}
{{- printf "(request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name) == '%s'" .Values.config.halts.configMap }}
{{- end }}

{{/* DRA plugin webhook: the namespaces of config.draDrivers, each once, as a YAML list. */}}
{{- define "gug.draDriverNamespaces" -}}
{{- $ns := list }}
{{- range .Values.config.draDrivers }}{{ $ns = append $ns .namespace }}{{ end }}
{{- toYaml (uniq $ns) }}
{{- end }}

{{/* Namespaces webhook: the namespaces GPU drivers run in, each once (webhook.DriverNamespaces): the GPU Operator's, its validator's, the DRA drivers'. */}}
{{- define "gug.driverNamespaces" -}}
{{- $ns := list .Values.config.gpuOperator.namespace }}
{{- with .Values.config.proof.validator.namespace }}{{ $ns = append $ns . }}{{ end }}
{{- range .Values.config.draDrivers }}{{ $ns = append $ns .namespace }}{{ end }}
{{- toYaml (uniq $ns) }}
{{- end }}

{{/* DRA plugin webhook: the configured kubelet-plugin DaemonSets, by namespace/name (a DELETE has no object, only its oldObject). */}}
{{- define "gug.draKubeletPlugin" -}}
{{- $names := list }}
{{- range .Values.config.draDrivers }}{{ $names = append $names (printf "%s/%s" .namespace .daemonSet) }}{{ end }}
{{- printf "request.namespace + '/' + (request.operation == 'DELETE' ? oldObject : object).metadata.name in [%s]" (include "gug.celList" $names) }}
{{- end }}

{{/*
The DRA drivers' configured controllers (config.draDrivers[].controllers),
each as <namespace>/<username> (a controller is exempt in its driver's
namespace alone), a CEL list; webhook.DRAControllers builds the same.
*/}}
{{- define "gug.draControllers" -}}
{{- $c := list }}
{{- range .Values.config.draDrivers }}{{ $ns := .namespace }}{{ range .controllers }}{{ $c = append $c (printf "%s/%s" $ns .) }}{{ end }}{{ end }}
{{- include "gug.celList" (uniq $c) }}
{{- end }}

{{/* Written by none of the DRA drivers' configured controllers in their namespaces. */}}
{{- define "gug.notADRAController" -}}
{{- printf "!((request.namespace + '/' + request.userInfo.username) in [%s])" (include "gug.draControllers" .) }}
{{- end }}

{{/*
DRA plugin webhook: a configured kubelet plugin, or another DaemonSet of its
namespace created or changed (never deleted) by anyone but the driver's
configured controllers (e.g. NVIDIA's ComputeDomain controller, which
creates its daemons' DaemonSets): it must not run the driver's image
(DRAPluginForged). Another ServiceAccount of the namespace is judged.
*/}}
{{- define "gug.draPluginOrAnotherDaemonSet" -}}
{{- printf "%s || (request.operation != 'DELETE' && %s)" (include "gug.draKubeletPlugin" .) (include "gug.notADRAController" .) }}
{{- end }}

{{/* Validator webhook: the GPU Operator's validator DaemonSet, by name (config.proof.validator). */}}
{{- define "gug.validatorDaemonSet" -}}
{{- printf "object.metadata.name == %s" (include "gug.celString" .Values.config.proof.validator.daemonSet) }}
{{- end }}

{{/*
DRA plugin webhook: not the GPU Operator's own write (its configured
ServiceAccounts by name, not every ServiceAccount of its namespace), which
follows the GPUCluster the driver webhook judged.
*/}}
{{- define "gug.notGPUOperator" -}}
{{- printf "!(request.userInfo.username in [%s])" (include "gug.celList" .Values.webhook.gpuOperatorServiceAccounts) }}
{{- end }}

{{/*
Operator webhook: a new image of the operator's Deployment, or the approval
of an InstallPlan for its CSV.
*/}}
{{- define "gug.operatorVersionChanges" -}}
{{- $csv := include "gug.celString" (printf "%s.v" .Values.config.gpuOperatorCSV) -}}
request.resource.resource == 'deployments' ?
  (object.metadata.name == {{ include "gug.celString" .Values.config.gpuOperator.name }} && (request.operation == 'CREATE' ||
   object.spec.template.spec.containers.map(c, c.image) != oldObject.spec.template.spec.containers.map(c, c.image))) :
request.resource.resource == 'subscriptions' ?
  (object.?spec.?name.orValue('') == {{ include "gug.celString" .Values.config.gpuOperatorPackage }} &&
   (request.operation == 'CREATE' || object.?spec.orValue({}) != oldObject.?spec.orValue({}))) :
  (object.?spec.?approved.orValue(false) &&
   object.?spec.?clusterServiceVersionNames.orValue([]).exists(n, n.startsWith({{ $csv }})) &&
   (request.operation == 'CREATE' || !oldObject.?spec.?approved.orValue(false) ||
    object.spec.clusterServiceVersionNames.filter(n, n.startsWith({{ $csv }})) != oldObject.?spec.?clusterServiceVersionNames.orValue([]).filter(n, n.startsWith({{ $csv }}))))
{{- end }}

{{/*
Operator webhook: not OLM's Deployment write (nor, when
config.allowAutomaticOperatorApproval gives that review up, OLM's creation of
an InstallPlan); nothing without olmGroups.
*/}}
{{- define "gug.notOLM" -}}
{{- with .Values.webhook.olmGroups }}
{{- if $.Values.config.allowAutomaticOperatorApproval }}
{{- printf "(request.resource.resource != 'deployments' && !(request.resource.resource == 'installplans' && request.operation == 'CREATE')) || ![%s].exists(g, g in request.userInfo.groups)" (include "gug.celList" .) }}
{{- else }}
{{- printf "request.resource.resource != 'deployments' || ![%s].exists(g, g in request.userInfo.groups)" (include "gug.celList" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Node webhook's not-a-system-controller condition (gate.Config.NodeExemptCondition
builds the same string; test/chart holds them equal): for each Node exemption
that namespaces and matchLabels do not narrow, a write is sent unless its
identity made it and it changes only the facts the exemption lists (the label
keys of every other fact and of the step facts, gug.factKeys.<fact> and
gug.stepFacts generated from gate/ownership.go, and an uncordon unless cordon
is listed).
*/}}
{{- define "gug.nodeExemptCondition" -}}
{{- $root := . }}
{{- $conds := list }}
{{- range .Values.config.exemptions }}
{{- if and (has "nodes" .resources) (not .matchLabels) (not .namespaces) }}
{{- $facts := .facts | default list }}
{{- $who := list }}
{{- if .users }}
{{- $who = append $who (printf "request.userInfo.username in [%s]" (include "gug.celList" .users)) }}
{{- end }}
{{- if .groups }}
{{- $who = append $who (printf "request.userInfo.groups.exists(g, g in [%s])" (include "gug.celList" .groups)) }}
{{- end }}
{{- $keys := list }}
{{- $steps := splitList " " (include "gug.stepFacts" $root) }}
{{- range splitList " " (include "gug.labelFacts" $root) }}
{{- if or (not (has . $facts)) (has . $steps) }}
{{- $keys = append $keys (include (printf "gug.factKeys.%s" .) $root) }}
{{- end }}
{{- end }}
{{- $out := list }}
{{- if $keys }}
{{- $p := printf "(%s)" (join " || " $keys) }}
{{- $out = append $out (printf "object.metadata.?labels.orValue({}).exists(k, %s && (!(k in oldObject.metadata.?labels.orValue({})) || oldObject.metadata.labels[k] != object.metadata.labels[k]))" $p) }}
{{- $out = append $out (printf "oldObject.metadata.?labels.orValue({}).exists(k, %s && !(k in object.metadata.?labels.orValue({})))" $p) }}
{{- end }}
{{- if not (has "cordon" $facts) }}
{{- $out = append $out "(oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false))" }}
{{- end }}
{{- if not $out }}
{{- $out = list "false" }}
{{- end }}
{{- $conds = append $conds (printf "(!(%s) || %s)" (join " || " $who) (join " || " $out)) }}
{{- end }}
{{- end }}
{{- join " && " $conds }}
{{- end }}

{{/* A webhook's clientConfig: the Service (or webhook.url), and the CA bundle when it is supplied. */}}
{{- define "gug.clientConfig" -}}
{{- if .root.Values.webhook.url -}}
url: {{ printf "%s%s" .root.Values.webhook.url .path | quote }}
{{- else -}}
service:
  name: {{ include "gug.serviceName" .root }}
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: {{ .root.Values.service.port }}
{{- end }}
{{- if not .root.Values.tls.certManager.enabled }}
caBundle: {{ .root.Values.tls.caBundle | trim | b64enc }}
{{- end }}
{{- end }}

{{/* Pod and container security of the hook Jobs: the restricted profile. */}}
{{- define "gug.hookPodSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}
{{- define "gug.hookContainerSecurity" -}}
securityContext:
  runAsNonRoot: true
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  privileged: false
  capabilities:
    drop:
      - ALL
  seccompProfile:
    type: RuntimeDefault
resources:
  requests:
    cpu: 10m
    memory: 16Mi
  limits:
    memory: 64Mi
{{- end }}
