package fleet

// WorkloadVersions are the cluster-wide GPU Operator and DCGM exporter
// versions, read from the images of their workloads. A review asks several
// times and the image reference parser is a regular expression, so an
// adapter reads them once per change of the images (VersionsOf) and hands
// them over (gate.Cluster.Versions): the engine keeps no cache of its own.
type WorkloadVersions struct {
	gpuOperatorImage, dcgmExporterImage string
	GPUOperator, DCGMExporter           string
}

// VersionsOf reads the versions from the GPU Operator's and the DCGM
// exporter's images.
func VersionsOf(gpuOperatorImage, dcgmExporterImage string) WorkloadVersions {
	// The operator's version is its tag: a digest pinned beside the tag
	// says which build, not which release.
	dcgm, _ := ImageVersion(dcgmExporterImage)
	return WorkloadVersions{gpuOperatorImage: gpuOperatorImage, dcgmExporterImage: dcgmExporterImage,
		GPUOperator: imageTag(gpuOperatorImage), DCGMExporter: dcgm}
}

// ReadFrom says whether the versions were read from exactly these images:
// versions of other images are not used.
func (v *WorkloadVersions) ReadFrom(gpuOperatorImage, dcgmExporterImage string) bool {
	return v.gpuOperatorImage == gpuOperatorImage && v.dcgmExporterImage == dcgmExporterImage
}
