// Command releasegen is what `make release` runs for the parts of a release
// no other tool makes:
//
//	releasegen sbom --name NAME --version VERSION --binary os/arch=PATH... > NAME.spdx.json
//	releasegen chart ARCHIVE.tgz
//
// Both date what they write SOURCE_DATE_EPOCH (the Makefile sets the commit
// time), so one commit gives the same bytes.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kube-node-ready/kube-node-ready/hack/releasegen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "releasegen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	created, err := sourceDate()
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return fmt.Errorf("usage: releasegen sbom|chart ARGS")
	}
	switch args[0] {
	case "sbom":
		img := releasegen.Image{}
		fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
		fs.StringVar(&img.Name, "name", "", "image name, e.g. kube-node-ready-agent")
		fs.StringVar(&img.Version, "version", "", "release version (the image tag)")
		fs.Func("binary", "os/arch=path of the image's binary for that platform (repeat per platform)", func(v string) error {
			plat, path, ok := strings.Cut(v, "=")
			if !ok || !strings.Contains(plat, "/") {
				return fmt.Errorf("want os/arch=path, got %q", v)
			}
			img.Binaries = append(img.Binaries, releasegen.Binary{Platform: plat, Path: path})
			return nil
		})
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		out, err := releasegen.SBOM(img, created)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	case "chart":
		if len(args) != 2 {
			return fmt.Errorf("usage: releasegen chart ARCHIVE.tgz")
		}
		return releasegen.NormalizeChartArchive(args[1], created)
	default:
		return fmt.Errorf("unknown command %q: want sbom or chart", args[0])
	}
}

// sourceDate is SOURCE_DATE_EPOCH, required: a release dated by the clock
// would not be reproducible.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970 (make release sets the commit time)", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}
