package doctor

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// TestDoctorSaysWhoJoinedWithoutAdmission: doctor warns of a node created
// after nodes the webhook admitted that carries no admission mark, not of
// a node from before injection, and counts no problem for it.
func TestDoctorSaysWhoJoinedWithoutAdmission(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	created := func(minute int, mark string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.CreationTimestamp = metav1.NewTime(base.Add(time.Duration(minute) * time.Minute))
			if mark != "" {
				n.Annotations = map[string]string{api.StartupTaintAdmissionAnnotation: mark}
			}
		}
	}
	f := doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil)
	for _, n := range []corev1.Node{node("before-install", nil, created(0, "")), node("admitted", nil, created(5, "added")),
		node("windows", nil, created(6, "not-selected")), node("missed", nil, created(7, ""))} {
		f.nodes[n.Name] = &n
	}
	code, _, errOut, _ := run(f, "", "doctor")
	if code != ExitOK || !strings.Contains(errOut, "warning: node missed joined without the webhook's admission") ||
		strings.Contains(errOut, "before-install") || strings.Count(errOut, "joined without") != 1 {
		t.Errorf("doctor: exit %d, stderr %q; want the missed node alone warned about", code, errOut)
	}
}
