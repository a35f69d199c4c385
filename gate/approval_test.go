package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestRecordApproval: a record qualifies a Plan only when the record
// webhook attested an approval of exactly its data by someone other than
// its author, and the record's approvedBy names that approver; the
// requester is compared exactly with both attested identities.
func TestRecordApproval(t *testing.T) {
	attested := func(mod func(*qualification.Attestation), rmod ...func(*qualification.Record)) func(*scenario) {
		return func(s *scenario) {
			e := approved(record(rmod...))
			mod(&e.Attestation)
			s.cluster.Records["v100-r580"] = e
		}
	}
	approvedBy := func(name string) func(*qualification.Record) {
		return func(r *qualification.Record) { r.ApprovedBy = name }
	}
	cases := []struct {
		name   string
		mutate func(*scenario)
		want   []Code
		says   string
	}{
		{name: "approved by bob, written by carol, applied by alice", mutate: func(*scenario) {}},
		{name: "RecordNotApproved: a record written before attestation (no annotations)", mutate: func(s *scenario) {
			s.cluster.Records["v100-r580"] = RecordEntry{Record: record()}
		}, want: []Code{CodeRecordNotApproved}, says: "gpu-upgrade-gate.io/author=<their username>"},
		{name: "RecordNotApproved: written, not approved", mutate: attested(func(a *qualification.Attestation) { a.ApprovedBy, a.ApprovedSHA256 = "", "" }),
			want: []Code{CodeRecordNotApproved}, says: "nobody has approved its data yet"},
		{name: "RecordNotApproved: the data changed after the approval", mutate: attested(func(a *qualification.Attestation) { a.DataSHA256 = qualification.DataSHA256("other") }),
			want: []Code{CodeRecordNotApproved}, says: "which withdrew it"},
		{name: "RecordNotApproved: approved by its author", mutate: attested(func(a *qualification.Attestation) { a.Author = "bob" }),
			want: []Code{CodeRecordNotApproved}, says: "approved the data they wrote"},
		// alice writes "approved by bob" but the API server attests bob's
		// approval only if bob wrote it; each spelling differs from alice.
		{name: "RecordNotApproved: approvedBy bob, attested approver alice@example.com", mutate: attested(func(a *qualification.Attestation) { a.ApprovedBy = "alice@example.com" }),
			want: []Code{CodeRecordNotApproved}, says: `its approvedBy "bob" is not the attested approver "alice@example.com"`},
		{name: "RecordNotApproved: approvedBy with a Cyrillic а", mutate: attested(func(a *qualification.Attestation) { a.ApprovedBy = "alice" }, approvedBy("\u0430lice")),
			want: []Code{CodeRecordNotApproved, CodeSelfApproved}, says: "is not the attested approver"},
		{name: "RecordNotApproved: approvedBy differs in case", mutate: attested(func(a *qualification.Attestation) { a.ApprovedBy = "bob" }, approvedBy("Bob")),
			want: []Code{CodeRecordNotApproved}, says: "is not the attested approver"},
		{name: "approverAliases map approvedBy to the attested username", mutate: func(s *scenario) {
			s.cfg.ApproverAliases = map[string]string{"bob": "bob@corp.example"}
			attested(func(a *qualification.Attestation) { a.ApprovedBy = "bob@corp.example" })(s)
		}},
		{name: "RecordNotApproved: an alias of bob does not admit bob himself", mutate: func(s *scenario) {
			s.cfg.ApproverAliases = map[string]string{"bob": "bob@corp.example"}
		}, want: []Code{CodeRecordNotApproved}, says: "bob@corp.example"},
		// Two-person separation (the default, the seed's flow): the author
		// applies what a second person approved.
		{name: "the attested author applies the Plan (two-person)", mutate: func(s *scenario) { s.writer(recordAuthor) }},
		{name: "SelfApproved: the attested approver applies the Plan", mutate: func(s *scenario) { s.writer("bob") },
			want: []Code{CodeSelfApproved}, says: `"bob" approved record v100-r580-canary-1 and is also applying this Plan; someone other than its approver (its author may) must apply it (two-person rule)`},
		{name: "SelfApproved: the attested author applies the Plan (three-person)", mutate: func(s *scenario) {
			s.cfg.Separation = SeparationThreePerson
			s.writer(recordAuthor)
		}, want: []Code{CodeSelfApproved}, says: `"carol" wrote record v100-r580-canary-1 and is also applying this Plan; someone who neither wrote nor approved it must apply it (separation: three-person)`},
		{name: "SelfApproved: the attested approver applies the Plan (three-person)", mutate: func(s *scenario) {
			s.cfg.Separation = SeparationThreePerson
			s.writer("bob")
		}, want: []Code{CodeSelfApproved}, says: `"bob" approved record`},
		{name: "a third person applies the Plan (three-person)", mutate: func(s *scenario) { s.cfg.Separation = SeparationThreePerson }},
		{name: "a requester spelled like the approver in another case is someone else", mutate: func(s *scenario) { s.writer("Bob") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			if tc.says != "" {
				assert.Contains(t, d.Message(), tc.says)
			}
		})
	}
}

// TestRecordNotApprovedSaysHowToApprove: the message carries the command
// that approves exactly the stored data.
func TestRecordNotApprovedSaysHowToApprove(t *testing.T) {
	s := safeScenario(t)
	cm := written(record())
	e := approved(record())
	e.Attestation = qualification.AttestationOf(cm)
	s.cluster.Records["v100-r580"] = e
	d := s.decide()
	require.Equal(t, []Code{CodeRecordNotApproved}, d.Codes(), d.Message())
	assert.Contains(t, d.Blockers[0].Err.Detail, "kubectl annotate configmap -n gpu-upgrade-gate v100-r580 gpu-upgrade-gate.io/approved-by=bob gpu-upgrade-gate.io/approved-sha256="+qualification.DataSHA256(cm.Data[qualification.ConfigMapKey])+" --overwrite")
	assert.Equal(t, "metadata.annotations[gpu-upgrade-gate.io/qualification]", d.Blockers[0].Err.Field)
}

// TestRecordAttestation: the record webhook accepts author and approval
// annotations only from the users they name (webhook/records.md).
func TestRecordAttestation(t *testing.T) {
	data := written(record())
	sha := qualification.DataSHA256(data.Data[qualification.ConfigMapKey])
	annotate := func(cm *corev1.ConfigMap, kv ...string) *corev1.ConfigMap {
		cm = cm.DeepCopy()
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(cm.Annotations, kv[i])
				continue
			}
			cm.Annotations[kv[i]] = kv[i+1]
		}
		return cm
	}
	approval := func(by, digest string) *corev1.ConfigMap {
		return annotate(data, qualification.AnnotationApprovedBy, by, qualification.AnnotationApprovedSHA256, digest)
	}
	edited := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		cm = cm.DeepCopy()
		cm.Data[qualification.ConfigMapKey] = replaceOnce(cm.Data[qualification.ConfigMapKey], "change-record-42", "change-record-43")
		return cm
	}
	unlabelled := data.DeepCopy()
	delete(unlabelled.Labels, qualification.ConfigMapLabel)
	cases := []struct {
		name     string
		old, cm  *corev1.ConfigMap
		user     string
		want     []Code
		says     string
		warns    string
		revoking bool
	}{
		{name: "the author creates the record", cm: data, user: recordAuthor},
		{name: "AttestationForged: created with someone else as author", cm: data, user: "alice", want: []Code{CodeAttestationForged}, says: `must be the requester "alice"`},
		{name: "AttestationForged: created without an author", cm: annotate(data, qualification.AnnotationAuthor, ""), user: recordAuthor, want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: created with the approval pre-filled", cm: approval("bob", sha), user: recordAuthor, want: []Code{CodeAttestationForged}, says: "an approval is a write of its own"},
		{name: "AttestationForged: the label added (judged as a create) with the approval pre-filled", old: unlabelled, cm: approval("bob", sha), user: recordAuthor, want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: the label added by someone else than the author", old: unlabelled, cm: data, user: "alice", want: []Code{CodeAttestationForged}},
		{name: "bob approves carol's data", old: data, cm: approval("bob", sha), user: "bob"},
		{name: "AttestationForged: approval by the author", old: data, cm: annotate(data, qualification.AnnotationApprovedBy, recordAuthor, qualification.AnnotationApprovedSHA256, sha), user: recordAuthor,
			want: []Code{CodeAttestationForged}, says: "so cannot approve it"},
		{name: "AttestationForged: approval naming bob, written by alice", old: data, cm: approval("bob", sha), user: "alice", want: []Code{CodeAttestationForged}, says: `only "bob" can approve`},
		{name: "AttestationForged: alice approves as alice@example.com", old: data, cm: approval("alice@example.com", sha), user: "alice", want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: alice approves with a Cyrillic а", old: data, cm: approval("\u0430lice", sha), user: "alice", want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: Bob is not bob", old: data, cm: approval("bob", sha), user: "Bob", want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: the author approves under another spelling", old: data, cm: annotate(data, qualification.AnnotationApprovedBy, "Carol", qualification.AnnotationApprovedSHA256, sha), user: "alice",
			want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: approval of other data", old: data, cm: approval("bob", qualification.DataSHA256("other")), user: "bob", want: []Code{CodeAttestationForged}, says: "is not the SHA-256 of data.qualification.yaml"},
		{name: "AttestationForged: approval of a record with no author", old: annotate(data, qualification.AnnotationAuthor, ""), cm: annotate(approval("bob", sha), qualification.AnnotationAuthor, ""), user: "bob",
			want: []Code{CodeAttestationForged}, says: "nobody is attested to have written its data"},
		{name: "AttestationForged: approval in the write that changes the data", old: data, cm: approval("bob", qualification.DataSHA256(edited(data).Data[qualification.ConfigMapKey])), user: "bob",
			want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: data changed by alice with carol as author", old: data, cm: edited(data), user: "alice", want: []Code{CodeAttestationForged}, says: "changes the data of"},
		{name: "the author changes the data", old: data, cm: edited(data), user: recordAuthor},
		{name: "alice changes the data as its new author", old: data, cm: annotate(edited(data), qualification.AnnotationAuthor, "alice"), user: "alice"},
		{name: "a data change leaves the approval stale: withdrawn, with a warning", old: approval("bob", sha), cm: edited(approval("bob", sha)), user: recordAuthor, warns: "withdraws the approval by \"bob\""},
		{name: "AttestationForged: the data changed back keeps an approval it withdrew", old: edited(approval("bob", sha)), cm: approval("bob", sha), user: recordAuthor,
			want: []Code{CodeAttestationForged}, says: "a change of data or author withdraws the approval"},
		{name: "AttestationForged: the author changed alone by someone else", old: approval("bob", sha), cm: annotate(approval("bob", sha), qualification.AnnotationAuthor, "dave"), user: "alice", want: []Code{CodeAttestationForged}},
		{name: "AttestationForged: the approver takes authorship and keeps the approval", old: approval("bob", sha), cm: annotate(approval("bob", sha), qualification.AnnotationAuthor, "bob"), user: "bob",
			want: []Code{CodeAttestationForged}, says: "changes the author of"},
		{name: "anyone who may write the record withdraws the approval", old: approval("bob", sha), cm: data, user: "alice"},
		{name: "a write that changes nothing attested", old: approval("bob", sha), cm: annotate(approval("bob", sha), "note", "x"), user: "alice"},
		{name: "a withdrawn record by someone else than the author must name them", old: data, cm: written(record(func(r *qualification.Record) { r.State = "withdrawn" })), user: "alice",
			want: []Code{CodeAttestationForged, CodeRecordNotQualified}},
		{name: "the author withdraws the record (revokes)", old: data, cm: written(record(func(r *qualification.Record) { r.State = "withdrawn" })), user: recordAuthor,
			want: []Code{CodeRecordNotQualified}, revoking: true},
		{name: "AttestationForged: a request without a user", cm: annotate(data, qualification.AnnotationAuthor, ""), user: "", want: []Code{CodeAttestationForged}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideRecord(DefaultConfig(), RecordRequest{ConfigMap: tc.cm, Old: tc.old, Update: tc.old != nil, User: UserInfo{Name: tc.user, Groups: []string{"system:masters"}}, Now: testNow})
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0 || tc.revoking, d.Allowed, d.Message())
			if tc.says != "" {
				assert.Contains(t, d.Message(), tc.says)
			}
			if tc.warns != "" {
				assert.Contains(t, d.Warnings, "gpu-upgrade-gate: this write withdraws the approval by \"bob\" of record ConfigMap gpu-upgrade-gate/v100-r580: it approved data with SHA-256 "+sha+", the data now has "+qualification.DataSHA256(tc.cm.Data[qualification.ConfigMapKey])+"; the approver approves it again with kubectl annotate")
			}
		})
	}
}
