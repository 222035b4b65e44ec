package client

import (
	"fmt"
	"slices"
	"testing"
)

// TestPlanUpload: files that fit a request are packed, in order, into as
// few multipart requests as the cap and the 64-file limit allow; files
// that do not fit any request are set aside for presign.
func TestPlanUpload(t *testing.T) {
	sized := func(sizes ...int64) []UploadFile {
		fs := make([]UploadFile, len(sizes))
		for i, n := range sizes {
			fs[i] = UploadFile{Name: fmt.Sprintf("f%02d.bin", i), Size: n}
		}
		return fs
	}
	all := func(n int) []int {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	const limit = 1 << 20
	overhead := multipartLen(sized(0)) // one part's headers and the closing boundary

	t.Run("PackedWithinTheCap", func(t *testing.T) {
		files := sized(400<<10, 400<<10, 400<<10, 10, 2<<20)
		p := planUpload(files, all(len(files)), limit)
		want := uploadPlan{batches: [][]int{{0, 1}, {2, 3}}, large: []int{4}}
		if !slices.EqualFunc(p.batches, want.batches, slices.Equal) || !slices.Equal(p.large, want.large) {
			t.Fatalf("got %+v, want %+v", p, want)
		}
		for _, b := range p.batches {
			if n := multipartLen(pick(files, b)); n > limit {
				t.Fatalf("batch %v: %d bytes, over the cap %d", b, n, limit)
			}
		}
	})
	t.Run("ExactlyTheCapFits", func(t *testing.T) {
		files := sized(limit - overhead)
		if p := planUpload(files, all(1), limit); len(p.batches) != 1 || len(p.large) != 0 {
			t.Fatalf("a file of exactly the cap: got %+v, want one request", p)
		}
		files = sized(limit - overhead + 1)
		if p := planUpload(files, all(1), limit); len(p.batches) != 0 || !slices.Equal(p.large, []int{0}) {
			t.Fatalf("one byte over the cap: got %+v, want it set aside", p)
		}
	})
	t.Run("AtMost64FilesARequest", func(t *testing.T) {
		files := sized(slices.Repeat([]int64{1}, 130)...)
		p := planUpload(files, all(len(files)), limit)
		if len(p.batches) != 3 || len(p.batches[0]) != MaxFilesPerRequest || len(p.batches[1]) != MaxFilesPerRequest || len(p.batches[2]) != 2 {
			t.Fatalf("130 tiny files: got batches of %d", len(p.batches))
		}
	})
	t.Run("OnlyThePending", func(t *testing.T) {
		files := sized(10, 20, 30)
		p := planUpload(files, []int{2, 0}, limit)
		if len(p.batches) != 1 || !slices.Equal(p.batches[0], []int{2, 0}) {
			t.Fatalf("got %+v, want the pending files in their order", p)
		}
	})
}
