//go:build !mtmd

package api

// mtmdBuilt reports a build with the mtmd feature (image input): this one
// has none, so image parts are a 400 saying so.
const mtmdBuilt = false
