package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

func (s *Server) decideHaltRecord(_ context.Context, req admission.Request) (gate.Decision, error) {
	hr := gate.HaltWriteRequest{Operation: string(req.Operation), User: userOf(req), Self: s.Self}
	if req.Operation != admissionv1.Delete {
		hr.New = &corev1.ConfigMap{}
		if err := decodeObject(req.Object.Raw, hr.New, "ConfigMap"); err != nil {
			return gate.Decision{}, fmt.Errorf("object: %w", err)
		}
	}
	if req.Operation != admissionv1.Create {
		hr.Old = &corev1.ConfigMap{}
		if err := decodeObject(req.OldObject.Raw, hr.Old, "ConfigMap"); err != nil {
			return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
		}
	}
	return gate.DecideHaltRecordWrite(s.Config, hr), nil
}

// haltKeeper is the leader-elected loop that keeps halts in the halt record
// (gate.KeepHalts): one replica writes, every replica's webhooks read it.
type haltKeeper struct {
	server *Server
	writer client.Writer
	every  time.Duration
	log    logr.Logger
}

// NeedLeaderElection: one writer of the halt record at a time.
func (k *haltKeeper) NeedLeaderElection() bool { return true }

func (k *haltKeeper) Start(ctx context.Context) error {
	k.log.Info("keeping halts", "record", k.server.Config.HaltRecordName(), "every", k.every)
	for {
		if err := k.turn(ctx); err != nil {
			k.log.Error(err, "halt record not written this turn")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(k.every):
		}
	}
}

// turn reads the record live (its resourceVersion guards the write against
// a concurrent clear), applies one KeepHalts step and writes the result.
func (k *haltKeeper) turn(ctx context.Context) error {
	cfg := k.server.Config
	cl, err := k.server.Facts.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("facts: %w", err)
	}
	var cm corev1.ConfigMap
	if err := k.server.Facts.Live.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Halts.ConfigMap}, &cm); err != nil {
		return fmt.Errorf("read the halt record %s (the chart creates it): %w", cfg.HaltRecordName(), err)
	}
	rec := cfg.ParseHaltRecord(&cm)
	if rec.Err != nil {
		return fmt.Errorf("the halt record %s does not parse, so every forward move is refused until a person repairs it (docs/proof.md): %w", cfg.HaltRecordName(), rec.Err)
	}
	next, changes := gate.KeepHalts(cfg, cl, rec, k.server.now())
	if len(changes) == 0 {
		// The record holds every halt seen: a write refused earlier no
		// longer leaves one unkept.
		noteHaltWrite(&k.server.Facts.haltWrite, nil)
		return nil
	}
	cm.Data = next.Data()
	for key := range rec.Clears {
		delete(cm.Annotations, gate.ClearAnnotation(key))
	}
	err = k.writer.Update(ctx, &cm)
	if !apierrors.IsConflict(err) {
		// A conflict is a concurrent clear: the next turn reads it.
		noteHaltWrite(&k.server.Facts.haltWrite, err)
	}
	if err != nil {
		return fmt.Errorf("update %s: %w", cfg.HaltRecordName(), err)
	}
	for _, c := range changes {
		k.log.Info("halt record", "change", c)
	}
	return nil
}

// haltWriter checks, on every replica, that the halt record can be written:
// each turn a dry-run write of the record as it is (the API server's
// authorization, validation and admission, the halts webhook included, with
// nothing stored). A record that is gone, immutable, or that the gate may no
// longer update fails closed on this replica until it can be written again,
// and gpu_upgrade_gate_halt_record_unwritable says so (an alert).
type haltWriter struct {
	server *Server
	writer client.Writer
	every  time.Duration
	log    logr.Logger
}

// NeedLeaderElection: every replica decides, so every replica checks.
func (w *haltWriter) NeedLeaderElection() bool { return false }

func (w *haltWriter) Start(ctx context.Context) error {
	for {
		err := w.probe(ctx)
		noteHaltWrite(&w.server.Facts.haltProbe, err)
		haltRecordUnwritable.Set(boolGauge(w.server.Facts.haltUnwritable() != nil))
		if err != nil {
			w.log.Error(err, "the halt record cannot be written: every forward move is refused until it can")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.every):
		}
	}
}

func (w *haltWriter) probe(ctx context.Context) error {
	cfg := w.server.Config
	var cm corev1.ConfigMap
	if err := w.server.Facts.Live.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Halts.ConfigMap}, &cm); err != nil {
		return fmt.Errorf("read %s (helm upgrade recreates it, or kubectl create configmap -n %s %s): %w", cfg.HaltRecordName(), cfg.Namespace, cfg.Halts.ConfigMap, err)
	}
	if cm.Immutable != nil && *cm.Immutable {
		return fmt.Errorf("%s is immutable: delete it (allowed while immutable) and let helm upgrade recreate it", cfg.HaltRecordName())
	}
	if err := w.writer.Update(ctx, &cm, client.DryRunAll); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("dry-run update of %s (the gate's ServiceAccount must be able to update it: the chart's rbac.yaml): %w", cfg.HaltRecordName(), err)
	}
	return nil
}

// haltedHardware is gpu_upgrade_gate_rollout_halted's value per hardware
// key: each record's hardware halted or not (all halted while the halt
// record cannot be read), and each halted hardware.
func haltedHardware(cl *gate.Cluster) map[string]bool {
	now := map[string]bool{}
	for _, e := range cl.Records {
		if e.Record != nil {
			now[gate.HardwareKey(e.Record.NormalizedHardware())] = cl.Halts.Err != nil
		}
	}
	for key := range cl.Halts.Halts {
		now[key] = true
	}
	return now
}
