// Package loadgen drives a running `gpu-upgrade-gate serve` the way the API
// server does: AdmissionReviews POSTed over TLS on keep-alive HTTP/1.1
// connections, each with its own UID, with a timeout. It offers reviews at a
// fixed rate (open loop: latency counts from the scheduled send time, so a
// server that falls behind shows it as queueing) or flat out (N workers,
// closed loop), for a bounded time, and checks every answer against the
// decision the engine gives the same review for the fleet's state
// (internal/fleetgen). cmd/loadgen is the command; the scale tests call Run.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// Options of one run.
type Options struct {
	// URL is the server's base URL, e.g. https://127.0.0.1:9443.
	URL string
	// CA is the PEM bundle that signs the serving certificate (the
	// webhook configuration's caBundle).
	CA []byte
	// Reviews are sent round-robin, in order.
	Reviews []fleetgen.Review
	// Rate is the offered load in reviews per second; 0 sends flat out.
	Rate float64
	// Workers are the concurrent senders (flat out), or the most requests in
	// flight at a fixed rate (default 64); each keeps its connection alive.
	Workers int
	// Duration bounds the run (required; at most 10 minutes).
	Duration time.Duration
	// Timeout is the per-request timeout (default 5s, the webhook
	// configuration's timeoutSeconds).
	Timeout time.Duration
	// PID is the server's process, for its memory (0: not read).
	PID int
	// Judge classifies each answer (default: Expected).
	Judge func(*Result) Verdict
	// OnResult, if set, sees every result (from several goroutines).
	OnResult func(*Result)
	// Warmup sends each review once before the clock starts, and fails the
	// run if one is answered wrongly.
	Warmup bool
	// Stop, when closed, ends the run before Duration (in-flight requests
	// still finish).
	Stop <-chan struct{}
}

// Result is one review's round trip.
type Result struct {
	Review *fleetgen.Review
	// Scheduled is when the request was due (the send time when flat out).
	Scheduled, Sent, Done time.Time
	Status                int
	Allowed               bool
	// Codes are the reason codes from the audit annotations.
	Codes   []string
	Message string
	// AnswerCode is the status code inside the AdmissionReview's answer
	// (response.status.code; 0 when it has none).
	AnswerCode int
	Err        error
}

// Latency is from the scheduled send to the answer.
func (r *Result) Latency() time.Duration { return r.Done.Sub(r.Scheduled) }

// Verdict is how an answer is counted.
type Verdict int

const (
	// Correct: the expected decision.
	Correct Verdict = iota
	// FailClosed: denied where the fleet's state says allow, with a reason a
	// fault explains (FactsMissing, RecordMissing); a Judge decides when
	// that is acceptable.
	FailClosed
	// Wrong: another decision than expected; an allow that should be a
	// denial is always wrong.
	Wrong
	// Failed: no answer, a transport error, or an HTTP status other than 200.
	Failed
	// Shed: the gate's overload answer (webhook/limits.go: a denial with
	// status 429, "the gate is busy"), given without reading the review. It
	// is neither right nor wrong about the review, so it has its own count;
	// only a denial can be shed: an allow is judged like any other answer.
	Shed
)

// busyCode is the status code of the gate's overload denial.
const busyCode = http.StatusTooManyRequests

// IsShed says whether r is the gate's overload denial.
func IsShed(r *Result) bool {
	return r.Err == nil && r.Status == http.StatusOK && !r.Allowed && r.AnswerCode == busyCode && strings.Contains(r.Message, "the gate is busy")
}

// Expected accepts exactly the fleet's expected decision and codes; the
// gate's overload denial is Shed.
func Expected(r *Result) Verdict {
	if r.Err != nil || r.Status != http.StatusOK {
		return Failed
	}
	if IsShed(r) {
		return Shed
	}
	if r.Allowed != r.Review.Allowed {
		return Wrong
	}
	if !r.Allowed && !sameCodes(r.Codes, r.Review.Codes) {
		return Wrong
	}
	return Correct
}

func sameCodes(got []string, want []gate.Code) bool {
	w := make([]string, len(want))
	for i, c := range want {
		w[i] = string(c)
	}
	g := slices.Clone(got)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// Summary of a run.
type Summary struct {
	Mode        string        `json:"mode"`
	OfferedRate float64       `json:"offeredRate,omitempty"`
	Workers     int           `json:"workers"`
	Duration    time.Duration `json:"duration"`
	Sent        int           `json:"sent"`
	Answered    int           `json:"answered"`
	Throughput  float64       `json:"throughput"`
	P50         time.Duration `json:"p50"`
	P90         time.Duration `json:"p90"`
	P99         time.Duration `json:"p99"`
	Max         time.Duration `json:"max"`
	Correct     int           `json:"correct"`
	FailClosed  int           `json:"failClosed"`
	// Shed are the gate's overload denials ("the gate is busy").
	Shed          int   `json:"shed"`
	Wrong         int   `json:"wrong"`
	Failed        int   `json:"failed"`
	Non200        int   `json:"non200"`
	Status5xx     int   `json:"status5xx"`
	ServerRSS     int64 `json:"serverRSSBytes,omitempty"`
	ServerPeakRSS int64 `json:"serverPeakRSSBytes,omitempty"`
	// ServerCPU is the server process's CPU time (user and system, every
	// thread) over the run, 0 when not read; LoadgenCPU is this process's.
	// Per answered review, they say what each costs, whatever the other
	// takes of the same cores.
	ServerCPU  time.Duration `json:"serverCPU,omitempty"`
	LoadgenCPU time.Duration `json:"loadgenCPU,omitempty"`
	// Examples are the first few wrong or failed answers.
	Examples []string `json:"examples,omitempty"`
}

// ServerCPUPerReview is the server's CPU time per answered review (0: not
// measured).
func (s *Summary) ServerCPUPerReview() time.Duration { return perReview(s.ServerCPU, s.Answered) }

// LoadgenCPUPerReview is the load generator's CPU time per answered review.
func (s *Summary) LoadgenCPUPerReview() time.Duration { return perReview(s.LoadgenCPU, s.Answered) }

func perReview(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

// Errors counts what a run must not have: wrong decisions and failures
// (shed denials are neither: they are denials the caller may retry).
func (s *Summary) Errors() int { return s.Wrong + s.Failed }

func (s *Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d workers, %s: sent %d, answered %d, %.0f reviews/s\n", s.Mode, s.Workers, s.Duration.Round(time.Millisecond), s.Sent, s.Answered, s.Throughput)
	fmt.Fprintf(&b, "latency p50 %s  p90 %s  p99 %s  max %s\n", ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
	fmt.Fprintf(&b, "answers: %d correct, %d fail-closed, %d shed (busy), %d wrong, %d failed (%d non-200, %d 5xx)\n", s.Correct, s.FailClosed, s.Shed, s.Wrong, s.Failed, s.Non200, s.Status5xx)
	if s.ServerCPU > 0 {
		fmt.Fprintf(&b, "CPU a review: server %s, load generator %s\n", us(s.ServerCPUPerReview()), us(s.LoadgenCPUPerReview()))
	} else if s.LoadgenCPU > 0 {
		fmt.Fprintf(&b, "CPU a review: load generator %s\n", us(s.LoadgenCPUPerReview()))
	}
	if s.ServerPeakRSS > 0 {
		fmt.Fprintf(&b, "server RSS %.1f MiB, peak %.1f MiB\n", mib(s.ServerRSS), mib(s.ServerPeakRSS))
	}
	for _, e := range s.Examples {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/1e3) }
func mib(b int64) float64       { return float64(b) / (1 << 20) }

// MaxDuration bounds every run, whatever the caller asks.
const MaxDuration = 10 * time.Minute

// Run sends reviews until Duration passes or ctx ends, then waits for the
// answers in flight.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if len(o.Reviews) == 0 {
		return nil, errors.New("loadgen: no reviews")
	}
	if o.Duration <= 0 || o.Duration > MaxDuration {
		return nil, fmt.Errorf("loadgen: duration %s must be above 0 and at most %s", o.Duration, MaxDuration)
	}
	if err := loopback(o.URL); err != nil {
		return nil, err
	}
	if o.Workers <= 0 {
		o.Workers = 64
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Judge == nil {
		o.Judge = Expected
	}
	c, err := newClient(o)
	if err != nil {
		return nil, err
	}
	if o.Warmup {
		if wrong := c.once(ctx); len(wrong) > 0 {
			return nil, fmt.Errorf("loadgen: warm-up: %d of %d reviews answered wrongly, e.g. %s", len(wrong), len(o.Reviews), describe(wrong[0]))
		}
	}

	rec := &recorder{judge: o.Judge, onResult: o.OnResult}
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	if o.Stop != nil {
		go func() {
			select {
			case <-o.Stop:
				cancel()
			case <-runCtx.Done():
			}
		}()
	}
	serverCPU := func() time.Duration { return 0 }
	if o.PID > 0 {
		serverCPU = func() time.Duration { d, _ := ProcessCPU(o.PID); return d }
	}
	cpu0, server0 := SelfCPU(), serverCPU()
	start := time.Now()
	var sent atomic.Int64
	var wg sync.WaitGroup
	s := &Summary{Workers: o.Workers}
	if o.Rate > 0 {
		s.Mode, s.OfferedRate = fmt.Sprintf("open loop at %.0f/s", o.Rate), o.Rate
		jobs := make(chan job, int(o.Rate*o.Duration.Seconds())+1)
		for range o.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := c.worker()
				defer w.close()
				for j := range jobs {
					rec.add(w.send(ctx, j.review, j.scheduled))
				}
			}()
		}
		interval := time.Duration(float64(time.Second) / o.Rate)
	schedule:
		for i := 0; ; i++ {
			at := start.Add(time.Duration(i) * interval)
			if d := time.Until(at); d > 0 {
				select {
				case <-runCtx.Done():
					break schedule
				case <-time.After(d):
				}
			} else if runCtx.Err() != nil {
				break
			}
			sent.Add(1)
			jobs <- job{review: i % len(o.Reviews), scheduled: at}
		}
		close(jobs)
	} else {
		s.Mode = "flat out"
		var next atomic.Int64
		for range o.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := c.worker()
				defer w.close()
				for runCtx.Err() == nil {
					i := next.Add(1) - 1
					sent.Add(1)
					rec.add(w.send(ctx, int(i%int64(len(o.Reviews))), time.Now()))
				}
			}()
		}
	}
	wg.Wait()
	s.Duration = time.Since(start)
	s.LoadgenCPU = SelfCPU() - cpu0
	if server0 > 0 {
		s.ServerCPU = serverCPU() - server0
	}
	s.Sent = int(sent.Load())
	rec.summarize(s)
	if o.PID > 0 {
		s.ServerRSS, s.ServerPeakRSS, _ = ProcessMemory(o.PID)
	}
	return s, nil
}

// Check sends each review once, one at a time, and returns the answers
// that are not the expected ones: a way to wait until a server's caches
// hold the fleet.
func Check(ctx context.Context, o Options) ([]*Result, error) {
	if err := loopback(o.URL); err != nil {
		return nil, err
	}
	o.Workers = max(o.Workers, 1)
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	c, err := newClient(o)
	if err != nil {
		return nil, err
	}
	return c.once(ctx), nil
}

func (c *client) once(ctx context.Context) []*Result {
	var wrong []*Result
	w := c.worker()
	defer w.close()
	for i := range c.reviews {
		if res := w.send(ctx, i, time.Now()); Expected(res) != Correct {
			wrong = append(wrong, res)
		}
	}
	return wrong
}

// Describe renders a result for a person.
func Describe(r *Result) string { return describe(r) }

type job struct {
	review    int
	scheduled time.Time
}

// loopback refuses any target but this machine: load runs stay local.
func loopback(u string) error {
	rest, ok := strings.CutPrefix(u, "https://")
	if !ok {
		return fmt.Errorf("loadgen: %q: only https:// URLs (the API server calls webhooks over TLS)", u)
	}
	host, _, err := net.SplitHostPort(strings.SplitN(rest, "/", 2)[0])
	if err != nil {
		return fmt.Errorf("loadgen: %q: %w", u, err)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return fmt.Errorf("loadgen: %q is not a loopback address; load runs stay on this machine", host)
	}
	return nil
}

// client sends the run's reviews; each worker has its own connection.
type client struct {
	addr    string
	tls     *tls.Config
	timeout time.Duration
	reviews []prepared
	// prefix starts each UID: random per client, with sent counting on
	// across clients, so no two requests share one.
	prefix uint32
}

var sentUIDs atomic.Uint64

// prepared is a review ready to send: its request head, and where the UID
// goes in its body.
type prepared struct {
	*fleetgen.Review
	head  []byte
	uidAt int // -1: the body has no placeholder
}

func newClient(o Options) (*client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(o.CA) {
		return nil, errors.New("loadgen: no certificate in the CA bundle")
	}
	u, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil {
		return nil, fmt.Errorf("loadgen: %q: %w", o.URL, err)
	}
	// As the API server's webhook client: TLS, HTTP/1.1 (the server turns
	// HTTP/2 off), connections kept alive and reused.
	c := &client{addr: u.Host, timeout: o.Timeout, prefix: rand.Uint32(),
		tls: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}}
	for i := range o.Reviews {
		r := &o.Reviews[i]
		head := fmt.Sprintf("POST %s%s?timeout=5s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gpu-upgrade-gate-loadgen\r\n"+
			"Content-Type: application/json\r\nAccept: application/json, */*\r\nContent-Length: %d\r\n\r\n", u.Path, r.Path, u.Host, len(r.Body))
		c.reviews = append(c.reviews, prepared{Review: r, head: []byte(head), uidAt: bytes.Index(r.Body, []byte(fleetgen.UIDPlaceholder))})
	}
	return c, nil
}

// worker is one sender: its connection, kept alive, and its buffers. The
// request is written from one buffer, head and body, the body copied from
// the review and its UID patched in place; the answer is read into another.
// net/http's client costs about twice the CPU a review (goroutine hand-offs
// between its read and write loops, a request and header maps, a timer a
// request), all on the cores the server is measured on.
type worker struct {
	c    *client
	conn *tls.Conn
	br   *bufio.Reader
	req  []byte
	rest []byte // the body after req: the review's own bytes, never written to
	out  bytes.Buffer
	uid  [len(fleetgen.UIDPlaceholder)]byte
}

// firstWrite is the size of net/http's write buffer, its first write.
const firstWrite = 4 << 10

func (c *client) worker() *worker { return &worker{c: c} }

func (w *worker) close() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// newUID is a fresh request UID, in the form of a UUID.
func (w *worker) newUID() {
	const hex = "0123456789abcdef"
	b, t, n := w.uid[:], w.c.prefix, sentUIDs.Add(1)
	for i := 7; i >= 0; i-- {
		b[i], t = hex[t&15], t>>4
	}
	copy(b[8:], "-0000-4000-8000-")
	for i := len(b) - 1; i >= 24; i-- {
		b[i], n = hex[n&15], n>>4
	}
}

// send posts review i with a fresh UID and reads the answer.
func (w *worker) send(ctx context.Context, i int, scheduled time.Time) *Result {
	r := &w.c.reviews[i]
	res := &Result{Review: r.Review, Scheduled: scheduled}
	w.newUID()
	// The head and the body's first bytes, which hold the UID, are copied
	// and patched; the rest is written from the review itself.
	k := len(r.Body)
	if first := firstWrite - len(r.head); r.uidAt+len(w.uid) <= first && first < k {
		k = first
	}
	w.req, w.rest = append(append(w.req[:0], r.head...), r.Body[:k]...), r.Body[k:]
	if r.uidAt >= 0 {
		copy(w.req[len(r.head)+r.uidAt:], w.uid[:])
	}
	res.Sent = time.Now()
	status, err := w.roundTrip(ctx)
	res.Done, res.Status = time.Now(), status
	if err != nil {
		res.Err = err
		return res
	}
	data := w.out.Bytes()
	if status != http.StatusOK {
		res.Message = string(data)
		return res
	}
	// Only the fields judged are decoded.
	var out struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
			Status  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"status"`
			AuditAnnotations struct {
				Reasons string `json:"reasons"` // gate.AuditReasons (TestAuditReasonsKey)
			} `json:"auditAnnotations"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		res.Err = fmt.Errorf("answer does not decode: %w", err)
		return res
	}
	if out.Response.UID != string(w.uid[:]) {
		res.Err = fmt.Errorf("answer has uid %q, the request %q", out.Response.UID, w.uid[:])
		return res
	}
	res.Allowed = out.Response.Allowed
	if s := out.Response.Status; s != nil {
		res.Message, res.AnswerCode = s.Message, s.Code
		if s.Code >= 500 { // an errored review inside a 200: count it as a 5xx
			res.Status = s.Code
		}
	}
	if reasons := out.Response.AuditAnnotations.Reasons; reasons != "" {
		res.Codes = strings.Split(reasons, ",")
	}
	return res
}

// roundTrip writes w.req on the worker's connection (dialled if there is
// none) and reads the answer's body into w.out. A connection the server
// closed while idle fails before any answer byte: the request is sent once
// more on a new one, as net/http's client does.
func (w *worker) roundTrip(ctx context.Context) (int, error) {
	for attempt := 0; ; attempt++ {
		reused := w.conn != nil
		if !reused {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}, Config: w.c.tls}
			dctx, cancel := context.WithTimeout(ctx, w.c.timeout)
			conn, err := d.DialContext(dctx, "tcp", w.c.addr)
			cancel()
			if err != nil {
				return 0, err
			}
			w.conn = conn.(*tls.Conn)
			if w.br == nil {
				w.br = bufio.NewReaderSize(w.conn, 16<<10)
			} else {
				w.br.Reset(w.conn)
			}
		}
		deadline := time.Now().Add(w.c.timeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = w.conn.SetDeadline(deadline)
		status, answered, err := w.exchange()
		if err == nil {
			return status, nil
		}
		w.close()
		if !reused || answered || attempt > 0 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
			return 0, err
		}
	}
}

// exchange is one request and its answer on the open connection; answered
// says the server sent a byte of it.
func (w *worker) exchange() (status int, answered bool, err error) {
	// Written in the pieces net/http's client writes (its 4 KB buffer with
	// the head and the body's start, then 32 KB copies), so the server
	// reads the TLS records the API server's client sends.
	n := firstWrite
	for _, b := range [2][]byte{w.req, w.rest} {
		for len(b) > 0 {
			m := min(n, len(b))
			if _, err := w.conn.Write(b[:m]); err != nil {
				return 0, false, err
			}
			b, n = b[m:], 32<<10
		}
	}
	if _, err := w.br.Peek(1); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		return 0, true, err
	}
	w.out.Reset()
	_, err = w.out.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, true, err
	}
	if resp.Close {
		w.close()
	}
	return resp.StatusCode, true, nil
}

// recorder keeps the latencies and verdicts.
type recorder struct {
	mu        sync.Mutex
	judge     func(*Result) Verdict
	onResult  func(*Result)
	latencies []time.Duration
	verdicts  [5]int
	non200    int
	s5xx      int
	examples  []string
}

func (rc *recorder) add(r *Result) {
	v := rc.judge(r)
	if rc.onResult != nil {
		rc.onResult(r)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.verdicts[v]++
	if r.Err == nil {
		rc.latencies = append(rc.latencies, r.Latency())
		if r.Status != http.StatusOK {
			rc.non200++
		}
		if r.Status >= 500 {
			rc.s5xx++
		}
	}
	if (v == Wrong || v == Failed) && len(rc.examples) < 5 {
		rc.examples = append(rc.examples, describe(r))
	}
}

func describe(r *Result) string {
	if r.Err != nil {
		return fmt.Sprintf("%s: %v", r.Review.Name, r.Err)
	}
	msg := r.Message
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return fmt.Sprintf("%s: HTTP %d allowed=%v codes=%v, want allowed=%v codes=%v: %s", r.Review.Name, r.Status, r.Allowed, r.Codes, r.Review.Allowed, r.Review.Codes, msg)
}

func (rc *recorder) summarize(s *Summary) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s.Correct, s.FailClosed, s.Wrong, s.Failed, s.Shed = rc.verdicts[Correct], rc.verdicts[FailClosed], rc.verdicts[Wrong], rc.verdicts[Failed], rc.verdicts[Shed]
	s.Answered = len(rc.latencies)
	s.Non200, s.Status5xx, s.Examples = rc.non200, rc.s5xx, rc.examples
	s.Throughput = float64(s.Answered) / s.Duration.Seconds()
	s.P50, s.P90, s.P99, s.Max = Percentiles(rc.latencies)
}

// Percentiles returns p50, p90, p99 and the maximum (nearest rank).
func Percentiles(ds []time.Duration) (p50, p90, p99, maxD time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return at(0.50), at(0.90), at(0.99), s[len(s)-1]
}

// ProcessCPU is a process's CPU time so far, user and system, every thread
// (utime and stime in /proc/<pid>/stat, in clock ticks of 10 ms).
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after it (state is field 3, utime 14, stime 15).
	i := bytes.LastIndexByte(data, ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(string(data[i+1:]))
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q: expected utime and stime", pid, data)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / clockTicks), nil
}

// clockTicks is USER_HZ, the unit of /proc's CPU times on Linux.
const clockTicks = 100

// SelfCPU is this process's CPU time so far, user and system.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcessMemory reads a process's resident set size and its peak (VmRSS and
// VmHWM in /proc/<pid>/status), in bytes.
func ProcessMemory(pid int) (rss, peak int64, err error) {
	m, err := procStatus(pid)
	return m["VmRSS"], m["VmHWM"], err
}

// ProcessFileRSS reads the part of a process's resident set that is mapped
// from files (RssFile: for a Go binary, its own text and tables), in bytes.
func ProcessFileRSS(pid int) (int64, error) {
	m, err := procStatus(pid)
	return m["RssFile"], err
}

// procStatus is /proc/<pid>/status's sizes in kB, in bytes by name.
func procStatus(pid int) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		out[k] = n << 10
	}
	return out, nil
}
