package fleet

import "github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"

// RecordEntry is a record ConfigMap as loaded: the record, or why it failed.
type RecordEntry struct {
	Record *qualification.Record
	Err    error
	// Attestation is who wrote and who approved the ConfigMap's data, as the
	// record webhook attested it (empty for a record file).
	Attestation qualification.Attestation
}
