package kubectlplugin

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// TestJoinedWithoutAdmissionIsSaid: status names a node created after
// nodes the webhook admitted that carries no admission mark, and not a
// node from before injection (doctor: TestDoctorSaysWhoJoinedWithoutAdmission).
func TestJoinedWithoutAdmissionIsSaid(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := func(name string, minute int, mark string) corev1.Node {
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(base.Add(time.Duration(minute) * time.Minute))}}
		if mark != "" {
			node.Annotations = map[string]string{api.StartupTaintAdmissionAnnotation: mark}
		}
		return node
	}
	nodes := []corev1.Node{n("before-install", 0, ""), n("admitted", 5, "added"), n("windows", 6, "not-selected"), n("missed", 7, "")}

	code, _, errOut, _ := run(newFake(nodes...), "", "status")
	if code != ExitOK || !strings.Contains(errOut, "warning: node missed joined without the webhook's admission") {
		t.Errorf("status: exit %d, stderr %q", code, errOut)
	}
	if strings.Contains(errOut, "before-install") || strings.Count(errOut, "joined without") != 1 {
		t.Errorf("status names more than the missed node: %q", errOut)
	}
}
