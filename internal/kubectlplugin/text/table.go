package text

import (
	"io"
	"slices"
	"text/tabwriter"
)

// NewTable is a writer that aligns tab-separated columns as kubectl does.
func NewTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

// Plural is one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// AppendNew appends to list the words of more not in it yet.
func AppendNew(list []string, more ...string) []string {
	for _, w := range more {
		if !slices.Contains(list, w) {
			list = append(list, w)
		}
	}
	return list
}
