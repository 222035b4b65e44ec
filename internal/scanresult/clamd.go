package scanresult

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Signatures is the signature database clamd loads here (clamav/
// pendinguploads.ndb): the EICAR test file (Eicar-Test-Signature), and a
// custom signature, PendingUploads.Test.Marker, matching CustomMarker
// anywhere in a file. Nothing is downloaded: the tests and make run work
// offline.
//
//go:embed clamav/pendinguploads.ndb
var Signatures []byte

// CustomMarker is what the custom signature matches.
const CustomMarker = "PENDINGUPLOADS-TEST-MALWARE-MARKER-7c1e6a2e"

// Clamd is a clamd of our own: StartClamd's.
type Clamd struct {
	// Addr is its TCP address (host:port, loopback).
	Addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// clamdStartTimeout bounds clamd's start (loading the database).
const clamdStartTimeout = 60 * time.Second

// StartClamd starts clamd (CLAMD, else clamd on PATH or /usr/sbin/clamd:
// Debian's clamav-daemon) on a free loopback port, loading Signatures
// alone, in a directory of its own under dir, and waits until it answers
// PING. Stop ends it.
func StartClamd(ctx context.Context, dir string) (*Clamd, error) {
	bin := os.Getenv("CLAMD")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("clamd"); err != nil {
			bin = "/usr/sbin/clamd"
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("clamd: %w (Debian: apt-get install clamav-daemon)", err)
	}
	home, err := os.MkdirTemp(dir, "clamd-")
	if err != nil {
		return nil, fmt.Errorf("clamd: %w", err)
	}
	db := filepath.Join(home, "db")
	if err := os.MkdirAll(db, 0o755); err != nil {
		return nil, fmt.Errorf("clamd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(db, "pendinguploads.ndb"), Signatures, 0o644); err != nil {
		return nil, fmt.Errorf("clamd: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("clamd: %w", err)
	}
	conf := fmt.Sprintf("DatabaseDirectory %s\nTCPSocket %d\nTCPAddr 127.0.0.1\nForeground yes\nLogFile %s\nPidFile %s\nStreamMaxLength 110M\nMaxFileSize 110M\nMaxScanSize 110M\n",
		db, port, filepath.Join(home, "clamd.log"), filepath.Join(home, "clamd.pid"))
	if os.Geteuid() == 0 {
		conf += "User root\n" // else clamd drops to Debian's clamav user, who cannot read home
	}
	confPath := filepath.Join(home, "clamd.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("clamd: %w", err)
	}
	c := &Clamd{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: exec.Command(bin, "-c", confPath), dir: home, done: make(chan struct{})}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("clamd: %w", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	wctx, cancel := context.WithTimeout(ctx, clamdStartTimeout)
	defer cancel()
	for {
		if Ping(wctx, c.Addr) == nil {
			return c, nil
		}
		select {
		case <-c.done:
			log, _ := os.ReadFile(filepath.Join(home, "clamd.log"))
			return nil, fmt.Errorf("clamd exited at start: %s", lastLines(string(log), 5))
		case <-wctx.Done():
			c.Stop()
			return nil, fmt.Errorf("clamd did not answer within %s", clamdStartTimeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends clamd and removes its directory.
func (c *Clamd) Stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	_ = os.RemoveAll(c.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "; ")
}

// Ping asks clamd at addr for PONG.
func Ping(ctx context.Context, addr string) error {
	conn, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return err
	}
	reply, err := bufio.NewReader(conn).ReadString(0)
	if err != nil {
		return err
	}
	if strings.TrimRight(reply, "\x00") != "PONG" {
		return fmt.Errorf("clamd: PING answered %q", reply)
	}
	return nil
}

func dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	return conn, nil
}

// ErrScanFailed is clamd's answer that it could not scan (an ERROR reply,
// a size over its limits): the result FAILED.
var ErrScanFailed = errors.New("clamd could not scan")

// chunkBytes is the size of one INSTREAM chunk.
const chunkBytes = 64 << 10

// ScanStream sends r to clamd at addr (INSTREAM, in chunks) and returns
// the name of the signature it matched, "" when none; ErrScanFailed when
// clamd answered an error. ctx bounds it.
func ScanStream(ctx context.Context, addr string, r io.Reader) (string, error) {
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	w := bufio.NewWriterSize(conn, chunkBytes+4)
	if _, err := w.WriteString("zINSTREAM\x00"); err != nil {
		return "", err
	}
	buf := make([]byte, chunkBytes)
	var size [4]byte
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			binary.BigEndian.PutUint32(size[:], uint32(n))
			w.Write(size[:])
			if _, err := w.Write(buf[:n]); err != nil {
				return "", err
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return "", rerr
		}
	}
	binary.BigEndian.PutUint32(size[:], 0)
	w.Write(size[:])
	if err := w.Flush(); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(conn).ReadString(0)
	if err != nil && reply == "" {
		return "", err
	}
	reply = strings.TrimRight(reply, "\x00")
	switch {
	case strings.HasSuffix(reply, " OK"):
		return "", nil
	case strings.HasSuffix(reply, " FOUND"):
		name := strings.TrimSuffix(strings.TrimPrefix(reply, "stream: "), " FOUND")
		return strings.TrimSuffix(name, ".UNOFFICIAL"), nil
	}
	return "", fmt.Errorf("%w: %q", ErrScanFailed, reply)
}

// Waiting is what the stand-in needs of the store.
type Waiting interface {
	WaitingScans(ctx context.Context, limit int) ([]pendinguploads.WaitingScan, error)
}

// Opener reads objects of the bucket (pendinguploads.Bucket's Open).
type Opener interface {
	Open(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
}

// Tagger tags an object (s3blobs.Store's Tag).
type Tagger interface {
	Tag(ctx context.Context, key, k, v string) error
}

// ScanStatusTag is the tag GuardDuty sets on each object it scanned, its
// value the result.
const ScanStatusTag = "GuardDutyMalwareScanStatus"

// Standin plays GuardDuty on the dev server: it finds each object waiting
// for its scan, scans it with clamd, tags the object as GuardDuty does
// (ScanStatusTag, when Tagger is set), and hands the Handler the event
// GuardDuty would publish (Detail: COMPLETED with NO_THREATS_FOUND or
// THREATS_FOUND and the signature's name; FAILED when clamd could not
// scan), the same code the Scanresult function runs.
type Standin struct {
	Store   Waiting
	Bucket  Opener
	Tagger  Tagger // nil: no tag
	Handler *Handler
	// Addr is clamd's address.
	Addr string
	// Every is how often it looks for new objects (default 100ms).
	Every time.Duration
	// ScanTimeout bounds one object's scan (default 2 minutes).
	ScanTimeout time.Duration
	Log         *slog.Logger

	mu     sync.Mutex
	inScan map[string]bool
}

// maxConcurrentScans bounds the objects scanned at once.
const maxConcurrentScans = 4

// Run scans until ctx ends. Each pass also gives the policy to scans
// overdue (Handler.Overdue), as the function's schedule does.
func (s *Standin) Run(ctx context.Context) {
	every := s.Every
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	sem := make(chan struct{}, maxConcurrentScans)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		waiting, err := s.Store.WaitingScans(ctx, 100)
		if err != nil {
			if ctx.Err() == nil {
				s.Log.Warn("clamd stand-in: waiting scans not read", "err", err)
			}
			continue
		}
		for _, w := range waiting {
			if !s.claim(w.Key) {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				defer s.release(w.Key)
				if err := s.ScanOne(ctx, w); err != nil && ctx.Err() == nil {
					s.Log.Warn("clamd stand-in: scan not applied", "key", w.Key, "err", err)
				}
			}()
		}
		_ = s.Handler.Overdue(ctx)
	}
}

func (s *Standin) claim(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inScan == nil {
		s.inScan = map[string]bool{}
	}
	if s.inScan[key] {
		return false
	}
	s.inScan[key] = true
	return true
}

func (s *Standin) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inScan, key)
}

// ScanOne scans one waiting object and applies the result.
func (s *Standin) ScanOne(ctx context.Context, w pendinguploads.WaitingScan) error {
	timeout := s.ScanTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := Detail{SchemaVersion: "1.0", ResourceType: "S3_OBJECT"}
	d.S3ObjectDetails.BucketName, d.S3ObjectDetails.ObjectKey = s.Handler.Bucket, w.Key
	body, err := s.Bucket.Open(sctx, w.Key, 0, w.SizeBytes)
	if errors.Is(err, pendinguploads.ErrBlobNotFound) {
		return nil // gone (swept): GuardDuty would have nothing to say either
	}
	var threat string
	if err == nil {
		threat, err = ScanStream(sctx, s.Addr, body)
		body.Close()
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return err
	case err != nil:
		s.Log.Warn("clamd stand-in: scan failed", "key", w.Key, "err", err)
		d.ScanStatus, d.ScanResultDetails.ScanResultStatus = "FAILED", Failed
	case threat != "":
		d.ScanStatus, d.ScanResultDetails.ScanResultStatus = "COMPLETED", ThreatsFound
		d.ScanResultDetails.Threats = []Threat{{Name: threat}}
	default:
		d.ScanStatus, d.ScanResultDetails.ScanResultStatus = "COMPLETED", NoThreatsFound
	}
	if s.Tagger != nil {
		if err := s.Tagger.Tag(ctx, w.Key, ScanStatusTag, d.ScanResultDetails.ScanResultStatus); err != nil && !errors.Is(err, pendinguploads.ErrBlobNotFound) {
			s.Log.Warn("clamd stand-in: object not tagged", "key", w.Key, "err", err)
		}
	}
	ev, err := eventOf(d)
	if err != nil {
		return err
	}
	return s.Handler.Handle(ctx, ev) // as the Scanresult function receives it
}

// The stand-in's account, region and plan: placeholders where GuardDuty's
// event names its own (the handler reads none of them).
const (
	standinAccount = "000000000000"
	standinRegion  = "local"
	standinPlan    = "arn:aws:guardduty:" + standinRegion + ":" + standinAccount + ":malware-protection-plan/clamd"
)

// eventJSON is d as the EventBridge event GuardDuty publishes, every
// field of its (TestSampleEventsHaveGuardDutysFields). The stand-in leaves
// eTag and versionId empty: it reads neither.
func eventJSON(d Detail) ([]byte, error) {
	detail, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"version": "0", "id": uuid.NewString(), "source": Source, "detail-type": DetailType,
		"account": standinAccount, "region": standinRegion, "resources": []string{standinPlan},
		"time": time.Now().UTC().Format(time.RFC3339), "detail": json.RawMessage(detail)})
}

// eventOf is eventJSON(d) read back as the function reads its event.
func eventOf(d Detail) (events.EventBridgeEvent, error) {
	raw, err := eventJSON(d)
	if err != nil {
		return events.EventBridgeEvent{}, err
	}
	var ev events.EventBridgeEvent
	err = json.Unmarshal(raw, &ev)
	return ev, err
}
