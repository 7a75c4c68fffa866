package cli

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-node-ready/kube-node-ready/internal/logging"
)

// Problems collects every invalid value of a configuration, each in one
// form: "--flag: what is wrong". Validate methods report them all at once,
// so a user fixes a command line in one go.
type Problems struct {
	errs []error
}

// Add records a problem with flag (named without its dashes).
func (p *Problems) Add(flag, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
}

// Check records err, when not nil, as a problem with flag.
func (p *Problems) Check(flag string, err error) {
	if err != nil {
		p.Add(flag, "%v", err)
	}
}

// Append records problems already in the "--flag: ..." form (from a
// component's own validation).
func (p *Problems) Append(errs ...error) {
	for _, err := range errs {
		if err != nil {
			p.errs = append(p.errs, err)
		}
	}
}

// Err is every problem joined, or nil.
func (p *Problems) Err() error { return errors.Join(p.errs...) }

// QualifiedName checks a label, annotation, finalizer or taint key:
// an optional DNS prefix and a name, like example.com/name.
func QualifiedName(s string) error {
	if msgs := validation.IsQualifiedName(s); len(msgs) > 0 {
		return fmt.Errorf("%q is not a qualified name like example.com/name: %s", s, strings.Join(msgs, "; "))
	}
	return nil
}

// LogLevel checks debug, info, warn or error.
func LogLevel(s string) error {
	_, err := logging.ParseLevel(s)
	return err
}

// ParseTaint parses a taint as both binaries' flags write it:
// key=value:Effect, the value optional (key:Effect).
func ParseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("%q: want key=value:Effect", s)
	}
	key, value, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
	if err := QualifiedName(key); err != nil {
		return corev1.Taint{}, fmt.Errorf("%q: key: %w", s, err)
	}
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return corev1.Taint{}, fmt.Errorf("%q: value: %s", s, strings.Join(msgs, "; "))
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("%q: effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	return t, nil
}
