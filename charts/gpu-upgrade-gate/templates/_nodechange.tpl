{{- /*
Generated from webhook/table.go (NodeChangeConditionFor) by
go test ./test/chart -run TestNodeChangeTemplateIsGenerated -update
Do not edit: change webhook/table.go and regenerate. The Node webhook's
labels-taints-or-uncordon match condition: labels, an uncordon, the moved-by
and cordon-handover annotations, or a taint that starts or stops a DaemonSet's
Pod written by anyone but the system and webhook.nodeTaintControllers.
*/ -}}
{{- define "gug.nodeChangeCondition" -}}
object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || (oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false)) || object.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/moved-by'].orValue('') != oldObject.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/moved-by'].orValue('') || object.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/cordon-handover'].orValue('') != oldObject.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/cordon-handover'].orValue('') || (!(request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username in ['system:kube-controller-manager', 'rke2-cloud-controller-manager', 'k3s-cloud-controller-manager'] || request.userInfo.username in [{{ include "gug.celList" (.Values.webhook.nodeTaintControllers | default list) }}]) && (object.spec.?taints.orValue([]).exists(t, t.effect == 'NoExecute' && !([t.key, t.effect, t.?value.orValue('')] in oldObject.spec.?taints.orValue([]).map(o, [o.key, o.effect, o.?value.orValue('')]))) || oldObject.spec.?taints.orValue([]).exists(t, t.effect in ['NoSchedule', 'NoExecute'] && !([t.key, t.effect, t.?value.orValue('')] in object.spec.?taints.orValue([]).map(o, [o.key, o.effect, o.?value.orValue('')])))))
{{- end }}
