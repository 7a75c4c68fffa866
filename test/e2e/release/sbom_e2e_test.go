//go:build e2e

package release_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

type spdxDocument struct {
	SPDXVersion       string `json:"spdxVersion"`
	DataLicense       string `json:"dataLicense"`
	SPDXID            string `json:"SPDXID"`
	DocumentNamespace string `json:"documentNamespace"`
	Packages          []struct {
		SPDXID                string `json:"SPDXID"`
		Name                  string `json:"name"`
		VersionInfo           string `json:"versionInfo"`
		PrimaryPackagePurpose string `json:"primaryPackagePurpose"`
		Checksums             []struct {
			Algorithm     string `json:"algorithm"`
			ChecksumValue string `json:"checksumValue"`
		} `json:"checksums"`
		ExternalRefs []struct {
			ReferenceType    string `json:"referenceType"`
			ReferenceLocator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
	Relationships []struct {
		SPDXElementID      string `json:"spdxElementId"`
		RelationshipType   string `json:"relationshipType"`
		RelatedSPDXElement string `json:"relatedSpdxElement"`
	} `json:"relationships"`
}

// checkSBOM reads the image's SPDX document: it describes the image at the
// release's version, each platform's binary by the sha256 of the binary in
// the image, the main module, and k8s.io/client-go at the version go.mod
// requires with its checksum and purl; every package is related to the
// document's tree.
func checkSBOM(t *testing.T, r release, img string, binaries map[string]string) {
	b, err := os.ReadFile(filepath.Join(r.dir, img+"-"+r.version+".spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("SBOM: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.DocumentNamespace == "" {
		t.Errorf("SBOM head %s %s %s %q, want an SPDX-2.3 document", doc.SPDXVersion, doc.DataLicense, doc.SPDXID, doc.DocumentNamespace)
	}
	mainModule := run(t, r.root, "go", "list", "-m")
	clientGo := run(t, r.root, "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go")

	related := map[string]bool{"SPDXRef-DOCUMENT": true}
	for _, rel := range doc.Relationships {
		related[rel.RelatedSPDXElement] = true
	}
	found := map[string]bool{}
	for _, p := range doc.Packages {
		if !related[p.SPDXID] {
			t.Errorf("package %s (%s) is in no relationship", p.SPDXID, p.Name)
		}
		sha := ""
		for _, c := range p.Checksums {
			if c.Algorithm == "SHA256" {
				sha = c.ChecksumValue
			}
		}
		switch {
		case p.Name == img && p.PrimaryPackagePurpose == "CONTAINER":
			found["image"] = p.VersionInfo == r.version
		case p.Name == mainModule:
			found["main module"] = true
		case p.Name == "k8s.io/client-go":
			purl := len(p.ExternalRefs) == 1 && p.ExternalRefs[0].ReferenceType == "purl" &&
				p.ExternalRefs[0].ReferenceLocator == "pkg:golang/k8s.io/client-go@"+clientGo
			found["k8s.io/client-go"] = p.VersionInfo == clientGo && len(sha) == 64 && purl
			if !found["k8s.io/client-go"] {
				t.Errorf("SBOM has k8s.io/client-go %+v, want version %s, a SHA256 checksum and its purl", p, clientGo)
			}
		}
		for plat, sum := range binaries {
			if p.Name == img+" ("+plat+")" {
				found[plat] = sha == sum && p.VersionInfo == r.version
				if !found[plat] {
					t.Errorf("SBOM's %s binary: sha256 %s, version %s; the image's binary has %s, want version %s", plat, sha, p.VersionInfo, sum, r.version)
				}
			}
		}
	}
	want := []string{"image", "main module", "k8s.io/client-go"}
	for plat := range binaries {
		want = append(want, plat)
	}
	for _, w := range want {
		if !found[w] {
			t.Errorf("SBOM of %s: no (right) package for %s (image at version %s, main module %s)", img, w, r.version, mainModule)
		}
	}
}
