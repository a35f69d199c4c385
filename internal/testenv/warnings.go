package testenv

import "sync"

// Warnings records the Warning headers the API server passes on from the
// webhook, as kubectl prints them. Set it as a rest.Config's WarningHandler.
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Take returns the warnings seen since the last Take and forgets them.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}
