// Package releasegen writes the parts of a release (`make release`) that no
// other tool of the project makes: an SPDX SBOM per image, built from the
// build information Go embeds in its binaries, and the Helm chart archive
// with its entries' times fixed so the same commit gives the same bytes.
package releasegen

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// Binary is one platform's build of an image's program.
type Binary struct {
	// Platform is os/arch, e.g. linux/amd64.
	Platform string
	// Path is the binary's file.
	Path string
}

// Image names what an SBOM describes.
type Image struct {
	// Name is the image's name without registry or tag, e.g. kube-node-ready-agent.
	Name string
	// Version is the release, also the image's tag.
	Version string
	// Binaries are the image's program, one per platform of its index.
	Binaries []Binary
}

// The subset of SPDX 2.3 (JSON) an SBOM of Go binaries needs.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID                string            `json:"SPDXID"`
	Name                  string            `json:"name"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment               string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

// SBOM reads the binaries' embedded build information and returns an SPDX
// 2.3 JSON document: the image, its binary per platform (with the file's
// sha256 and the build settings), and every Go module linked into them — the
// main module, each dependency with its version and go.sum checksum, the
// standard library — each contained in the binaries that link it. The output
// depends only on the binaries, img and created, so the same commit gives
// the same SBOM.
func SBOM(img Image, created time.Time) ([]byte, error) {
	if img.Name == "" || img.Version == "" || len(img.Binaries) == 0 {
		return nil, fmt.Errorf("sbom: an image name, version and at least one binary are needed")
	}
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        img.Name + "-" + img.Version,
		CreationInfo: spdxCreationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: kube-node-ready-releasegen"},
		},
	}
	imageID := "SPDXRef-Image-" + spdxIDPart(img.Name)
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID: imageID, Name: img.Name, VersionInfo: img.Version,
		DownloadLocation: noAssertion, PrimaryPackagePurpose: "CONTAINER",
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID})

	modules := map[string]spdxPackage{} // by SPDXID
	namespace := sha256.New()
	for _, b := range img.Binaries {
		sum, err := fileSHA256(b.Path)
		if err != nil {
			return nil, fmt.Errorf("sbom: %s: %w", b.Platform, err)
		}
		info, err := buildinfo.ReadFile(b.Path)
		if err != nil {
			return nil, fmt.Errorf("sbom: %s: read build info of %s: %w", b.Platform, b.Path, err)
		}
		fmt.Fprintf(namespace, "%s %s\n", b.Platform, sum)
		binID := "SPDXRef-Binary-" + spdxIDPart(b.Platform)
		doc.Packages = append(doc.Packages, spdxPackage{
			SPDXID: binID, Name: img.Name + " (" + b.Platform + ")", VersionInfo: img.Version,
			DownloadLocation: noAssertion, PrimaryPackagePurpose: "APPLICATION",
			Checksums: []spdxChecksum{{"SHA256", sum}},
			Comment:   "Built by " + info.GoVersion + " with " + buildSettings(info.Settings),
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", binID})

		linked := append([]*debug.Module{&info.Main}, info.Deps...)
		linked = append(linked, &debug.Module{Path: "stdlib", Version: info.GoVersion})
		for _, m := range linked {
			p, err := modulePackage(m)
			if err != nil {
				return nil, fmt.Errorf("sbom: %s: %w", b.Platform, err)
			}
			if prev, ok := modules[p.SPDXID]; ok && prev.Name != p.Name {
				return nil, fmt.Errorf("sbom: modules %s and %s map to one SPDX ID %s", prev.Name, p.Name, p.SPDXID)
			}
			modules[p.SPDXID] = p
			doc.Relationships = append(doc.Relationships, spdxRelationship{binID, "CONTAINS", p.SPDXID})
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	doc.DocumentNamespace = fmt.Sprintf("https://github.com/kube-node-ready/kube-node-ready/spdx/%s-%s-%x",
		img.Name, img.Version, namespace.Sum(nil)[:8])
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	return append(out, '\n'), nil
}

// modulePackage is a Go module as an SPDX package: its purl, and its go.sum
// hash (h1:, the base64 of a SHA-256) as a SHA256 checksum in hex, the form
// SBOM tools use for Go modules. A replaced module is described by its
// replacement, with the original path in the comment.
func modulePackage(m *debug.Module) (spdxPackage, error) {
	mod, comment := m, ""
	if m.Replace != nil {
		mod, comment = m.Replace, "replaces "+m.Path+"@"+m.Version
	}
	version := mod.Version
	p := spdxPackage{
		SPDXID:                "SPDXRef-Package-go-module-" + spdxIDPart(mod.Path) + "-" + spdxIDPart(version),
		Name:                  mod.Path,
		VersionInfo:           version,
		DownloadLocation:      noAssertion,
		Comment:               comment,
		PrimaryPackagePurpose: "LIBRARY",
	}
	if mod.Path != "stdlib" && version != "" && version != "(devel)" {
		p.DownloadLocation = "https://proxy.golang.org/" + mod.Path + "/@v/" + version + ".zip"
		p.ExternalRefs = []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + mod.Path + "@" + version}}
	}
	if mod.Path == "stdlib" {
		p.ExternalRefs = []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + strings.TrimPrefix(version, "go")}}
	}
	if mod.Sum != "" {
		h, ok := strings.CutPrefix(mod.Sum, "h1:")
		raw, err := base64.StdEncoding.DecodeString(h)
		if !ok || err != nil || len(raw) != sha256.Size {
			return spdxPackage{}, fmt.Errorf("module %s@%s: checksum %q is not an h1: SHA-256", mod.Path, version, mod.Sum)
		}
		p.Checksums = []spdxChecksum{{"SHA256", hex.EncodeToString(raw)}}
	}
	return p, nil
}

// buildSettings renders the settings a binary was built with (GOOS, GOARCH,
// -trimpath, -ldflags, vcs.revision, ...) in the order Go recorded them.
func buildSettings(settings []debug.BuildSetting) string {
	parts := make([]string, 0, len(settings))
	for _, s := range settings {
		parts = append(parts, s.Key+"="+s.Value)
	}
	return strings.Join(parts, " ")
}

var notInSPDXID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxIDPart makes s usable in an SPDX ID, which allows only letters,
// digits, dots and hyphens.
func spdxIDPart(s string) string {
	return notInSPDXID.ReplaceAllString(s, "-")
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
