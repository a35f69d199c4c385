{{- /*
Generated from the webhook table (webhook/table.go) by
go test ./test/chart -run TestProbeTemplateIsGenerated -update
Do not edit: change webhook/table.go and regenerate. The reviews the probe
Job (templates/hooks/probe.yaml) posts, one a row of the table: a YAML list
of the path, the environment variable that carries the review, and a minimal
AdmissionReview of the row's first resource and operation. Called with a
dict of "root" (the chart's context) and "uid" (the probe's uid).
*/ -}}
{{- define "gug.probeReviews" -}}
{{- $root := .root }}
{{- $uid := .uid }}
- path: /validate/plans
  env: REVIEW_PLANS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"upgrade.cattle.io","version":"v1","kind":"Plan"},"resource":{"group":"upgrade.cattle.io","version":"v1","resource":"plans"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid (first $root.Values.config.sucNamespaces) | quote }}
- path: /validate/nodes
  env: REVIEW_NODES
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"","version":"v1","kind":"Node"},"resource":{"group":"","version":"v1","resource":"nodes"},"name":%[1]q,"operation":"UPDATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"v1","kind":"Node","metadata":{"name":%[1]q}},"oldObject":{"apiVersion":"v1","kind":"Node","metadata":{"name":%[1]q}},"options":null}}` $uid | quote }}
- path: /validate/completions
  env: REVIEW_COMPLETIONS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"","version":"v1","kind":"Node"},"resource":{"group":"","version":"v1","resource":"nodes"},"name":%[1]q,"operation":"UPDATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"v1","kind":"Node","metadata":{"name":%[1]q}},"oldObject":{"apiVersion":"v1","kind":"Node","metadata":{"name":%[1]q}},"options":null}}` $uid | quote }}
- path: /validate/records
  env: REVIEW_RECORDS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid $root.Release.Namespace | quote }}
- path: /validate/halts
  env: REVIEW_HALTS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid $root.Release.Namespace | quote }}
- path: /validate/driver
  env: REVIEW_DRIVER
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"nvidia.com","version":"v1","kind":"ClusterPolicy"},"resource":{"group":"nvidia.com","version":"v1","resource":"clusterpolicies"},"name":%[1]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"nvidia.com/v1","kind":"ClusterPolicy","metadata":{"name":%[1]q}},"oldObject":null,"options":null}}` $uid | quote }}
- path: /validate/driver-step
  env: REVIEW_DRIVER_STEP
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"","version":"v1","kind":"Node"},"resource":{"group":"","version":"v1","resource":"nodes"},"name":%[1]q,"operation":"UPDATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"v1","kind":"Node","metadata":{"name":%[1]q}},"oldObject":{"apiVersion":"v1","kind":"Node","metadata":{"name":%[1]q}},"options":null}}` $uid | quote }}
- path: /validate/operator
  env: REVIEW_OPERATOR
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid $root.Values.config.gpuOperator.namespace | quote }}
- path: /validate/jobs
  env: REVIEW_JOBS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"batch","version":"v1","kind":"Job"},"resource":{"group":"batch","version":"v1","resource":"jobs"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid (first $root.Values.config.sucNamespaces) | quote }}
- path: /validate/plan-status
  env: REVIEW_PLAN_STATUS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"upgrade.cattle.io","version":"v1","kind":"Plan"},"resource":{"group":"upgrade.cattle.io","version":"v1","resource":"plans"},"subResource":"status","name":%[1]q,"namespace":%[2]q,"operation":"UPDATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":%[1]q,"namespace":%[2]q}},"options":null}}` $uid (first $root.Values.config.sucNamespaces) | quote }}
- path: /validate/dra-daemonsets
  env: REVIEW_DRA_DAEMONSETS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"apps","version":"v1","kind":"DaemonSet"},"resource":{"group":"apps","version":"v1","resource":"daemonsets"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid (first (default (list (dict "namespace" $root.Release.Namespace)) $root.Values.config.draDrivers)).namespace | quote }}
- path: /validate/namespaces
  env: REVIEW_NAMESPACES
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"","version":"v1","kind":"Namespace"},"resource":{"group":"","version":"v1","resource":"namespaces"},"name":%[1]q,"namespace":%[2]q,"operation":"DELETE","userInfo":{"username":%[1]q},"object":null,"oldObject":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%[1]q,"namespace":%[2]q}},"options":null}}` $uid $root.Values.config.gpuOperator.namespace | quote }}
- path: /validate/validator-daemonset
  env: REVIEW_VALIDATOR_DAEMONSET
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"apps","version":"v1","kind":"DaemonSet"},"resource":{"group":"apps","version":"v1","resource":"daemonsets"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid $root.Values.config.proof.validator.namespace | quote }}
- path: /validate/dra-workloads
  env: REVIEW_DRA_WORKLOADS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"name":%[1]q,"namespace":%[2]q,"operation":"CREATE","userInfo":{"username":%[1]q},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":%[1]q,"namespace":%[2]q}},"oldObject":null,"options":null}}` $uid (first (default (list (dict "namespace" $root.Release.Namespace)) $root.Values.config.draDrivers)).namespace | quote }}
- path: /validate/operator-daemonsets
  env: REVIEW_OPERATOR_DAEMONSETS
  review: {{ printf `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":%[1]q,"kind":{"group":"apps","version":"v1","kind":"DaemonSet"},"resource":{"group":"apps","version":"v1","resource":"daemonsets"},"name":%[1]q,"namespace":%[2]q,"operation":"DELETE","userInfo":{"username":%[1]q},"object":null,"oldObject":{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":%[1]q,"namespace":%[2]q}},"options":null}}` $uid $root.Values.config.gpuOperator.namespace | quote }}
{{- end }}
