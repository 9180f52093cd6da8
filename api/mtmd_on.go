//go:build mtmd

package api

// mtmdBuilt reports a build with the mtmd feature (image input).
const mtmdBuilt = true
