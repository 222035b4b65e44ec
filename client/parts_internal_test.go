package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
)

func hexOf(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestFileSums: one read gives the file's SHA-256 and each part's, the
// last part shorter; a file that is not its declared size is refused.
func TestFileSums(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 2500) // 25,000 bytes
	f := BytesFile("f", "", data)
	for _, tc := range []struct {
		name      string
		partBytes int64
		want      []string
	}{
		{"OnePUT", 0, nil},
		{"Parts", 10000, []string{hexOf(data[:10000]), hexOf(data[10000:20000]), hexOf(data[20000:])}},
		{"ExactParts", 5000, []string{hexOf(data[:5000]), hexOf(data[5000:10000]), hexOf(data[10000:15000]), hexOf(data[15000:20000]), hexOf(data[20000:])}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, parts, err := fileSums(context.Background(), f, tc.partBytes)
			if err != nil || sum != hexOf(data) || strings.Join(parts, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %s %v %v, want %s %v", sum, parts, err, hexOf(data), tc.want)
			}
		})
	}
	for _, size := range []int64{24999, 25001} {
		g := f
		g.Size = size
		if _, _, err := fileSums(context.Background(), g, 10000); err == nil || !strings.Contains(err.Error(), "declared") {
			t.Errorf("size %d declared for 25000 bytes: got %v", size, err)
		}
	}
}

// TestSectionFile: a part is read from its offset, whether the file
// seeks or not, and a file that ends early is an error.
func TestSectionFile(t *testing.T) {
	data := []byte("abcdefghijklmnopqrstuvwxyz")
	seeking := BytesFile("f", "", data)
	streaming := seeking
	streaming.Open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewBufferString(string(data))), nil }
	for name, f := range map[string]UploadFile{"Seeker": seeking, "Stream": streaming} {
		t.Run(name, func(t *testing.T) {
			got, err := io.ReadAll(&sectionFile{f: f, off: 10, size: 10})
			if err != nil || string(got) != "klmnopqrst" {
				t.Fatalf("got %q, %v", got, err)
			}
			if _, err := io.ReadAll(&sectionFile{f: f, off: 20, size: 10}); err == nil || !strings.Contains(err.Error(), "shrank") {
				t.Fatalf("past the end: got %v, want shrank", err)
			}
		})
	}
}

// TestCheckPlan: a plan that does not fit the file is refused before any
// byte is sent.
func TestCheckPlan(t *testing.T) {
	part := func(n int, size int64) PresignedPart {
		return PresignedPart{PartNumber: n, Size: size, URL: "http://b/k?partNumber=1"}
	}
	for _, tc := range []struct {
		name string
		plan PartPlan
		ok   bool
	}{
		{"Fits", PartPlan{PartBytes: 10, PartCount: 3, Parts: []PresignedPart{part(1, 10), part(3, 5)}, Received: []ReceivedPart{{PartNumber: 2, Size: 10}}}, true},
		{"WrongCount", PartPlan{PartBytes: 10, PartCount: 2, Parts: []PresignedPart{part(1, 10)}}, false},
		{"WrongSize", PartPlan{PartBytes: 10, PartCount: 3, Parts: []PresignedPart{part(3, 10)}}, false},
		{"NumberOutOfRange", PartPlan{PartBytes: 10, PartCount: 3, Parts: []PresignedPart{part(4, 5)}}, false},
		{"ReceivedOutOfRange", PartPlan{PartBytes: 10, PartCount: 3, Received: []ReceivedPart{{PartNumber: 0, Size: 10}}}, false},
		{"NoPartBytes", PartPlan{PartCount: 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkPlan(&tc.plan, 25); (err == nil) != tc.ok {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
