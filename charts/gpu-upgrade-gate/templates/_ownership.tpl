{{- /*
Generated from gate/ownership.go (the ownership table) by
go test ./test/chart -run TestOwnershipTemplateIsGenerated -update
Do not edit: change gate/ownership.go and regenerate. The label keys of each
fact a Node exemption may list (config.exemptions[].facts), as CEL over k.
*/ -}}
{{- define "gug.factKeys.nfd-labels" -}}
k.startsWith('feature.node.kubernetes.io/')
{{- end }}
{{- define "gug.factKeys.gfd-labels" -}}
k == 'nvidia.com/gpu.count' || k == 'nvidia.com/gpu.product' || k == 'nvidia.com/gpu.memory' || k == 'nvidia.com/gpu.family' || k == 'nvidia.com/gpu.machine' || k == 'nvidia.com/gpu.mode' || k == 'nvidia.com/gpu.replicas' || k == 'nvidia.com/gpu.sharing-strategy' || k == 'nvidia.com/gpu.clique' || k == 'nvidia.com/gpu.multiprocessors' || k == 'nvidia.com/mig.capable' || k == 'nvidia.com/mps.capable' || k == 'nvidia.com/mig.strategy' || k == 'nvidia.com/vgpu.present' || k == 'nvidia.com/gfd.timestamp' || k.startsWith('nvidia.com/cuda.') || k.startsWith('nvidia.com/gpu.compute.') || k.startsWith('nvidia.com/gpu.slices.') || k.startsWith('nvidia.com/gpu.engines.') || k.startsWith('nvidia.com/mig-') || k.startsWith('nvidia.com/vgpu.host-driver-')
{{- end }}
{{- define "gug.factKeys.gpu-operator-state" -}}
k == 'nvidia.com/gpu.present' || k == 'nvidia.com/gpu-driver-upgrade-state' || k == 'nvidia.com/mig.config.state'
{{- end }}
{{- define "gug.factKeys.gpu-operator-inputs" -}}
k == 'nvidia.com/mig.config' || k.startsWith('nvidia.com/gpu.deploy.')
{{- end }}
{{- define "gug.factKeys.mode-labels" -}}
k == 'kube-dc.com/gpu.workload-mode' || k == 'kube-dc.com/gpu.expected-workload-mode' || k == 'nvidia.com/gpu.workload.config'
{{- end }}
{{- define "gug.factKeys.suc-plan-labels" -}}
k.startsWith('plan.upgrade.cattle.io/')
{{- end }}
{{- define "gug.factKeys.hostname" -}}
k == 'kubernetes.io/hostname'
{{- end }}
{{- define "gug.labelFacts" -}}
nfd-labels gfd-labels gpu-operator-state gpu-operator-inputs mode-labels suc-plan-labels hostname
{{- end }}
{{- define "gug.stepFacts" -}}
mode-labels
{{- end }}
