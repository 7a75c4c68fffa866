package flagenv

import (
	"flag"
	"fmt"
	"slices"
	"sync"
)

// Renamed is a flag whose name changed: Old keeps working for one release,
// with a warning, and sets the flag New.
type Renamed struct {
	// Old is the flag's previous name.
	Old string
	// New is the flag it now sets; it must already be defined.
	New string
	// Convert turns a value in the old flag's syntax into the new flag's,
	// when they differ (nil when they do not).
	Convert func(string) (string, error)
}

// Renames records which renamed flags a command line or environment used.
type Renames struct {
	mu   sync.Mutex
	used []string
}

// AddRenamed defines each old name on fs as an alias of its new flag. Call
// it after defining the new flags and before Apply, so the old names get
// environment twins too (the old flag's twin is the old variable name).
func AddRenamed(fs *flag.FlagSet, renamed []Renamed) *Renames {
	r := &Renames{}
	for _, rn := range renamed {
		target := fs.Lookup(rn.New)
		if target == nil {
			panic(fmt.Sprintf("flagenv: renamed flag --%s: no flag --%s", rn.Old, rn.New))
		}
		fs.Var(&alias{rn: rn, target: target.Value, renames: r}, rn.Old,
			fmt.Sprintf("deprecated: use --%s; removed in the next minor release", rn.New))
	}
	return r
}

// Warnings says, once per old name used, which flag replaces it; nil for
// a nil Renames (no flag renamed, or flags not yet registered).
func (r *Renames) Warnings() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, w := range r.used {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

type alias struct {
	rn      Renamed
	target  flag.Value
	renames *Renames
}

func (a *alias) String() string { return "" }

func (a *alias) Set(s string) error {
	v := s
	if a.rn.Convert != nil {
		var err error
		if v, err = a.rn.Convert(s); err != nil {
			return err
		}
	}
	if err := a.target.Set(v); err != nil {
		return err
	}
	a.renames.mu.Lock()
	a.renames.used = append(a.renames.used, fmt.Sprintf("flag --%s is deprecated and will be removed in the next minor release: use --%s", a.rn.Old, a.rn.New))
	a.renames.mu.Unlock()
	return nil
}

// IsBoolFlag lets a renamed boolean flag be given without a value.
func (a *alias) IsBoolFlag() bool {
	b, ok := a.target.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
