package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// InstallCRDs applies the CustomResourceDefinitions that `make tools` copied
// from tool's pinned Go module into bin/crds/<tool>/ (karpenter,
// prometheus-operator, cert-manager), server-side, and waits until the API
// server serves them. files names some of them (e.g.
// "karpenter.sh_nodeclaims.yaml"); none means all.
func (cp *ControlPlane) InstallCRDs(ctx context.Context, tool string, files ...string) error {
	dir := filepath.Join(cp.BinDir, "crds", tool)
	if len(files) == 0 {
		all, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(all) == 0 {
			return fmt.Errorf("no CRDs of %s in %s: run make tools", tool, dir)
		}
		files = all
	} else {
		for i, f := range files {
			files[i] = filepath.Join(dir, f)
		}
	}
	args := []string{"apply", "--server-side", "--force-conflicts"}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("CRD of %s: %w (run make tools)", tool, err)
		}
		args = append(args, "-f", f)
	}
	if _, err := cp.Kubectl(ctx, nil, args...); err != nil {
		return err
	}
	wait := []string{"wait", "--for=condition=Established", "--timeout=60s"}
	for _, f := range files {
		wait = append(wait, "-f", f)
	}
	_, err := cp.Kubectl(ctx, nil, wait...)
	return err
}
