package releasegen

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// spdxID is the form SPDX 2.3 allows for an element's ID.
var spdxID = regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)

func TestModulePackage(t *testing.T) {
	// An h1: checksum is the base64 of a SHA-256; SPDX carries it in hex.
	const sum = "h1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	const hexSum = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	for _, tt := range []struct {
		name        string
		mod         debug.Module
		wantName    string
		wantVersion string
		wantSHA     string
		wantPURL    string
		wantComment string
		wantErr     bool
	}{
		{name: "dependency", mod: debug.Module{Path: "k8s.io/client-go", Version: "v0.36.3", Sum: sum},
			wantName: "k8s.io/client-go", wantVersion: "v0.36.3", wantSHA: hexSum, wantPURL: "pkg:golang/k8s.io/client-go@v0.36.3"},
		{name: "replaced", mod: debug.Module{Path: "example.com/a", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1", Sum: sum}},
			wantName: "example.com/fork", wantVersion: "v1.0.1", wantSHA: hexSum, wantPURL: "pkg:golang/example.com/fork@v1.0.1", wantComment: "replaces example.com/a@v1.0.0"},
		{name: "main module built from a tree", mod: debug.Module{Path: "github.com/kube-node-ready/kube-node-ready", Version: "(devel)"},
			wantName: "github.com/kube-node-ready/kube-node-ready", wantVersion: "(devel)"},
		{name: "standard library", mod: debug.Module{Path: "stdlib", Version: "go1.26.8"},
			wantName: "stdlib", wantVersion: "go1.26.8", wantPURL: "pkg:golang/stdlib@1.26.8"},
		{name: "checksum not h1", mod: debug.Module{Path: "example.com/a", Version: "v1.0.0", Sum: "h2:AAAA"}, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := modulePackage(&tt.mod)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("modulePackage = %+v, want an error", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sha, purl := "", ""
			if len(p.Checksums) == 1 && p.Checksums[0].Algorithm == "SHA256" {
				sha = p.Checksums[0].ChecksumValue
			}
			if len(p.ExternalRefs) == 1 {
				purl = p.ExternalRefs[0].ReferenceLocator
			}
			if p.Name != tt.wantName || p.VersionInfo != tt.wantVersion || sha != tt.wantSHA || purl != tt.wantPURL || p.Comment != tt.wantComment {
				t.Errorf("modulePackage = %+v, want %s %s sha256 %q purl %q comment %q", p, tt.wantName, tt.wantVersion, tt.wantSHA, tt.wantPURL, tt.wantComment)
			}
			if !spdxID.MatchString(p.SPDXID) {
				t.Errorf("SPDX ID %q has characters SPDX does not allow", p.SPDXID)
			}
		})
	}
}

// TestSBOMOfTestBinary builds the SBOM of this test binary (a Go binary
// with build information) for two "platforms": the document describes the
// image, both binaries by their sha256, the main module and the standard
// library, and the same input gives the same bytes.
func TestSBOMOfTestBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	img := Image{Name: "test-image", Version: "1.2.3", Binaries: []Binary{{"linux/amd64", exe}, {"linux/arm64", exe}}}
	created := time.Unix(1700000000, 0)
	out, err := SBOM(img, created)
	if err != nil {
		t.Fatal(err)
	}
	again, err := SBOM(img, created)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Error("two SBOMs of the same binaries differ")
	}
	var doc spdxDocument
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	sum, err := fileSHA256(exe)
	if err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" || !strings.Contains(doc.DocumentNamespace, "test-image-1.2.3-") {
		t.Errorf("document head %+v", doc)
	}
	names := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		names[p.Name] = p
	}
	for _, want := range []string{"test-image", "test-image (linux/amd64)", "test-image (linux/arm64)", "github.com/kube-node-ready/kube-node-ready", "stdlib"} {
		if _, ok := names[want]; !ok {
			t.Errorf("no package %q in %v", want, doc.Packages)
		}
	}
	if p := names["test-image (linux/arm64)"]; len(p.Checksums) != 1 || p.Checksums[0].ChecksumValue != sum {
		t.Errorf("binary package %+v, want sha256 %s", p, sum)
	}
	// Each binary contains the main module: one package, two relationships.
	contains := 0
	for _, r := range doc.Relationships {
		if r.RelationshipType == "CONTAINS" && r.RelatedSPDXElement == names["stdlib"].SPDXID {
			contains++
		}
	}
	if contains != 2 {
		t.Errorf("%d binaries contain stdlib, want 2", contains)
	}
	if _, err := SBOM(Image{Name: "x", Version: "1", Binaries: []Binary{{"linux/amd64", "/nonexistent"}}}, created); err == nil {
		t.Error("SBOM of a missing binary: no error")
	}
}
