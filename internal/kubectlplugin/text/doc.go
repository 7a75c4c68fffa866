// Package text is how `kubectl node-ready`'s commands write for a person:
// every value read from the cluster escaped (escape.go), tables aligned as
// kubectl's, and Events as lines. The plugin and its doctor share it.
package text
